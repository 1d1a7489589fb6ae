"""Properties of the ledger behind the service, under any sequence of operations."""

import copy
import threading

import numpy as np
import orjson
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from builders import node, pod, run_interleaved
from extender.cluster.embedded import EmbeddedCluster
from extender.ledger.ledger import Ledger
from extender.serving.app import build_extender
from extender.serving.config import Config
from policy.scoring import make_strategy
from policy.state import ClusterState

NODES = [node("core-a", "core_mem", gpus=4, gib=15), node("core-b", "core_mem", gpus=2, gib=16, placement="spread"),
         node("cgpu-a", "cgpu", gpus=2, gib=22, max_pod="3"), node("share-a", "share", gpus=1, gib=15, max_pod="2"),
         node("plain", None)]
NAMES = [n["metadata"]["name"] for n in NODES]

pod_shapes = st.one_of(
    st.builds(lambda m, c: {"mem": m, "core": c}, st.integers(1, 16), st.sampled_from([5, 10, 25, 30, 50, 100])),
    st.builds(lambda m: {"mem": m}, st.integers(1, 23)),
    st.builds(lambda m, n: {"mem": m * n, "labels": {"aliyun.com/gpu-count": str(n)}}, st.integers(1, 8),
              st.integers(2, 3)),
)


def ledger_fingerprint(ledger: Ledger) -> tuple:
    names, view = ledger.state.view_all()
    order = np.argsort(names)
    arrays = tuple(getattr(view, f)[order].tolist() for f in
                   ("mem_used", "core_used", "pods", "memory_pods", "core_pods", "mem_total", "core_total"))
    allocations = sorted((a.pod.uid, a.node, sorted(a.memory_per_gpu.items()), sorted(a.core_per_gpu.items()))
                         for a in ledger.allocations())
    return tuple(sorted(names)), arrays, allocations


class ExtenderMachine(RuleBasedStateMachine):
    @initialize()
    def start(self):
        self.cluster = EmbeddedCluster(copy.deepcopy(NODES), source="test")
        self.extender = build_extender(Config(), cluster=self.cluster, clock=lambda: 1)
        self.bound = {}  # uid -> (namespace, name)
        self.counter = 0

    @rule(shape=pod_shapes, target_index=st.integers(0, len(NAMES) - 1))
    def filter_then_bind(self, shape, target_index):
        self.counter += 1
        p = pod(f"p{self.counter}", mem=shape["mem"], core=shape.get("core"), labels=shape.get("labels"))
        result = orjson.loads(self.extender.filter(orjson.dumps({"Pod": p, "Nodes": None, "NodeNames": NAMES})))
        target = NAMES[target_index]
        accepted = target in result["NodeNames"]
        reply = orjson.loads(self.extender.bind(orjson.dumps({
            "PodName": p["metadata"]["name"], "PodNamespace": "default", "PodUID": p["metadata"]["uid"],
            "Node": target})))
        # bind succeeds exactly where filter, asked just before, accepted the node
        assert (reply["Error"] == "") == accepted, (target, result, reply)
        if accepted:
            self.bound[p["metadata"]["uid"]] = ("default", p["metadata"]["name"])

    @precondition(lambda self: self.bound)
    @rule(data=st.data())
    def delete_a_pod(self, data):
        uid = data.draw(st.sampled_from(sorted(self.bound)))
        namespace, name = self.bound.pop(uid)
        assert self.cluster.delete_pod(namespace, name) == uid

    @rule(index=st.integers(0, 1))
    def switch_a_node_mode(self, index):
        """core-a or cgpu-a flips between core_mem and cgpu with pods still on it."""
        name = ["core-a", "cgpu-a"][index]
        current = self.extender.ledger.state.specs[name].schedule_label
        flipped = copy.deepcopy(next(n for n in NODES if n["metadata"]["name"] == name))
        new_mode = "cgpu" if current == "core_mem" else "core_mem"
        flipped["metadata"]["labels"]["ack.node.gpu.schedule"] = new_mode
        gpus = int(flipped["status"]["allocatable"]["aliyun.com/gpu-count"])
        flipped["status"]["allocatable"]["aliyun.com/gpu-core.percentage"] = str(100 * gpus)
        self.extender.ledger.observe_node(flipped)  # the dump the restart reads comes from the ledger

    @invariant()
    def no_gpu_over_capacity(self):
        names, v = self.extender.ledger.state.view_all()
        assert (v.mem_used <= v.mem_total).all()
        assert (v.core_used <= np.where(v.core_total > 0, v.core_total, 100)).all()
        assert (v.pods <= v.max_pod[:, None]).all()
        assert (v.mem_used >= 0).all() and (v.pods >= 0).all()

    @invariant()
    def no_node_mixes_job_types(self):
        _, v = self.extender.ledger.state.view_all()
        assert not ((v.memory_pods > 0) & (v.core_pods > 0)).any()

    @invariant()
    def arrays_are_the_sum_of_the_allocations(self):
        ledger = self.extender.ledger
        expected = ClusterState()
        for spec in ledger.state.specs.values():
            expected.set_node(spec)
        for a in ledger.allocations():
            expected.add_usage(a.node, a.memory_per_gpu, a.core_per_gpu, a.wants_core)
        fresh = Ledger(expected, ledger.strategy)
        assert ledger_fingerprint(fresh)[1] == ledger_fingerprint(ledger)[1]

    @invariant()
    def summary_adds_up_what_inspect_shows(self):
        report = self.extender.ledger.inspect()
        nodes = report["nodes"]
        memory = [n for n in nodes if n["sharing"] != "none" or n["memory"]["used"]]
        core = [n for n in nodes if n["sharing"] == "memory+core"]
        assert report["summary"]["memory"] == {"used": sum(n["memory"]["used"] for n in memory),
                                               "total": sum(n["memory"]["total"] for n in memory)}
        assert report["summary"]["core"] == {"used": sum(n["core"]["used"] for n in core),
                                             "total": sum(n["core"]["total"] for n in core)}
        per_gpu_pods = sum(len(g["pods"]) for n in nodes for g in n["gpus"])
        assert per_gpu_pods == sum(len(a.memory_per_gpu) for a in self.extender.ledger.allocations())

    @invariant()
    def a_restart_rebuilds_the_same_ledger(self):
        restarted = Ledger(ClusterState(), make_strategy())
        EmbeddedCluster(self.cluster.objects(), source="restart").start(restarted)
        assert ledger_fingerprint(restarted) == ledger_fingerprint(self.extender.ledger)


TestExtenderMachine = ExtenderMachine.TestCase


def test_threads_binding_to_one_node_never_over_allocate():
    cluster = EmbeddedCluster([node("only", "core_mem", gpus=2, gib=15)], source="test")
    extender = build_extender(Config(), cluster=cluster)
    pods = [pod(f"t{i}", mem=3, core=10) for i in range(40)]  # 10 fit (5 per GPU by memory)
    for p in pods:
        assert orjson.loads(extender.filter(orjson.dumps({"Pod": p, "NodeNames": ["only"]})))["NodeNames"] == ["only"]
    results = bind_all_at_once(extender, pods, 8)
    _, v = extender.ledger.state.view_all()
    assert (v.mem_used <= 15).all() and (v.core_used <= 100).all()
    assert results.count("") == 10 == len(extender.ledger.allocations())
    assert all("no longer fits" in e for e in results if e)


def bind_all_at_once(extender, pods, threads: int) -> list:
    """Bind ``pods`` to node "only" from ``threads`` threads started together; the Error of each bind."""
    barrier = threading.Barrier(threads)
    results = []

    def worker(chunk):
        barrier.wait()
        for p in chunk:
            results.append(orjson.loads(extender.bind(orjson.dumps({
                "PodName": p["metadata"]["name"], "PodNamespace": "default", "PodUID": p["metadata"]["uid"],
                "Node": "only"})))["Error"])

    run_interleaved(worker, [(pods[i::threads],) for i in range(threads)])
    return results


@settings(max_examples=20)
@given(threads=st.integers(2, 8), max_pod=st.sampled_from([2, 3, 20]),
       shapes=st.lists(st.tuples(st.integers(1, 8), st.sampled_from([5, 10, 25, 50])), min_size=4, max_size=24))
def test_any_number_of_threads_binding_any_pods_to_one_node_never_over_allocate(threads, max_pod, shapes):
    cluster = EmbeddedCluster([node("only", "core_mem", gpus=2, gib=15, max_pod=str(max_pod))], source="test")
    extender = build_extender(Config(), cluster=cluster)
    pods = [pod(f"t{i}", mem=m, core=c) for i, (m, c) in enumerate(shapes)]
    for p in pods:  # each fits the empty node: filter accepts them all
        assert orjson.loads(extender.filter(orjson.dumps({"Pod": p, "NodeNames": ["only"]})))["NodeNames"] == ["only"]
    results = bind_all_at_once(extender, pods, threads)
    _, v = extender.ledger.state.view_all()
    assert (v.mem_used <= 15).all() and (v.core_used <= 100).all() and (v.pods <= max_pod).all()
    allocations = extender.ledger.allocations()
    assert results.count("") == len(allocations) and all("no longer fits" in e for e in results if e)
    memory, core = np.zeros(2, dtype=int), np.zeros(2, dtype=int)
    for a in allocations:
        for gpu, gib in a.memory_per_gpu.items():
            memory[gpu] += gib
        for gpu, units in a.core_per_gpu.items():
            core[gpu] += units
    assert v.mem_used[0, :2].tolist() == memory.tolist() and v.core_used[0, :2].tolist() == core.tolist()
