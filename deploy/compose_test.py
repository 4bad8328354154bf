"""``make compose-test``: docker-compose.yml on a real Docker engine, used and broken from the host.

It installs and starts the engine if needed, builds the local images (:mod:`deploy.images`), and starts
the real compose file with only its image variables set, then: waits for every healthcheck, creates a
topic and produces and consumes through the published ports with confluent-kafka, asks Prometheus
whether every target is up, and takes brokers away three ways (``docker kill``, ``docker pause`` past
the ZooKeeper session timeout, ``docker network disconnect``), checking each time that the controller
moves leadership and that the broker rejoins with a new epoch. It ends with ``docker compose down -v``,
also when a step fails, and checks that no container, network or volume of the run is left.

Grafana is left out: no image of it can be built without a registry. The run uses a project name of
its own (``-p``), so it never touches a cluster someone started from the same file.
"""

from __future__ import annotations

import argparse
import json
import logging
import shutil
import socket
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from daemon.config import ZOOKEEPER_SESSION_TIMEOUT_MS, parse_properties
from deploy import images as local_images
from deploy.compose import (
    COMPOSE_FILE,
    REPO,
    Compose,
    daemon_role,
    disconnect,
    reconnect,
    session_timeout_s,
    zookeeper_id,
)
from deploy.engine import docker, ensure_engine, run

__all__ = ["Metadata", "main"]


SECURE_FILES = (COMPOSE_FILE, REPO / "docker-compose.secure.yml")
CACHE = REPO / ".run" / "docker"
PROJECT = "kafka-zk-control-plane-test"
BOOTSTRAP = "localhost:9092,localhost:9093,localhost:9094"
PROMETHEUS = "http://127.0.0.1:9090"
PUBLISHED_PORTS = (9090, 9092, 9093, 9094)
TOPIC = "compose-test"
PARTITIONS, REPLICATION_FACTOR = 6, 3
RECORDS = 600
HEALTHY_TIMEOUT_S = 180.0
POLL_S = 1.0

T = TypeVar("T")


class CheckFailed(AssertionError):
    """A step saw something other than what it waits for."""


def wait_until(what: str, read: Callable[[], T], accept: Callable[[T], bool], timeout: float) -> T:
    """Call ``read`` until ``accept`` takes what it returns, and return that; raise after ``timeout``.

    A ``read`` that raises counts as a "not yet" (a broker may be unreachable for a while); the last
    error is in the message if time runs out.
    """
    deadline = time.monotonic() + timeout
    last_error: Exception | None = None
    while True:
        try:
            value = read()
            if accept(value):
                return value
        except Exception as exc:  # a probe against a cluster in flux
            last_error = exc
        if time.monotonic() > deadline:
            detail = f" (last error: {last_error})" if last_error else ""
            raise CheckFailed(f"timed out after {timeout:.0f} s waiting for {what}{detail}")
        time.sleep(POLL_S)


# ---------------------------------------------------------------- compose and the cluster


READY = frozenset({"healthy", "exited 0"})
"""A service is ready when its healthcheck passes, or when it is a one-shot that succeeded."""


@dataclass(frozen=True)
class Metadata:
    """What a client on the host sees: live brokers, and each partition's leader and ISR."""

    brokers: frozenset[int]
    leaders: dict[int, int]
    isrs: dict[int, frozenset[int]]

    def led_by(self, broker: int) -> list[int]:
        return sorted(p for p, leader in self.leaders.items() if leader == broker)

    def fenced(self, broker: int) -> bool:
        """``broker`` is gone from the metadata, leads nothing and is in no ISR."""
        in_isr = any(broker in isr for isr in self.isrs.values())
        return broker not in self.brokers and not self.led_by(broker) and not in_isr

    def whole(self, broker_count: int) -> bool:
        """Every broker is back, every partition has a leader and a full ISR."""
        full = all(len(isr) == REPLICATION_FACTOR for isr in self.isrs.values())
        leaders = all(leader >= 0 for leader in self.leaders.values())
        return len(self.brokers) == broker_count and full and leaders and len(self.leaders) == PARTITIONS


def client_config(security: dict[str, str], **settings: Any) -> dict[str, Any]:
    """A client's settings with ``security`` (the secured variant's); librdkafka's own log (the
    disconnects that faults cause) goes to a file."""
    return {"bootstrap.servers": BOOTSTRAP, **security, "logger": client_log(), **settings}


def client_log() -> logging.Logger:
    """``.run/docker/clients.log``: where the clients' librdkafka log lines go."""
    logger = logging.getLogger("deploy.compose_test.clients")
    if not logger.handlers:
        CACHE.mkdir(parents=True, exist_ok=True)
        logger.addHandler(logging.FileHandler(CACHE / "clients.log"))
        logger.setLevel(logging.DEBUG)
        logger.propagate = False
    return logger


def admin_client(security: dict[str, str]) -> Any:
    from confluent_kafka.admin import AdminClient

    return AdminClient(client_config(security, **{"socket.timeout.ms": 5000}))


def metadata(admin: Any) -> Metadata:
    """The topic's metadata, from whichever broker answers."""
    md = admin.list_topics(topic=TOPIC, timeout=5)
    topic = md.topics[TOPIC]
    if topic.error is not None:
        raise CheckFailed(f"metadata for {TOPIC}: {topic.error}")
    return Metadata(
        brokers=frozenset(md.brokers),
        leaders={p: pm.leader for p, pm in topic.partitions.items()},
        isrs={p: frozenset(pm.isrs) for p, pm in topic.partitions.items()},
    )


def round_trip(topic: str, count: int, tag: str, security: dict[str, str]) -> int:
    """Produce ``count`` records with acks=all over every partition, then read them all back by
    assignment (no group); the number read back."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition

    failures: list[str] = []
    producer = Producer(client_config(security, acks="all", **{"enable.idempotence": False}))
    for i in range(count):
        producer.produce(
            topic,
            key=f"{tag}-{i}".encode(),
            value=f"record {i} ({tag})".encode(),
            partition=i % PARTITIONS,
            on_delivery=lambda err, _msg: failures.append(str(err)) if err else None,
        )
    if producer.flush(30) or failures:
        raise CheckFailed(f"records not acknowledged: {failures[:3]}")
    consumer = Consumer(client_config(security, **{"group.id": "compose-test", "enable.auto.commit": False}))
    try:
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
        keys: set[bytes] = set()
        deadline = time.monotonic() + 60
        while len(keys) < count and time.monotonic() < deadline:
            for message in consumer.consume(num_messages=1000, timeout=0.5):
                key = message.key() or b""
                if message.error() is None and key.startswith(f"{tag}-".encode()):
                    keys.add(key)
    finally:
        consumer.close()
    if len(keys) != count:
        raise CheckFailed(f"read back {len(keys)} of {count} records")
    return len(keys)


# ---------------------------------------------------------------- the run


@dataclass
class Step:
    name: str
    seconds: float
    detail: str
    ok: bool


@dataclass
class Run:
    """What the steps share: compose, a client, the session timeout, and the steps' record."""

    compose: Compose
    session_timeout_s: float = ZOOKEEPER_SESSION_TIMEOUT_MS.default / 1000
    broker_count: int = 3
    daemon_count: int = 5
    zookeeper_count: int = 3
    admin: Any = None
    cluster_touched: bool = False
    """Set once compose has been asked to do anything: from then on, the run ends with ``down -v``."""
    security: dict[str, str] = field(default_factory=dict)
    """The clients' security settings: none, or the secured variant's client.properties."""
    disrupted: list[int] = field(default_factory=list)
    """Brokers a fault has hit, in order: each fault takes another one."""
    steps: list[Step] = field(default_factory=list)

    @property
    def rejoin_timeout_s(self) -> float:
        """A broker is dropped after the session timeout; give the controller as long again to act."""
        return 2 * self.session_timeout_s + 30

    def client(self) -> Any:
        """One Admin API client for the whole run (it finds whichever broker answers)."""
        if self.admin is None:
            self.admin = admin_client(self.security)
        return self.admin

    def metadata(self) -> Metadata:
        return metadata(self.client())

    def wait_whole(self) -> Metadata:
        return wait_until(
            "every broker back with full ISRs",
            self.metadata,
            lambda md: md.whole(self.broker_count),
            self.rejoin_timeout_s,
        )

    def wait_fenced(self, broker: int) -> Metadata:
        return wait_until(
            f"broker {broker} to be dropped from metadata, leaderships and ISRs",
            self.metadata,
            lambda md: md.fenced(broker),
            self.rejoin_timeout_s,
        )

    def wait_registered(self, broker: int, above_epoch: int) -> int:
        """``broker``'s new epoch once it has registered again with a higher one."""
        return wait_until(
            f"broker {broker} to register with an epoch above {above_epoch}",
            lambda: self.compose.brokers().get(broker, 0),
            lambda epoch: epoch > above_epoch,
            self.rejoin_timeout_s,
        )

    def wait_unregistered(self, broker: int) -> bool:
        return wait_until(
            f"broker {broker}'s registration to expire",
            lambda: broker not in self.compose.brokers(),
            bool,
            self.rejoin_timeout_s,
        )

    @contextmanager
    def step(self, name: str) -> Iterator[list[str]]:
        """Time a step and print it; the body appends what it saw to the yielded list."""
        notes: list[str] = []
        print(f"--> {name}", flush=True)
        start = time.monotonic()
        try:
            yield notes
        except BaseException as exc:
            self._record(name, start, f"FAILED: {exc}", ok=False)
            raise
        self._record(name, start, "; ".join(notes), ok=True)

    def _record(self, name: str, start: float, detail: str, *, ok: bool) -> None:
        step = Step(name, time.monotonic() - start, detail, ok)
        self.steps.append(step)
        print(
            f"    {'ok' if ok else 'FAILED'} in {step.seconds:.1f} s{': ' + detail if detail else ''}",
            flush=True,
        )


def step_engine(run_: Run) -> str:
    """Debian's docker.io and debootstrap installed, dockerd running (started in the background if not)."""
    return ensure_engine(CACHE / "dockerd.log")


def step_images(run_: Run) -> str:
    """The local images built (or reused), and compose pointed at them."""
    images = local_images.build_all(CACHE)
    run_.compose.environment.update(images.compose_environment())
    model = run_.compose.model()
    roles = {name: daemon_role(service) for name, service in model["services"].items()}
    run_.daemon_count = sum(role is not None for role in roles.values())
    run_.broker_count = sum(role == "broker" for role in roles.values())
    run_.session_timeout_s = max(session_timeout_s(model["services"][n]) for n, r in roles.items() if r)
    run_.zookeeper_count = sum(zookeeper_id(service) is not None for service in model["services"].values())
    return ", ".join(f"{k}={v}" for k, v in images.compose_environment().items())


def step_preflight(run_: Run) -> str:
    """No cluster of an earlier, interrupted run left, and the published ports free on this machine."""
    run_.cluster_touched = True
    run_.compose("down", "--volumes", "--remove-orphans", "--timeout", "5")
    taken = [port for port in PUBLISHED_PORTS if _listening(port)]
    if taken:
        raise CheckFailed(f"ports {taken} are in use here; docker-compose.yml publishes them")
    return f"ports {', '.join(map(str, PUBLISHED_PORTS))} free"


def _listening(port: int) -> bool:
    with socket.socket() as probe:
        probe.settimeout(1)
        return probe.connect_ex(("127.0.0.1", port)) == 0


def step_up(run_: Run) -> str:
    """``docker compose up -d`` of every service but those left out, never building or pulling."""
    services = run_.compose.services()
    run_.compose("up", "--detach", "--no-build", "--pull", "never", *services)
    return f"{len(services)} services: {' '.join(services)}"


def step_healthy(run_: Run) -> str:
    """Every container healthy by its own healthcheck, then every broker seen by clients."""
    states = wait_until(
        "every service to be healthy",
        run_.compose.states,
        lambda states: set(states.values()) <= READY,
        HEALTHY_TIMEOUT_S,
    )
    brokers = wait_until(
        "the brokers in metadata",
        lambda: _cluster_brokers(run_),
        lambda brokers: len(brokers) == run_.broker_count,
        HEALTHY_TIMEOUT_S,
    )
    return f"{len(states)} services ready; brokers {sorted(brokers)}; epochs {run_.compose.brokers()}"


def _cluster_brokers(run_: Run) -> set[int]:
    return set(run_.client().list_topics(timeout=5).brokers)


def step_topic(run_: Run) -> str:
    """A topic created through the Admin API, every partition with a leader and a full ISR."""
    from confluent_kafka.admin import NewTopic

    futures = run_.client().create_topics([NewTopic(TOPIC, PARTITIONS, REPLICATION_FACTOR)])
    for future in futures.values():
        future.result(30)
    md = run_.wait_whole()
    return f"{TOPIC}: leaders {md.leaders}"


def step_round_trip(run_: Run) -> str:
    """Records produced with acks=all and read back, through the ports published on the host."""
    return f"{round_trip(TOPIC, RECORDS, 'first', run_.security)} records produced and read back"


def step_prometheus(run_: Run) -> str:
    """Prometheus (its HTTP API) scrapes every daemon and the ZooKeeper exporter and finds each up,
    and the exporter reaches every ZooKeeper server."""
    expected = len(scrape_targets())

    def targets() -> dict[str, str]:
        active = _prometheus_api("targets?state=active")["activeTargets"]
        return {t["labels"]["instance"]: t["health"] for t in active}

    def all_up(health: dict[str, str]) -> bool:
        return len(health) == expected and set(health.values()) == {"up"}

    up = wait_until(f"{expected} targets up in Prometheus", targets, all_up, 90)

    def servers_up() -> dict[str, float]:
        result = _prometheus_api("query?query=zookeeper_up")["result"]
        return {r["metric"]["server"]: float(r["value"][1]) for r in result}

    zookeeper = wait_until(
        f"zookeeper_up 1 for {run_.zookeeper_count} servers",
        servers_up,
        lambda found: len(found) == run_.zookeeper_count and set(found.values()) == {1.0},
        90,
    )
    return f"targets up: {', '.join(sorted(up))}; ZooKeeper servers up: {', '.join(sorted(zookeeper))}"


def scrape_targets() -> list[str]:
    """Every target of Prometheus's file_sd lists (deploy/prometheus/targets)."""
    files = sorted((REPO / "deploy" / "prometheus" / "targets").glob("*.json"))
    return [target for path in files for group in json.loads(path.read_text()) for target in group["targets"]]


def _prometheus_api(path: str) -> Any:
    with urllib.request.urlopen(f"{PROMETHEUS}/api/v1/{path}", timeout=5) as response:
        return json.load(response)["data"]


def step_client_config(run_: Run) -> str:
    """The secured variant's client settings (SASL_SSL as admin), copied out of its secrets volume."""
    target = CACHE / "secure-client"
    shutil.rmtree(target, ignore_errors=True)
    run_.compose("cp", "broker-1:/secrets/client", str(target))
    path = target / "client.properties"
    settings = parse_properties(path.read_text())
    settings["ssl.ca.location"] = str(target / settings["ssl.ca.location"])
    run_.security = {k: v for k, v in settings.items() if k != "bootstrap.servers"}
    return f"{path}: " + ", ".join(f"{k}={v}" for k, v in settings.items() if "password" not in k)


def take_away(run_: Run, broker: int, cut: Callable[[], object], heal: Callable[[], object]) -> str:
    """``cut`` a broker off until it is fenced (its registration expired; out of the metadata, every
    leadership and every ISR), then ``heal`` it and wait until it is back with a new epoch and every
    ISR is full again. Says how long it took and where its leaderships went."""
    before = run_.metadata()
    epoch = run_.compose.brokers()[broker]
    cut()
    started = time.monotonic()
    try:
        run_.wait_unregistered(broker)
        after = run_.wait_fenced(broker)
    finally:
        fenced_s = time.monotonic() - started
        heal()
    new_epoch = run_.wait_registered(broker, epoch)
    run_.wait_whole()
    moves = ", ".join(f"{p}: {broker}->{after.leaders[p]}" for p in before.led_by(broker))
    return (
        f"broker {broker} fenced after {fenced_s:.1f} s, leaderships moved {{{moves}}}; "
        f"back with epoch {epoch} -> {new_epoch}"
    )


def step_kill(run_: Run) -> str:
    """``docker kill`` of a broker: once its ZooKeeper session ends, the controller moves its
    leaderships; ``docker start``: it registers with a new epoch and the ISRs fill up again."""
    broker = _next_broker(run_)
    container = run_.compose.container(f"broker-{broker}")
    return take_away(run_, broker, lambda: docker("kill", container), lambda: docker("start", container))


def step_pause(run_: Run) -> str:
    """``docker pause`` of a broker past its ZooKeeper session timeout, until it is fenced; then
    ``docker unpause``: it finds its session expired and registers again with a new epoch."""
    broker = _next_broker(run_)
    container = run_.compose.container(f"broker-{broker}")
    return take_away(run_, broker, lambda: docker("pause", container), lambda: docker("unpause", container))


def step_disconnect(run_: Run) -> str:
    """``docker network disconnect`` of a broker until it is fenced, then ``docker network connect``
    with the aliases compose gave it: it registers again with a new epoch."""
    broker = _next_broker(run_)
    container = run_.compose.container(f"broker-{broker}")
    networks: dict[str, Any] = {}
    return take_away(
        run_, broker, lambda: networks.update(disconnect(container)), lambda: reconnect(container, networks)
    )


def _next_broker(run_: Run) -> int:
    """A broker no fault has hit yet, leading as many partitions as any (so that leadership moves)."""
    md = run_.metadata()
    spared = sorted(set(md.brokers) - set(run_.disrupted)) or sorted(md.brokers)
    broker = max(spared, key=lambda b: (len(md.led_by(b)), -b))
    run_.disrupted.append(broker)
    return broker


def step_after_faults(run_: Run) -> str:
    """Records produced and read back again, through every broker, once all three have come back."""
    return f"{round_trip(TOPIC, RECORDS, 'after-faults', run_.security)} records produced and read back"


CHAOS_DIR = CACHE / "chaos"
CHAOS_ARGS = ("--duration", "40", "--interval", "6", "--seed", "1")
CHAOS_FAULTS = "kill,bounce,restart,pause,isolate,zookeeper-leader-kill"


def step_chaos(run_: Run) -> str:
    """``python -m chaos run --compose`` against the project: faults on containers under a recorded
    workload, the same verdict as on local processes; then the daemons' event logs, copied out of the
    containers, are audited by ``python -m pipeline audit`` beside the run."""
    shutil.rmtree(CHAOS_DIR, ignore_errors=True)
    chaos = [sys.executable, "-m", "chaos", "run", "--compose", str(COMPOSE_FILE), "--project", PROJECT]
    chaos += ["--dir", str(CHAOS_DIR), *CHAOS_ARGS, "--faults", CHAOS_FAULTS]
    result = _python(chaos, run_.compose.environment)
    lines = [line for line in result.splitlines() if line.strip()]
    runs = sorted((CHAOS_DIR / "chaos").glob("run-*/events.jsonl"))
    if len(runs) != 1:
        raise CheckFailed(f"expected one run under {CHAOS_DIR / 'chaos'}, found {runs}")
    events = [json.loads(line) for line in runs[0].read_text().splitlines()]
    faults = [
        f"{e['fault']} {e['target']}"
        for e in events
        if e["kind"] == "fault_injected" and e["fault"] != "resume"
    ]
    copied = sorted(p.parent.name for p in CHAOS_DIR.glob("*/events.jsonl"))
    if len(copied) != run_.daemon_count:
        raise CheckFailed(f"event logs copied out of {copied}, expected {run_.daemon_count} daemons")
    audit = [sys.executable, "-m", "pipeline", "audit", "--dir", str(CHAOS_DIR), "--json"]
    report = json.loads(_python(audit, {}))
    checks = {c["name"]: c["verdict"] for c in report["checks"]}
    verdict = next((line for line in lines if line.startswith("ok: every acknowledged")), lines[-1])
    return (
        f"faults {', '.join(faults)}; {verdict}; event logs of {', '.join(copied)}; audit: "
        f"{sum(v == 'passed' for v in checks.values())} of {len(checks)} checks passed"
    )


def _python(argv: list[str], environment: dict[str, str]) -> str:
    """A project command's stdout; its exit status must be 0 (its output is in the failure)."""
    done = run(argv, env=environment, check=False, timeout=900)
    if done.returncode != 0:
        output = (done.stdout + done.stderr)[-3000:]
        raise CheckFailed(f"{' '.join(argv[2:5])} exited {done.returncode}:\n{output}")
    return done.stdout


STEPS: tuple[tuple[str, Callable[[Run], str]], ...] = (
    ("engine", step_engine),
    ("images", step_images),
    ("preflight", step_preflight),
    ("up", step_up),
    ("healthy", step_healthy),
    ("topic", step_topic),
    ("produce and consume", step_round_trip),
    ("prometheus targets", step_prometheus),
    ("kill a broker", step_kill),
    ("pause a broker", step_pause),
    ("disconnect a broker", step_disconnect),
    ("produce and consume after the faults", step_after_faults),
    ("chaos on containers, audited", step_chaos),
)


SECURE_STEPS: tuple[tuple[str, Callable[[Run], str]], ...] = (
    *STEPS[:4],
    ("client config", step_client_config),
    *STEPS[4:8],
)
"""The secured variant: up, healthy, a round trip with the generated client settings, Prometheus."""


def step_down(run_: Run) -> str:
    """``docker compose down -v``, then nothing of the project left: containers, networks, volumes."""
    run_.admin = None  # its connections would only report the brokers going away
    run_.compose("down", "--volumes", "--remove-orphans", "--timeout", "30")
    left = {kind: ids for kind, ids in run_.compose.leftovers().items() if ids}
    if left:
        raise CheckFailed(f"left behind: {left}")
    return "no container, network or volume left"


def print_logs(run_: Run) -> None:
    """The containers' last lines, to see why a step failed."""
    print(run_.compose("logs", "--no-color", "--tail", "30", check=False, timeout=60), flush=True)


def execute(run_: Run, steps: Sequence[tuple[str, Callable[[Run], str]]]) -> bool:
    """Run ``steps`` in order until one fails, then always take the cluster down; did all pass?"""
    passed = True
    try:
        for name, function in steps:
            with run_.step(name) as notes:
                notes.append(function(run_))
    except Exception as exc:  # any failure fails the run; the cluster goes down all the same
        passed = False
        print(f"!! {type(exc).__name__}: {exc}", flush=True)
        if run_.cluster_touched:
            print_logs(run_)
    finally:
        if run_.cluster_touched:
            try:
                with run_.step("down") as notes:
                    notes.append(step_down(run_))
            except Exception as exc:
                passed = False
                print(f"!! {exc}", flush=True)
    return passed


def summary(run_: Run, total_s: float) -> str:
    width = max(len(step.name) for step in run_.steps)
    lines = [
        f"{step.name:<{width}}  {step.seconds:6.1f} s  {'ok' if step.ok else 'FAILED'}" for step in run_.steps
    ]
    return "\n".join([*lines, f"{'total':<{width}}  {total_s:6.1f} s"])


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m deploy.compose_test", description=__doc__.split("\n")[0])
    parser.add_argument(
        "--secure",
        action="store_true",
        help="the secured variant (docker-compose.secure.yml on top): up, a round trip as admin over "
        "SASL_SSL, Prometheus, down",
    )
    parser.add_argument(
        "--report", type=Path, help="step times, as JSON (default: .run/docker/compose-test*.json)"
    )
    args = parser.parse_args(argv)
    report_path = args.report or CACHE / ("compose-test-secure.json" if args.secure else "compose-test.json")
    started = time.monotonic()
    if args.secure:
        zk_config = ("--zk-config", "/secrets/zookeeper-admin.properties")
        run_ = Run(Compose(environment={}, project=PROJECT, files=SECURE_FILES, admin_args=zk_config))
        passed = execute(run_, SECURE_STEPS)
    else:
        run_ = Run(Compose(environment={}, project=PROJECT))
        passed = execute(run_, STEPS)
    total = time.monotonic() - started
    print(summary(run_, total))
    report_path.parent.mkdir(parents=True, exist_ok=True)
    report = {"passed": passed, "total_s": round(total, 1), "steps": [asdict(step) for step in run_.steps]}
    report_path.write_text(json.dumps(report, indent=2) + "\n")
    failed = sum(not step.ok for step in run_.steps)
    print(f"compose-test: {len(run_.steps) - failed} passed, {failed} failed")
    return 0 if passed else 1


if __name__ == "__main__":
    sys.exit(main())
