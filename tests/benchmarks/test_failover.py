"""The failover benchmark runs end to end with short leases (its timings are not checked here; what
it reports about allocation is)."""

import json

from benchmarks import failover


def test_a_frozen_leader_in_a_burst_hands_over_without_a_double_allocation(capsys):
    assert failover.main(["--fault", "stop", "--durations", "1s", "600ms", "200ms", "--nodes", "2",
                          "--fault-at", "0.5", "--rate", "20", "--stopped-extra", "0.5"]) == 0
    result = json.loads(capsys.readouterr().out.splitlines()[-1])
    assert result["to_ready"] is not None and result["left"] == 0 and result["bound"] == 12
    assert result["most_gib_on_a_gpu"] == 15 and result["unannotated"] == 0 and result["ready_at_end"] == 1
