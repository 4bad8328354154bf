"""Chaos runs against a local cluster: faults on its daemons while a producer records what the cluster
acknowledged, then a full read-back, so that loss, duplication and control-plane behaviour under
faults can be audited.

A run writes ``DIR/chaos/<run-id>/events.jsonl`` (the faults) and ``history.jsonl`` (the workload);
``docs/chaos.md`` describes the run and ``docs/events.md`` the lines. The modules: :mod:`chaos.schedule`
(which fault, where, when: pure and seeded), :mod:`chaos.faults` (doing and undoing them),
:mod:`chaos.workload` (producer and read-back), :mod:`chaos.verdict` (the run's own check) and
:mod:`chaos.run` (one run from start to finish).
"""


class ChaosError(RuntimeError):
    """A run that cannot start or go on; the message, one line, says why."""
