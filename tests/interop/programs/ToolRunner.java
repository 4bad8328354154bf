// Kafka's command-line tools run one after another in one JVM, each by its main class, as Kafka's own
// tool tests run them: stdout, stderr and stdin switched per run; the first Exit.exit of a run is its
// exit status (a tool's code may catch what Exit.exit throws here and exit again); the shutdown hooks a
// tool adds through Exit run when its main returns, as the JVM would run them at exit.
//
// java -cp <Kafka jars> ToolRunner.java <runs.json>
//
// runs.json is a list of {"name", "main", "args": [...], "stdin": text or null, "until": regex or null,
// "timeout_s": seconds}. A run with "until" is repeated (200 ms apart) until its stdout matches, within
// its timeout: how a user waits with kafka-reassign-partitions --verify. Prints one JSON object on the
// last line of the real stdout: {"name": {"code", "stdout", "stderr", "seconds", "attempts"}}.

import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.File;
import java.io.OutputStream;
import java.io.PrintStream;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.lang.reflect.Proxy;
import java.nio.charset.StandardCharsets;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.regex.Pattern;

public class ToolRunner {
    /** What a tool's Exit.exit or Exit.halt throws here instead of ending the JVM. */
    static final class ExitCalled extends RuntimeException {
        final int code;

        ExitCalled(int code) {
            super("exit " + code, null, false, false);
            this.code = code;
        }
    }

    /** One stream for the JVM's lifetime whose bytes go to the current run's buffer. */
    static final class Switch extends OutputStream {
        volatile ByteArrayOutputStream target = new ByteArrayOutputStream();

        @Override
        public void write(int b) {
            target.write(b);
        }

        @Override
        public void write(byte[] b, int off, int len) {
            target.write(b, off, len);
        }
    }

    static final Switch OUT = new Switch();
    static final Switch ERR = new Switch();
    /** The current run's first exit status, and the shutdown hooks it added. */
    static volatile Integer exitCode;
    static final List<Runnable> HOOKS = new java.util.concurrent.CopyOnWriteArrayList<>();

    public static void main(String[] args) throws Exception {
        PrintStream real = System.out;
        List<Map<String, Object>> runs = new ObjectMapper().readValue(new File(args[0]), List.class);
        trapExit();
        System.setOut(new PrintStream(OUT, true, StandardCharsets.UTF_8));
        System.setErr(new PrintStream(ERR, true, StandardCharsets.UTF_8));
        Map<String, Object> results = new LinkedHashMap<>();
        for (Map<String, Object> run : runs) {
            results.put((String) run.get("name"), repeat(run));
        }
        real.println(new ObjectMapper().writeValueAsString(results));
        real.flush();
        Runtime.getRuntime().halt(0); // the tools are done; their shutdown hooks have nothing left to do
    }

    /** Kafka's Exit (org.apache.kafka.common.utils in 3.x, ...utils.internals in 4.x) throws instead. */
    static void trapExit() throws Exception {
        Class<?> exit;
        try {
            exit = Class.forName("org.apache.kafka.common.utils.internals.Exit");
        } catch (ClassNotFoundException e) {
            exit = Class.forName("org.apache.kafka.common.utils.Exit");
        }
        Class<?> procedure = Class.forName(exit.getName() + "$Procedure");
        Object throwing = implement(procedure, arguments -> {
            if (exitCode == null) exitCode = (Integer) arguments[0];
            throw new ExitCalled((Integer) arguments[0]);
        });
        exit.getMethod("setExitProcedure", procedure).invoke(null, throwing);
        exit.getMethod("setHaltProcedure", procedure).invoke(null, throwing);
        Class<?> adder = Class.forName(exit.getName() + "$ShutdownHookAdder");
        Object collecting = implement(adder, arguments -> HOOKS.add((Runnable) arguments[1]));
        exit.getMethod("setShutdownHookAdder", adder).invoke(null, collecting);
    }

    interface Body {
        Object call(Object[] arguments);
    }

    /** {@code face}, a one-method interface, implemented by {@code body}. */
    static Object implement(Class<?> face, Body body) {
        return Proxy.newProxyInstance(face.getClassLoader(), new Class<?>[] {face}, (proxy, method, arguments) -> {
            switch (method.getName()) {
                case "hashCode":
                    return System.identityHashCode(proxy);
                case "equals":
                    return proxy == arguments[0];
                case "toString":
                    return "ToolRunner's " + face.getSimpleName();
                default:
                    body.call(arguments);
                    return null;
            }
        });
    }

    static Map<String, Object> repeat(Map<String, Object> run) throws Exception {
        String until = (String) run.get("until");
        long deadline = System.currentTimeMillis() + 1000L * ((Number) run.get("timeout_s")).longValue();
        int attempts = 0;
        while (true) {
            attempts++;
            Map<String, Object> result = once(run, deadline);
            result.put("attempts", attempts);
            boolean done = until == null || Pattern.compile(until).matcher((String) result.get("stdout")).find();
            if (done || System.currentTimeMillis() > deadline) return result;
            Thread.sleep(200);
        }
    }

    static Map<String, Object> once(Map<String, Object> run, long deadline) throws Exception {
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        ByteArrayOutputStream err = new ByteArrayOutputStream();
        OUT.target = out;
        ERR.target = err;
        String stdin = (String) run.get("stdin");
        System.setIn(new ByteArrayInputStream(stdin == null ? new byte[0] : stdin.getBytes(StandardCharsets.UTF_8)));
        String[] toolArgs = ((List<?>) run.get("args")).toArray(new String[0]);
        Method main = Class.forName((String) run.get("main")).getMethod("main", String[].class);
        int[] code = {0};
        exitCode = null;
        HOOKS.clear();
        long started = System.nanoTime();
        Thread tool = new Thread(() -> {
            code[0] = invoke(main, toolArgs);
            for (Runnable hook : HOOKS) hook.run();
        }, "tool-" + run.get("name"));
        tool.setDaemon(true);
        tool.start();
        tool.join(Math.max(1, deadline - System.currentTimeMillis()));
        if (tool.isAlive()) {
            code[0] = -1;
            System.err.println("ToolRunner: still running at the deadline");
        } else if (exitCode != null) {
            code[0] = exitCode;
        }
        System.out.flush();
        System.err.flush();
        Map<String, Object> result = new LinkedHashMap<>();
        result.put("code", code[0]);
        result.put("stdout", out.toString(StandardCharsets.UTF_8));
        result.put("stderr", err.toString(StandardCharsets.UTF_8));
        result.put("seconds", (System.nanoTime() - started) / 1e9);
        return result;
    }

    static int invoke(Method main, String[] args) {
        try {
            main.invoke(null, (Object) args);
            return 0;
        } catch (InvocationTargetException e) {
            Throwable cause = e.getCause();
            for (Throwable t = cause; t != null; t = t.getCause()) {
                if (t instanceof ExitCalled) return ((ExitCalled) t).code;
            }
            cause.printStackTrace();
            return 1;
        } catch (ReflectiveOperationException e) {
            e.printStackTrace();
            return 1;
        }
    }
}
