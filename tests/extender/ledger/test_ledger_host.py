"""The ledger counts every bound pod's CPU and host memory on its node."""

from builders import container, node, pod
from extender.ledger.ledger import Ledger
from extender.ledger.records import PodRef
from policy.request import parse_pod_request
from policy.scoring import make_strategy
from policy.state import ClusterState


def cpu_pod(name: str, cpu: str, node_name: str | None = None, mem: int | None = 2) -> dict:
    p = pod(name, containers=[container(mem=mem)], node_name=node_name)
    p["spec"]["containers"][0]["resources"].setdefault("requests", {}).update({"cpu": cpu, "memory": "1Gi"})
    return p


def used(ledger: Ledger, name: str) -> tuple:
    row = ledger.state.index[name]
    return int(ledger.state.array("cpu_used")[row]), int(ledger.state.array("host_mem_used")[row])


def make_ledger() -> Ledger:
    ledger = Ledger(ClusterState(), make_strategy("binpack"))
    for name in ("a", "b"):
        ledger.observe_node(node(name, "cgpu"))
    return ledger


def test_reserve_counts_at_once_and_release_uncounts():
    ledger = make_ledger()
    p = cpu_pod("gpu", "3")
    ledger.reserve(PodRef.of(p), parse_pod_request(p), "a", 1)
    assert used(ledger, "a") == (3000, 2**30)
    bound = cpu_pod("gpu", "3", node_name="a")
    ledger.observe_pod(bound)  # the informer confirms: counted once
    assert used(ledger, "a") == (3000, 2**30)
    ledger.release(PodRef.of(p).uid)
    assert used(ledger, "a") == (0, 0)


def test_pods_without_gpu_count_once_bound_and_stop_when_finished():
    ledger = make_ledger()
    web = cpu_pod("web", "500m", mem=None)
    ledger.observe_pod(web)  # not bound yet
    assert used(ledger, "b") == (0, 0)
    web["spec"]["nodeName"] = "b"
    ledger.observe_pod(web)
    ledger.observe_pod(web)
    assert used(ledger, "b") == (500, 2**30)
    web["status"]["phase"] = "Succeeded"
    ledger.observe_pod(web)
    assert used(ledger, "b") == (0, 0)


def test_a_node_that_leaves_and_returns_counts_its_pods_again():
    ledger = make_ledger()
    ledger.observe_pod(cpu_pod("web", "2", node_name="b", mem=None))
    ledger.forget_node("b")
    ledger.observe_node(node("b", "cgpu"))
    assert used(ledger, "b") == (2000, 2**30)
    ledger.forget_pod("uid-web")
    assert used(ledger, "b") == (0, 0)


def test_a_strategy_that_remembers_rows_is_told_when_a_node_leaves():
    forgotten = []

    class Remembering:
        def forget_row(self, row):
            forgotten.append(row)

    ledger = Ledger(ClusterState(), make_strategy("binpack"))
    ledger.strategy = Remembering()
    for name in ("a", "b"):
        ledger.observe_node(node(name, "cgpu"))
    row = ledger.state.index["b"]
    ledger.forget_node("b")
    ledger.forget_node("never-seen")
    assert forgotten == [row]


def test_fragmentation_forgets_a_removed_nodes_row():
    ledger = Ledger(ClusterState(), make_strategy("fragmentation"))
    for name in ("a", "b"):
        ledger.observe_node(node(name, "cgpu"))
    seen = []
    ledger.strategy._spillover.forget = seen.append
    ledger.strategy._pressure.forget = seen.append
    row = ledger.state.index["a"]
    ledger.forget_node("a")
    assert seen == [row, row]
