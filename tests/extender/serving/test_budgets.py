"""The serving bounds' bookkeeping: which connection a full port evicts, byte budgets, open-files fitting."""

import subprocess
import sys

import pytest

from extender.serving.budgets import BUSY, HANDSHAKE, IDLE, NEW, RESERVED_DESCRIPTORS, ByteBudget, Limits, Port, \
    descriptor_limits


class Connection:
    def __init__(self, name):
        self.name, self.evicted = name, False

    def evict(self):
        self.evicted = True


def test_a_full_port_evicts_never_used_then_handshaking_then_idle_connections_and_never_busy_ones():
    port = Port("verbs", limit=4)
    busy, idle, handshaking, new = (Connection(n) for n in ("busy", "idle", "handshaking", "new"))
    for connection, state in ((busy, BUSY), (idle, IDLE), (handshaking, HANDSHAKE), (new, NEW)):
        assert port.admit(connection, state)
    order = []
    for i in range(3):
        arriving = Connection(f"arriving-{i}")
        assert port.admit(arriving, BUSY)
        order.append(next(c.name for c in (busy, idle, handshaking, new) if c.evicted and c.name not in order))
    assert order == ["new", "handshaking", "idle"] and not busy.evicted
    assert not port.admit(Connection("one too many"))  # all busy: the newcomer is refused, nobody evicted
    assert port.evicted == 3 and port.refused == 1 and len(port) == 4


def test_the_oldest_of_a_state_goes_first_and_a_connection_that_changes_state_joins_the_end():
    port = Port("probes", limit=3)
    first, second, third = Connection("first"), Connection("second"), Connection("third")
    for connection in (first, second, third):
        port.admit(connection, IDLE)
    port.mark(first, BUSY)
    port.mark(first, IDLE)  # idle again: now the youngest idle one
    port.admit(Connection("arriving"), BUSY)
    assert second.evicted and not first.evicted and not third.evicted


def test_handshakes_past_their_limit_evict_the_oldest_handshake():
    port = Port("verbs", limit=100)
    shaking = [Connection(f"h{i}") for i in range(3)]
    for connection in shaking:
        port.make_room(HANDSHAKE, 3)
        port.admit(connection, HANDSHAKE)
    port.make_room(HANDSHAKE, 3)
    assert [c.evicted for c in shaking] == [True, False, False] and port.count(HANDSHAKE) == 2


def test_a_byte_budget_refuses_past_its_limit_and_counts_what_is_forced():
    budget = ByteBudget(100)
    assert budget.take(60) and not budget.take(41) and budget.used == 60
    budget.force(50)
    assert budget.over and budget.used == 110
    budget.give(60)
    assert not budget.over and budget.take(40)


def test_the_ports_fit_below_the_open_files_limit_raised_to_the_hard_one():
    """In a process of its own: a hard limit lowered cannot be raised again."""
    code = ("import resource; resource.setrlimit(resource.RLIMIT_NOFILE, (512, 1024)); "
            "from extender.serving.budgets import Limits, descriptor_limits; "
            "limits, open_files = descriptor_limits(Limits()); "
            "print(limits.connections, limits.probe_connections, open_files, "
            "resource.getrlimit(resource.RLIMIT_NOFILE)[0])")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    verbs, probes, open_files, soft = map(int, done.stdout.split())
    assert open_files == soft == 1024  # the soft limit raised to the hard one
    assert verbs + probes + RESERVED_DESCRIPTORS <= open_files and verbs > 0 and probes > 0


@pytest.mark.parametrize("body", [1 << 20, 64 << 20, 256 << 20])
def test_the_request_budget_always_holds_one_body_of_the_limit(body):
    limits = Limits().for_body(body)
    assert limits.body_bytes == body and limits.inflight_bytes >= body + limits.header_bytes
