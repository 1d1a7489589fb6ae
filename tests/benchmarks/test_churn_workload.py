"""The churn workload (copies, speed-up, window), the figures read from a run, and the command."""

import json

import numpy as np
import pytest
from hypothesis import given, strategies as st

import churn_cases as C
import small_trace
from benchmarks import churn_matrix
from benchmarks.churn import churn
from benchmarks.churn_stats import band, loaded_window, step_at, summary, time_mean
from benchmarks.timeline import QOS_PRIORITY, workload
from benchmarks.trace import TraceError, Times, read_times


def trace(rows: list):
    """``rows``: (creation, deletion, qos) per pod of the small synthetic trace's first pods."""
    table = C.work([(0, 1, 1, 500, 0)] * len(rows)).pods
    return table, Times(np.array([r[0] for r in rows]), np.array([r[1] for r in rows]),
                        np.array([r[2] for r in rows], dtype=object))


def test_the_trace_at_its_own_times():
    pods, times = trace([(100, 400, "LS"), (0, 50, "BE"), (30, 30, "Burstable")])
    w = workload(pods, times)
    assert w.arrive.tolist() == [0.0, 30.0, 100.0] and w.depart.tolist() == [50.0, 30.0, 400.0]
    assert w.row.tolist() == [1, 2, 0] and w.priority.tolist() == [0, 1, 2]
    assert w.offered(np.array([0.0, 30.0, 60.0, 100.0, 400.0])).tolist() == [500, 500, 0, 500, 0]


@given(seed=st.integers(0, 2**16), copies=st.integers(1, 5), speedup=st.sampled_from([1.0, 3.0, 100.0]),
       lead=st.sampled_from([0.0, 0.25, 0.5]))
def test_copies_keep_every_lifetime_and_arrive_within_the_window(seed, copies, speedup, lead):
    rng = np.random.default_rng(seed)
    creation = np.sort(rng.integers(0, 10_000, 12))
    life = rng.integers(0, 5_000, 12)
    pods, times = trace([(int(c), int(c + d), str(rng.choice(list(QOS_PRIORITY)))) for c, d in zip(creation, life)])
    w = workload(pods, times, copies, speedup, seed, lead)
    assert len(w) == 12 * copies and (np.diff(w.arrive) >= 0).all()
    assert np.allclose(w.depart - w.arrive, life[w.row])
    opening = np.quantile(creation, lead, method="lower")
    span = creation.max() - opening + 1
    assert (w.arrive >= 0).all() and (w.arrive < span / speedup).all()
    original = w.copy == 0
    assert np.allclose(w.arrive[original], (np.maximum(creation, opening) - opening)[w.row[original]] / speedup)
    for k in range(copies):
        assert sorted(w.row[w.copy == k].tolist()) == list(range(12))
    again = workload(pods, times, copies, speedup, seed, lead)
    assert np.array_equal(again.arrive, w.arrive)


def test_offered_load_counts_every_pod_between_its_arrival_and_departure():
    rng = np.random.default_rng(3)
    w = C.random_work(rng, 50)
    at = np.sort(rng.uniform(0, 1500, 40))
    brute = [int(w.pods.demand[(w.arrive <= t) & (w.depart > t)].sum()) for t in at]
    assert w.offered(at).tolist() == brute


def test_read_times_refuses_a_pod_deleted_before_it_is_created(tmp_path):
    path = tmp_path / "p.csv"
    path.write_text(small_trace.POD_HEADER + "\np,1000,1024,1,500,,LS,Running,50,40,50\n")
    with pytest.raises(TraceError, match="deleted before it is created"):
        read_times(str(path))


def test_time_weighted_mean_and_step_values():
    t, v = np.array([0.0, 10.0, 10.0, 30.0]), np.array([4, 1, 2, 6])
    assert step_at(t, v, [-1, 0, 5, 10, 29.9, 31]).tolist() == [0, 4, 4, 2, 2, 6]
    assert time_mean(t, v, 0.0, 40.0) == (4 * 10 + 2 * 20 + 6 * 10) / 40
    assert time_mean(t, v, 5.0, 15.0) == (4 * 5 + 2 * 5) / 10
    assert time_mean(t, v, 12.0, 12.0) == 2


def test_summary_of_a_small_run():
    # one GPU: a 600 pod until 100, a whole-GPU pod from 10 waits until 100 and stays to 200, a 500 pod
    # arriving at 20 waits (600 + 500 > 1000) and is deleted at 50 never placed
    work = C.work([(0, 100, 1, 600, 0), (10, 200, 1, 1000, 2), (20, 50, 1, 500, 0)])
    run = churn(C.nodes([1]), work, "binpack", 0)
    s = summary(run, work)
    assert loaded_window(work, run.capacity) == (10.0, 20.0) == tuple(s["window"])  # offered 160 % at t=10
    assert s["unallocated_mean"] == pytest.approx(40.0)  # 600 of 1000 allocated all through [10, 20]
    assert s["waiting_mean"] == pytest.approx(100.0)  # the whole-GPU pod waits all through it
    # offered jumps from 60 to 160 % at t=10: every band below 155 % is that instant
    assert s["bands"]["80"] == s["bands"]["120"] == {"t": [10.0, 10.0], "unallocated": 40.0, "waiting": 100.0}
    assert (s["gpu_pods"], s["waited"], s["never_placed"], s["never_placed_demand"]) == (3, 1, 1, 50.0)
    assert (s["wait_mean"], s["wait_max"], s["wait_p50"]) == (45.0, 90.0, 45.0)


def test_bands_follow_the_offered_load():
    # 10 pods of 200 each arriving every 10 s and staying: offered 20, 40, ... 200 % of one GPU
    work = C.work([(10.0 * i, 1e6, 1, 200, 0) for i in range(10)])
    capacity = 1000
    assert band(work, capacity, 0.8) == (30.0, 40.0)  # 75 % first reached with the 4th pod (80 %), 85 % the 5th
    assert band(work, capacity, 1.0) == (40.0, 50.0)
    assert band(work, capacity, 2.5) is None and loaded_window(work, capacity) == (30.0, 90.0)


def write_trace(directory, rows):
    nodes_path, pods_path = small_trace.write(str(directory), [r[:5] for r in rows], name="timed")
    lines = open(pods_path).read().splitlines()
    with open(pods_path, "w") as f:
        f.write(lines[0] + "\n")
        for line, (*_, created, deleted) in zip(lines[1:], rows):
            f.write(line.rsplit(",", 3)[0] + f",{created},{deleted},{created}\n")
    return nodes_path, pods_path


def test_the_command_runs_resumes_and_tabulates(tmp_path, capsys):
    rng = np.random.default_rng(0)
    rows = [(2_000, 4_096, 1, int(rng.choice([250, 500, 1000])), "", int(c), int(c + rng.integers(100, 4000)))
            for c in np.sort(rng.integers(0, 20_000, 40))]
    write_trace(tmp_path, rows)
    argv = ["--trace-dir", str(tmp_path), "--trace", "timed", "--copies", "3", "--speedup", "10", "--seeds", "2",
            "--out", str(tmp_path / "out")]
    assert churn_matrix.main(argv) == 0
    out = capsys.readouterr().out
    assert "| binpack |" in out and "| fragmentation |" in out and "never placed" in out
    runs = sorted((tmp_path / "out" / "runs").iterdir())
    assert len(runs) == 4
    record = json.loads(runs[0].read_text())
    assert record["consistent"] and record["workload"] == "timed-c3-x10-l0.01-milli-shipped"
    for run in runs:  # kept, not re-run
        if "binpack" in run.name:
            run.write_text(json.dumps({**json.loads(run.read_text()), "unallocated_mean": 99.0}))
    assert churn_matrix.main(argv) == 0
    assert "| binpack | 99.00 ± 0.00 |" in capsys.readouterr().out


def test_the_command_refuses_bad_arguments_in_one_line(tmp_path, capsys):
    assert churn_matrix.main(["--copies", "0"]) == 2
    assert churn_matrix.main(["--trace-dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 2 and all(line.startswith("churn_matrix: ") for line in err)
