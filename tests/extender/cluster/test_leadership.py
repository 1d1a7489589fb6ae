"""The leadership state a replica's requests read: serving only while leader, caught up and within the
hold its last renewal bought — by the clock, whatever the election thread has noticed."""

import threading

import pytest
from hypothesis import given, strategies as st

from extender.cluster.base import NotLeading
from extender.cluster.leadership import Leadership


class Clock:
    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now


@pytest.fixture
def clock():
    return Clock()


def leading(clock, until=10.0):
    leadership = Leadership("me_1", "kube-system/cgpu-extender", clock=clock)
    term = leadership.acquired(clock.now + until)
    assert leadership.caught_up(term)
    return leadership


def test_a_new_holder_answers_nothing_until_caught_up(clock):
    leadership = Leadership("me_1", "kube-system/cgpu-extender", clock=clock)
    assert leadership.refusal() == ("this replica is a standby; the leader is not known yet "
                                    "(lease kube-system/cgpu-extender)")
    leadership.observe("other_2")
    assert "the leader is other_2" in leadership.refusal()
    term = leadership.acquired(clock.now + 10)
    assert not leadership.serving() and "catching up" in leadership.refusal()
    with pytest.raises(NotLeading):
        leadership.check()
    assert leadership.caught_up(term) and leadership.serving() and leadership.refusal() is None
    assert leadership.transitions() == {"standby": 0, "catching-up": 1, "leader": 1}


def test_the_hold_ends_by_the_clock_alone(clock):
    leadership = leading(clock)
    clock.now += 9.999
    leadership.check()
    clock.now += 0.001
    assert not leadership.serving() and leadership.holding() and leadership.lapsed()
    assert "could not renew its lease in time" in leadership.refusal()
    assert leadership.status()["role"] == "standby"
    with pytest.raises(NotLeading), leadership.writing():
        pass


def test_a_catch_up_of_an_ended_term_leads_to_nothing(clock):
    leadership = Leadership("me_1", "l", clock=clock)
    old = leadership.acquired(clock.now + 10)
    leadership.lost("another replica holds the lease", leader="other_2")
    new = leadership.acquired(clock.now + 10)
    assert not leadership.caught_up(old) and not leadership.serving()
    assert leadership.caught_up(new) and leadership.serving()


def test_drain_waits_for_the_writes_in_flight(clock):
    leadership = leading(clock)
    entered, leave = threading.Event(), threading.Event()

    def write():
        with leadership.writing():
            entered.set()
            leave.wait(5)

    writer = threading.Thread(target=write)
    writer.start()
    entered.wait(5)
    leadership.lost("shutting down")
    assert not leadership.drain(0.05)  # still in flight
    leave.set()
    assert leadership.drain(5)
    writer.join(5)


OPS = st.lists(st.one_of(
    st.tuples(st.just("acquire"), st.floats(0, 20)), st.tuples(st.just("extend"), st.floats(0, 20)),
    st.tuples(st.just("catch_up"), st.integers(0, 3)), st.tuples(st.just("lose"), st.just(0)),
    st.tuples(st.just("tick"), st.floats(0, 15))), max_size=40)


@given(OPS)
def test_it_serves_only_inside_a_hold_it_was_given_and_after_that_terms_catch_up(ops):
    clock = Clock()
    leadership = Leadership("me_1", "l", clock=clock)
    term, caught, until = 0, False, float("-inf")
    for op, value in ops:
        if op == "acquire" and not leadership.holding():
            term, caught, until = leadership.acquired(clock.now + value), False, clock.now + value
        elif op == "extend" and leadership.holding():
            leadership.extend(clock.now + value)
            until = max(until, clock.now + value)
        elif op == "catch_up":
            caught = leadership.caught_up(term - value) or caught
        elif op == "lose":
            leadership.lost("test")
            caught, until = False, float("-inf")
        elif op == "tick":
            clock.now += value
        serving = leadership.serving()
        assert serving == (caught and clock.now < until)
        assert (leadership.refusal() is None) == serving
