"""benchmarks.plan on a small cluster: every pending pod accounted for, the figures consistent."""

from benchmarks.plan import measure, table


def test_a_small_run_accounts_for_every_pod():
    row = measure(nodes=30, pending=60, pool_size=10, fill=300, repeats=1)
    assert row["fits_now"] + row["on_new_nodes"] + row["unplaceable"] == 60
    assert row["pools"] == 3 and row["new_nodes"] >= 1 and row["plan_ms"] > 0
    assert row["hidden"] <= row["on_new_nodes"] and row["placeholders"] >= row["new_nodes"] - row["autoscaler_adds"]
    assert table([row]).count("\n") == 2
