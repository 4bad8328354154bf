"""Controller metrics as Prometheus scrapes them: JMX-exporter names, values that follow the context.

The Controller is built but never started: construction does no I/O, so its context, store and event
manager can be set directly and ``update()`` called as the event task would after each event.
"""

from __future__ import annotations

import pytest

from controller import config as controller_config
from controller import events
from controller.controller import Controller
from controller.events import ControllerState
from controller.metrics import ControllerMetrics
from controller.model import NO_LEADER, LeaderAndIsr, LeaderIsrAndControllerEpoch, TopicPartition
from controller.state_tables import PartitionState
from daemon.metrics import Metrics
from tests.controller.builders import broker
from tests.support.metrics import registry_samples
from zkstore.fencing import FencedWriter, FencingToken

KC = "kafka_controller_kafkacontroller_"
EM = "kafka_controller_controllereventmanager_"
STATS = "kafka_controller_controllerstats_"
EPOCH_1, EPOCH_2, EPOCH_3 = 0x1_0000_0010, 0x1_0000_0020, 0x1_0000_0030


class Bound:
    def __init__(self) -> None:
        config = controller_config.load(
            None, environ={"KAFKA_CONTROLLER_ID": "1001", "KAFKA_ZOOKEEPER_CONNECT": "127.0.0.1:1"}
        )
        self.metrics = Metrics()
        self.controller_metrics = ControllerMetrics(self.metrics)
        self.controller = Controller(config, metrics=self.metrics, timings=self.controller_metrics)
        self.controller_metrics.bind(self.controller)

    def activate(self, epoch: int = 3) -> None:
        """What winning the election leaves behind: a fencing token and the epoch in the context."""
        self.controller.store.writer = FencedWriter(None, FencingToken(epoch, 2))  # type: ignore[arg-type]
        self.controller.context.epoch = epoch

    def resign(self) -> None:
        self.controller.store.writer = None
        self.controller.context.reset()

    def update(self) -> dict[str, float]:
        self.controller_metrics.update_soon()
        return registry_samples(self.metrics)


def lead(bound: Bound, topic: str, replicas: list[tuple[int, ...]], leaders: list[int]) -> None:
    ctx = bound.controller.context
    ctx.assignments[topic] = dict(enumerate(replicas))
    for p, leader in enumerate(leaders):
        tp = TopicPartition(topic, p)
        isr = (leader,) if leader != NO_LEADER else replicas[p][:1]
        ctx.leadership[tp] = LeaderIsrAndControllerEpoch(LeaderAndIsr(leader, 1, isr), ctx.epoch)
        online = leader in ctx.brokers
        ctx.partition_states[tp] = PartitionState.ONLINE if online else PartitionState.OFFLINE


@pytest.fixture
def bound() -> Bound:
    return Bound()


@pytest.fixture
def busy_cluster(bound: Bound) -> Bound:
    """Brokers 1-3 (3 dead is not registered); topic a: one balanced, one led by a non-preferred
    replica, one offline; topic doomed: queued for deletion, offline and not led by its preferred replica.
    """
    bound.activate()
    ctx = bound.controller.context
    ctx.brokers = {1: broker(1, EPOCH_1), 2: broker(2, EPOCH_2)}
    lead(bound, "a", [(1, 2), (2, 1), (3, 1)], [1, 1, NO_LEADER])
    lead(bound, "doomed", [(1, 2)], [NO_LEADER])
    ctx.topics_to_delete.add("doomed")
    return bound


def test_jmx_exporter_names_are_exposed(busy_cluster: Bound) -> None:
    samples = busy_cluster.update()
    for name in (
        f"{KC}activecontrollercount",
        f"{KC}offlinepartitionscount",
        f"{KC}preferredreplicaimbalancecount",
        f"{KC}controllerstate",
        f"{KC}globaltopiccount",
        f"{KC}globalpartitioncount",
        f"{KC}controllerepoch",
        f'{KC}brokerepoch{{broker_id="1"}}',
        f"{EM}eventqueuesize",
        f"{EM}eventqueuetimems_count",
        f"{STATS}leaderelectionrateandtimems_count",
        f"{STATS}uncleanleaderelectionspersec_total",
    ):
        assert name in samples, name


def test_gauges_follow_the_context_of_the_active_controller(busy_cluster: Bound) -> None:
    samples = busy_cluster.update()
    assert samples[f"{KC}activecontrollercount"] == 1
    assert samples[f"{KC}offlinepartitionscount"] == 1  # a-2; doomed-0 is being deleted
    assert samples[f"{KC}preferredreplicaimbalancecount"] == 2  # a-1 and a-2; doomed-0 is being deleted
    assert samples[f"{KC}globaltopiccount"] == 2
    assert samples[f"{KC}globalpartitioncount"] == 4
    assert samples[f"{KC}topicstodeletecount"] == 1
    assert samples[f"{KC}replicastodeletecount"] == 2
    assert samples[f"{KC}activebrokercount"] == 2
    assert samples[f"{KC}fencedbrokercount"] == 0
    assert samples[f"{KC}controllerepoch"] == 3
    assert samples[f'{KC}brokerepoch{{broker_id="1"}}'] == EPOCH_1
    assert samples[f'{KC}brokerepoch{{broker_id="2"}}'] == EPOCH_2
    assert not any(name.startswith(f'{KC}brokerepoch{{broker_id="3"') for name in samples)


def test_partition_gauges_are_snapshots_taken_at_update(busy_cluster: Bound) -> None:
    busy_cluster.update()
    ctx = busy_cluster.controller.context
    ctx.partition_states[TopicPartition("a", 0)] = PartitionState.OFFLINE
    assert registry_samples(busy_cluster.metrics)[f"{KC}offlinepartitionscount"] == 1
    assert busy_cluster.update()[f"{KC}offlinepartitionscount"] == 2


def test_a_bounced_broker_shows_its_new_epoch(busy_cluster: Bound) -> None:
    busy_cluster.update()
    busy_cluster.controller.context.brokers[1] = broker(1, EPOCH_3)
    assert busy_cluster.update()[f'{KC}brokerepoch{{broker_id="1"}}'] == EPOCH_3


def test_a_controller_without_fencing_token_reports_zeros_and_no_broker_epochs(busy_cluster: Bound) -> None:
    busy_cluster.update()
    busy_cluster.resign()
    samples = busy_cluster.update()
    for gauge in (
        "activecontrollercount",
        "offlinepartitionscount",
        "globalpartitioncount",
        "controllerepoch",
    ):
        assert samples[f"{KC}{gauge}"] == 0, gauge
    assert not any(name.startswith(f"{KC}brokerepoch") for name in samples)


def test_inactive_before_winning_even_with_a_loaded_context(bound: Bound) -> None:
    bound.controller.context.brokers = {1: broker(1, EPOCH_1)}
    lead(bound, "a", [(1,)], [1])
    assert bound.update()[f"{KC}activecontrollercount"] == 0


def test_controller_state_and_queue_size_are_read_live(bound: Bound) -> None:
    manager = bound.controller.event_manager
    manager.state = ControllerState.BROKER_CHANGE
    manager.put(events.BrokerChange())
    manager.put(events.TopicChange())
    samples = registry_samples(bound.metrics)
    assert samples[f"{KC}controllerstate"] == ControllerState.BROKER_CHANGE == 2
    assert samples[f"{EM}eventqueuesize"] == 2


def test_timings_land_in_the_queue_histogram_and_the_events_state_timer(bound: Bound) -> None:
    cm = bound.controller_metrics
    cm.event_dequeued(events.BrokerChange(), 3.0)
    cm.event_processed(events.BrokerChange(), 40.0)
    cm.event_processed(events.ZkPartitionReassignment(), 7.0)
    cm.event_processed(events.UpdateMetadataResponseReceived(broker_id=1, response={}), 5.0)  # no timer
    samples = registry_samples(bound.metrics)
    assert samples[f"{EM}eventqueuetimems_count"] == 1 and samples[f"{EM}eventqueuetimems_sum"] == 3.0
    assert samples[f"{STATS}leaderelectionrateandtimems_count"] == 1
    assert samples[f"{STATS}leaderelectionrateandtimems_sum"] == 40.0
    assert samples[f"{STATS}partitionreassignmentrateandtimems_count"] == 1
    assert not any("updatemetadataresponsereceived" in name for name in samples)


def test_unclean_elections_meter_counts_each_election_once(bound: Bound) -> None:
    assert bound.update()[f"{STATS}uncleanleaderelectionspersec_total"] == 0
    bound.controller.stats.unclean_elections = 2
    assert bound.update()[f"{STATS}uncleanleaderelectionspersec_total"] == 2
    assert bound.update()[f"{STATS}uncleanleaderelectionspersec_total"] == 2
    bound.controller.stats.unclean_elections = 3
    assert bound.update()[f"{STATS}uncleanleaderelectionspersec_total"] == 3
