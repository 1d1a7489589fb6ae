"""The replay on a small synthetic trace: deterministic, drop on failure, the extender's own bookkeeping."""

import json

import numpy as np
import pytest

import small_trace
from benchmarks import protocol
from benchmarks.kube import KubeScheduler
from benchmarks.mapping import GPU_GIB, make_mapping
from benchmarks.replay import replay
from benchmarks.simulate import main
from benchmarks.trace import TraceError, read_nodes, read_pods
from policy.node import parse_node


@pytest.fixture(scope="module")
def trace(tmp_path_factory):
    nodes_path, pods_path = small_trace.write(str(tmp_path_factory.mktemp("trace")))
    return read_nodes(nodes_path), read_pods(pods_path), nodes_path, pods_path


@pytest.mark.parametrize("mapping", ["milli", "cgpu"])
@pytest.mark.parametrize("setting", ["paper", "kube"])
@pytest.mark.parametrize("policy", ["fragmentation", "random", "bestfit"])
def test_same_seed_same_run(trace, mapping, setting, policy):
    nodes, pods, _, _ = trace
    a, b = (replay(nodes, pods, policy, 7, mapping, setting) for _ in range(2))
    assert np.array_equal(a.placed, b.placed) and np.array_equal(a.demand, b.demand)
    assert a.unallocated_at() == b.unallocated_at()
    assert a.consistent  # the ledger counted exactly the CPU and memory kube-scheduler did


def test_every_arrival_is_placed_or_dropped_and_the_ledger_holds_what_was_placed(trace):
    nodes, pods, _, _ = trace
    run = replay(nodes, pods, "binpack", 3)
    capacity = nodes.gpu_capacity
    assert run.demand.sum() <= protocol.RATIO * capacity
    ledger = run.extra["ledger"]
    gpu_pods = int(((run.demand > 0) & run.placed).sum())
    assert len(ledger.allocations()) == gpu_pods
    used = ledger.state.array("mem_used").sum()
    assert used == np.where(run.placed, run.demand, 0).sum()  # milli mapping: memory units are milli-GPU
    assert (~run.placed).any()  # 130 % of capacity cannot all fit
    assert sum(run.failed_by_shape(level=protocol.RATIO).values()) == (~run.placed).sum()


def test_a_pod_that_fits_nowhere_is_dropped_and_the_rest_go_on(tmp_path):
    rows = [(4_000, 4_096, 9, 1000, "")] + [(1_000, 1_024, 1, 1000, "")] * 10  # no node has 9 GPUs
    nodes_path, pods_path = small_trace.write(str(tmp_path), rows)
    nodes, pods = read_nodes(nodes_path), read_pods(pods_path)
    run = replay(nodes, pods, "binpack", 1)
    big = run.demand == 9000
    assert big.any() and not run.placed[big].any()
    # the 9-GPU pod arrived at least once, so at most 15 one-GPU pods did: all fit the 19 GPUs
    assert run.placed[~big].all()
    assert run.failed_by_shape(level=protocol.RATIO) == {(9, 1000): int(big.sum())}


def test_gpu_model_constraints_are_obeyed(trace):
    nodes, pods, _, _ = trace
    run = replay(nodes, pods, "fragmentation", 5)
    ledger = run.extra["ledger"]
    model = dict(zip(nodes.name, nodes.model))
    order = protocol.arrivals(pods, nodes.gpu_capacity, 5)
    for allocation in ledger.allocations():
        j = int(allocation.pod.uid.rsplit("-", 1)[1])
        spec = pods.gpu_spec[order[j]]
        if spec:
            assert model[allocation.node] in spec.split("|")


def test_mappings(trace):
    nodes, pods, _, _ = trace
    milli, cgpu = make_mapping("milli", nodes), make_mapping("cgpu", nodes)
    spec = parse_node(milli.node(nodes, 0))
    assert (spec.memory_per_gpu, spec.core_per_gpu, spec.model, spec.cpu) == (1000, 0, "T4", 32_000)
    spec = parse_node(cgpu.node(nodes, 2))
    assert (spec.memory_per_gpu, spec.core_per_gpu, spec.max_pod) == (GPU_GIB["G2"], 100, 20)
    assert GPU_GIB == {"T4": 14, "V100M16": 15, "P100": 15, "A10": 22, "V100M32": 31, "G2": 19, "G3": 29}
    row = lambda k, milli_, spec_="": pods_with(k, milli_, spec_)  # noqa: E731
    share = cgpu.request(*row(1, 470))
    assert (share.core, share.memory) == (50, 7)  # 47 % → 50 %, ceil(0.47 × 14 GiB of a T4, the smallest model)
    assert cgpu.request(*row(1, 470, "G2")).memory == 9  # ceil(0.47 × 19)
    assert milli.request(*row(1, 470)).memory == 470
    whole = cgpu.request(*row(1, 1000))
    assert (whole.core, whole.memory, whole.gpu_count) == (100, 14, 1)
    two = milli.request(*row(2, 1000))
    assert (two.memory_per_gpu, two.gpu_count, two.whole_device) == (1000, 2, True)
    cpu_only = cgpu.request(*row(0, 0))
    assert (cpu_only.gpu_count, cpu_only.cpu) == (0, 2_000)
    assert milli.request(*row(1, 300, "G2|P100")).models == frozenset({"G2", "P100"})


def pods_with(k, milli, spec):
    from benchmarks.trace import Pods
    pods = Pods(["x"], np.array([2_000]), np.array([1_024]), np.array([k]), np.array([milli]),
                np.array([spec], dtype=object))
    return pods, 0


def test_kube_default_scores_least_allocated_plus_balanced():
    from benchmarks.trace import Nodes
    nodes = Nodes(["a", "b"], np.array([10_000, 10_000]), np.array([1_000, 1_000]), np.array([1, 1]),
                  np.array(["T4", "T4"], dtype=object))
    kube = KubeScheduler(nodes, "kube", np.random.default_rng(0))
    kube.bind(0, 5_000, 0)
    # a after a 1-core pod: CPU 40 % free, memory 100 % → least (40 + 100) / 2 = 70, balanced (1 − 0.6/2) → 70
    assert kube.default_scores(np.array([0, 1]), 1_000, 0).tolist() == [70 + 70, 95 + 95]
    assert kube.filter(6_000, 0, "").tolist() == [1]
    assert kube.filter(1_000, 0, "P100").tolist() == []


def test_unreadable_traces_are_refused(tmp_path):
    bad = tmp_path / "nodes.csv"
    bad.write_text("sn,gpu\nx,1\n")
    with pytest.raises(TraceError, match="missing column"):
        read_nodes(str(bad))
    with pytest.raises(TraceError, match="cannot read"):
        read_pods(str(tmp_path / "absent.csv"))


def test_simulate_command_writes_mean_and_sd(trace, tmp_path, capsys):
    _, _, nodes_path, pods_path = trace
    out = tmp_path / "result.json"
    assert main(["--nodes", nodes_path, "--pods", pods_path, "--policy", "binpack", "--seeds", "2",
                 "--json", str(out)]) == 0
    result = json.loads(out.read_text())
    values = [r["unallocated"] for r in result["runs"]]
    assert result["unallocated_mean"] == pytest.approx(np.mean(values))
    assert result["unallocated_sd"] == pytest.approx(np.std(values, ddof=1))
    assert [r["seed"] for r in result["runs"]] == [42, 43]
    assert "unallocated GPU at 100 % arrived" in capsys.readouterr().out


def test_simulate_command_says_what_is_wrong(tmp_path, capsys):
    assert main(["--nodes", str(tmp_path / "none.csv"), "--seeds", "1"]) == 2
    assert "cannot read" in capsys.readouterr().err
