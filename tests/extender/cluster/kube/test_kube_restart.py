"""Restart safety, as a property: after any sequence of binds, deletes, finishes and restarts
against the API server, a new process (a new Ledger fed from the API's objects) reaches
exactly the ledger of the one that made the binds."""

import numpy as np
import orjson
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from builders import node, pod
from extender.serving.app import build_extender
from extender.serving.config import Config
from fakekube import FakeKube, wait_until
from kubefixtures import connect

from test_ledger_properties import ledger_fingerprint, pod_shapes

NODES = [node("core-a", "core_mem", gpus=2, gib=15), node("cgpu-a", "cgpu", gpus=2, gib=22, max_pod="3"),
         node("share-a", "share", gpus=1, gib=15, placement="spread")]
NAMES = [n["metadata"]["name"] for n in NODES]


class RestartMachine(RuleBasedStateMachine):
    @initialize()
    def start(self):
        self.kube = FakeKube().start()
        for n in NODES:
            self.kube.create("nodes", n)
        self.clusters = []
        self.extender = self._new_process()
        self.live = []  # (name, uid) of pods on the API server
        self.counter = 0

    def _new_process(self):
        cluster = connect(self.kube)
        self.clusters.append(cluster)
        extender = build_extender(Config(), cluster=cluster, clock=lambda: 1_795_000_000_000_000_000)
        wait_until(extender.ready, what="sync")
        return extender

    def teardown(self):
        for cluster in getattr(self, "clusters", []):
            cluster.stop()
        if hasattr(self, "kube"):
            self.kube.stop()

    @rule(shape=pod_shapes, node_name=st.sampled_from(NAMES), with_filter=st.booleans())
    def create_and_bind(self, shape, node_name, with_filter):
        self.counter += 1
        p = self.kube.create("pods", pod(f"p{self.counter}", mem=shape["mem"], core=shape.get("core"),
                                         labels=shape.get("labels"), uid=f"uid-p{self.counter}"))
        self.live.append(p["metadata"]["name"])
        if with_filter:
            self.extender.filter(orjson.dumps({"Pod": p, "Nodes": None, "NodeNames": NAMES}))
        else:  # a restarted extender gets a bind for a pod it never filtered
            wait_until(lambda: self.extender.cluster.get_pod("default", p["metadata"]["name"], p["metadata"]["uid"]),
                       what="pod visible")
        meta = p["metadata"]
        self.extender.bind(orjson.dumps({"PodName": meta["name"], "PodNamespace": "default",
                                         "PodUID": meta["uid"], "Node": node_name}))

    @precondition(lambda self: self.live)
    @rule(data=st.data(), finish=st.booleans())
    def delete_or_finish(self, data, finish):
        name = data.draw(st.sampled_from(self.live))
        self.live.remove(name)
        if finish:
            self.kube.set_pod_phase(name, "Succeeded")
        else:
            self.kube.delete("pods", name)

    @rule()
    def kill_and_restart_the_extender(self):
        self.clusters.pop().stop()
        self.extender = self._new_process()

    @invariant()
    def no_gpu_over_capacity(self):
        _, v = self.extender.ledger.state.view_all()
        assert (v.mem_used <= v.mem_total).all() and (v.core_used <= np.maximum(v.core_total, 100)).all()
        assert (v.pods <= v.max_pod[:, None]).all()

    @invariant()
    def a_new_process_reaches_the_same_ledger(self):
        fresh = self._new_process()
        try:
            wait_until(lambda: ledger_fingerprint(fresh.ledger) == ledger_fingerprint(self.extender.ledger),
                       what="the running and the restarted ledgers to agree")
        finally:
            self.clusters.remove(fresh.cluster)
            fresh.cluster.stop()
        # and what both hold is what the API's annotations say
        bound = {p["metadata"]["uid"] for p in self.kube.objects("pods")
                 if p["spec"].get("nodeName") and p.get("status", {}).get("phase") not in ("Succeeded", "Failed")}
        assert {a.pod.uid for a in self.extender.ledger.allocations()} == bound


RestartMachine.TestCase.settings = settings(max_examples=15, stateful_step_count=8, deadline=None)
TestRestartMachine = RestartMachine.TestCase
