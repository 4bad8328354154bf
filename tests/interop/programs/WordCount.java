// Kafka Streams' word count (Kafka's WordCountDemo) against the project's cluster, at_least_once.
//
// java -cp <kafka-streams jars> WordCount.java <client.properties> <application id> <input> <output>
//      <state dir> [key=value ...]
//
// Counts the words of the lines in <input> into <output> (String keys, Long values) until SIGTERM. The
// extra key=value settings are Streams configs (say, topic.cleanup.policy=delete). Each state change is
// a line "state <NEW>" on stdout; a failure is a line "failed <exception>" and exit status 1.

import java.io.FileReader;
import java.util.Arrays;
import java.util.Locale;
import java.util.Properties;
import java.util.concurrent.CountDownLatch;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler;
import org.apache.kafka.streams.kstream.KStream;
import org.apache.kafka.streams.kstream.Produced;

public class WordCount {
    public static void main(String[] args) throws Exception {
        Properties props = new Properties();
        try (FileReader reader = new FileReader(args[0])) {
            props.load(reader);
        }
        props.put(StreamsConfig.APPLICATION_ID_CONFIG, args[1]);
        props.put(StreamsConfig.STATE_DIR_CONFIG, args[4]);
        props.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, StreamsConfig.AT_LEAST_ONCE);
        props.put(StreamsConfig.DEFAULT_KEY_SERDE_CLASS_CONFIG, Serdes.String().getClass().getName());
        props.put(StreamsConfig.DEFAULT_VALUE_SERDE_CLASS_CONFIG, Serdes.String().getClass().getName());
        // As Kafka's WordCountDemo: no record cache, so every count is sent on; commits every second.
        props.put("statestore.cache.max.bytes", "0");
        props.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, "1000");
        for (int i = 5; i < args.length; i++) {
            String[] setting = args[i].split("=", 2);
            props.put(setting[0], setting[1]);
        }

        StreamsBuilder builder = new StreamsBuilder();
        KStream<String, String> lines = builder.stream(args[2]);
        lines.flatMapValues(line -> Arrays.asList(line.toLowerCase(Locale.ROOT).split("\\W+")))
                .groupBy((key, word) -> word)
                .count()
                .toStream()
                .to(args[3], Produced.with(Serdes.String(), Serdes.Long()));

        KafkaStreams streams = new KafkaStreams(builder.build(), props);
        CountDownLatch stopped = new CountDownLatch(1);
        int[] status = {0};
        streams.setStateListener((now, before) -> {
            System.out.println("state " + now);
            System.out.flush();
            if (now == KafkaStreams.State.ERROR || now == KafkaStreams.State.NOT_RUNNING) stopped.countDown();
        });
        streams.setUncaughtExceptionHandler(exception -> {
            StringBuilder chain = new StringBuilder("failed " + exception);
            for (Throwable cause = exception.getCause(); cause != null; cause = cause.getCause()) {
                chain.append(" caused by ").append(cause);
            }
            System.out.println(chain);
            System.out.flush();
            status[0] = 1;
            return StreamsUncaughtExceptionHandler.StreamThreadExceptionResponse.SHUTDOWN_CLIENT;
        });
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            streams.close();
            stopped.countDown();
        }));
        streams.start();
        stopped.await();
        streams.close();
        System.exit(status[0]);
    }
}
