"""KIP-380 classification of broker changes: new, dead and bounced by epoch."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from controller.broker_change import classify_broker_change


def test_bounced_broker_is_detected_by_its_higher_epoch() -> None:
    change = classify_broker_change(cached={1: 100, 2: 200, 3: 300}, current={1: 100, 2: 250, 4: 400})
    assert (change.new, change.dead, change.bounced) == ((4,), (3,), (2,))
    assert change.epochs == {1: 100, 2: 250, 4: 400}


def test_a_fast_bounce_with_the_same_id_set_is_not_a_no_op() -> None:
    change = classify_broker_change(cached={1: 100}, current={1: 101})
    assert change.bounced == (1,) and not change.new and not change.dead and not change.empty


def test_nothing_changed() -> None:
    assert classify_broker_change({1: 5, 2: 6}, {1: 5, 2: 6}).empty


ids = st.integers(0, 20)
epochs = st.integers(1, 10**12)


@given(st.dictionaries(ids, epochs), st.dictionaries(ids, epochs))
def test_every_broker_lands_in_exactly_one_class(cached: dict[int, int], current: dict[int, int]) -> None:
    change = classify_broker_change(cached, current)
    unchanged = {b for b in cached.keys() & current.keys() if current[b] <= cached[b]}
    classes = [set(change.new), set(change.dead), set(change.bounced), unchanged]
    assert set().union(*classes) == cached.keys() | current.keys()
    assert sum(len(c) for c in classes) == len(cached.keys() | current.keys())
    assert all(current[b] > cached[b] for b in change.bounced)
