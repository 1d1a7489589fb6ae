"""Defragmentation made against the fake API server: eviction through the Eviction API (budgets
enforced there), the replacement steered to the planned GPU and bound there, the freed room held for
the pending pod, Events, metrics, expiry, the rate limit, and the RBAC it needs."""

from __future__ import annotations

from pathlib import Path

import yaml

from builders import pod
from defrag_cases import owned, thirds
from extender.defrag.executor import DefragSettings, Executor
from extender.metrics import Metrics
from fakekube import wait_until
from kubesteps import bind, filter_, synced, used
from test_kube_rbac import needed

NODES = ["gpu-a", "gpu-b"]
HELD = "room for this pod is held on another node (defragmentation)"
MANIFESTS = Path(__file__).resolve().parents[3] / "manifests"


def start(started, kube, budget_allowed=1, **settings):
    objects = thirds(budget_allowed)
    budgets = [o for o in objects if o["kind"] == "PodDisruptionBudget"]
    for b in budgets:
        kube.create("poddisruptionbudgets", b)
    extender, _ = synced(started, kube, [o for o in objects if o["kind"] == "Node"],
                         [o for o in objects if o["kind"] == "Pod"])
    wait_until(lambda: len(extender.ledger.allocations()) == 4 and len(extender.ledger.pending) == 1,
               what="the residents and the pending pod")
    executor = Executor(extender.cluster, extender, DefragSettings(**{"interval": 3600, **settings}))
    extender.defragger = executor
    return extender, executor


def replacement(name="web-new", gib=8):
    return owned(pod(name, mem=gib))


def test_a_move_evicts_holds_and_steers_the_replacement_to_the_planned_gpu(kube, started):
    extender, executor = start(started, kube)
    outcome = executor.round()
    assert outcome.startswith("evicted default/web-"), outcome
    move = executor.stats.last.plan.moves[0]
    spot = executor.stats.last.plan.placements["default/whole"]
    evicted = move.pod.split("/")[1]
    assert kube.get("pods", evicted) is None  # the Eviction API deleted it
    assert kube.get("poddisruptionbudgets", "web")["status"]["disruptionsAllowed"] == 0
    assert ("POST", f"/api/v1/namespaces/default/pods/{evicted}/eviction") in kube.requests
    event = wait_until(lambda: next((e for e in kube.events if e["reason"] == "GPUDefragEvicted"), None),
                       what="the move's Event")
    assert event["type"] == "Normal" and event["involvedObject"]["name"] == evicted
    assert f"GPU {move.gpus[0]} of node {move.to_node}" in event["message"] and "default/whole" in event["message"]
    wait_until(lambda: extender.ledger.allocation(f"uid-{evicted}") is None, what="the evicted pod gone")

    # the replacement, a new pod of the same ReplicaSet, as the controller creates it
    new = kube.create("pods", replacement())
    wait_until(lambda: extender.ledger.pending.get(new["metadata"]["uid"]), what="the replacement pending")
    reply = filter_(extender, new, NODES)
    assert reply["NodeNames"] == [move.to_node]
    assert reply["FailedNodes"] == {n: HELD for n in NODES if n != move.to_node}
    # another pod may not take the held room: a 24 GiB pod fits only the freed GPU, held for "whole"
    other = kube.create("pods", pod("other", mem=24))
    assert filter_(extender, other, NODES)["NodeNames"] == []
    assert executor.round() == "waiting for a replacement to be bound"
    assert bind(extender, new, move.to_node) == ""
    allocation = extender.ledger.allocation(new["metadata"]["uid"])
    assert sorted(allocation.memory_per_gpu) == list(move.gpus)  # on the planned GPU
    bound = wait_until(lambda: (kube.get("pods", "web-new")["spec"].get("nodeName") and kube.get("pods", "web-new")),
                       what="the replacement bound")
    assert f'"{move.gpus[0]}":8' in bound["metadata"]["annotations"]["scheduler.framework.gpushare.allocation"]

    # the room is free now and the plan needs no move: still held for "whole" until it binds
    assert executor.round() == "no move helps"
    assert filter_(extender, other, NODES)["NodeNames"] == []
    # the pending pod takes the room; nothing is over-allocated
    whole = kube.get("pods", "whole")
    assert filter_(extender, whole, NODES)["NodeNames"] == [spot.node]
    assert filter_(extender, other, NODES)["NodeNames"] == []  # still held for "whole" until it binds
    assert bind(extender, whole, spot.node) == ""
    assert sorted(extender.ledger.allocation(whole["metadata"]["uid"]).memory_per_gpu) == list(spot.gpus)
    for node_name in NODES:
        assert all(m <= 24 for m in used(extender, node_name)[0])
    assert sorted(used(extender, "gpu-a")[0] + used(extender, "gpu-b")[0]) == [8, 8, 16, 24]
    wait_until(lambda: not extender.ledger.pending.get(whole["metadata"]["uid"]), what="whole bound")
    assert executor.round() == "no move helps" and not extender.ledger.defrag_holds

    text = Metrics(extender).render(None)[0].decode()
    for line in ('cgpu_defrag_moves_total{result="evicted"} 1.0',
                 'cgpu_defrag_moves_total{result="blocked_by_budget"} 0.0',
                 "cgpu_defrag_gpus_freed_total 1.0", 'cgpu_defrag_holds{for="replacement"} 0.0',
                 "cgpu_defrag_plan_moves 0.0"):
        assert line in text.splitlines(), line


def test_the_api_servers_budget_refusal_is_counted_and_the_holds_dropped(kube, started):
    extender, executor = start(started, kube, budget_allowed=0)
    extender.budgets = lambda: [{**b, "status": {"disruptionsAllowed": 1}}
                                for b in kube.objects("poddisruptionbudgets")]
    outcome = executor.round()  # the plan thinks one disruption is allowed; the API server knows better
    assert outcome.endswith("was refused by its PodDisruptionBudget"), outcome
    assert executor.stats.blocked == 1 and executor.stats.evicted == 0 and not extender.ledger.defrag_holds
    assert len(extender.ledger.allocations()) == 4 and len(kube.objects("pods")) == 5
    event = wait_until(lambda: next((e for e in kube.events if e["reason"] == "GPUDefragBlocked"), None),
                       what="the Warning event")
    assert event["type"] == "Warning" and "PodDisruptionBudget" in event["message"]
    assert 'cgpu_defrag_moves_total{result="blocked_by_budget"} 1.0' in \
        Metrics(extender).render(None)[0].decode().splitlines()
    del extender.budgets  # the real budgets: the planner sees none allowed and plans nothing
    assert executor.round() == "no move helps"


def test_holds_expire_and_the_rate_limit_holds(kube, started):
    extender, executor = start(started, kube, hold_seconds=0.3, moves_per_hour=1)
    assert executor.round().startswith("evicted")
    new = kube.create("pods", replacement())
    wait_until(lambda: extender.ledger.pending.get(new["metadata"]["uid"]), what="the replacement pending")
    steered = filter_(extender, new, NODES)["NodeNames"]
    assert len(steered) == 1
    wait_until(lambda: not extender.ledger.defrag_holds.current(), timeout=5, what="the holds to expire")
    assert sorted(filter_(extender, new, NODES)["NodeNames"]) == NODES  # no longer steered
    assert executor.round() == "at the limit of moves per hour"
    assert executor.stats.holds_expired == 2 and not extender.ledger.defrag_holds


def test_evictions_fail_cleanly_and_every_request_is_granted_by_the_manifests(kube, started):
    extender, executor = start(started, kube)
    kube.fail_evictions.append(500)
    assert executor.round().startswith("evicting default/web-")
    assert executor.stats.failed == 1 and not extender.ledger.defrag_holds and len(kube.objects("pods")) == 5
    assert executor.round().startswith("evicted")
    wait_until(lambda: any(e["reason"] == "GPUDefragEvicted" for e in kube.events), what="the Event")
    rules = [rule for name in ("rbac.yaml", "defrag/rbac.yaml") for doc in yaml.safe_load_all(
        (MANIFESTS / name).read_text()) if doc and doc["kind"] == "ClusterRole" for rule in doc["rules"]]
    granted = {(group, resource, verb) for rule in rules for group in rule["apiGroups"]
               for resource in rule["resources"] for verb in rule["verbs"]}
    for method, path in kube.requests:
        if path.startswith("/apis/policy/v1/poddisruptionbudgets"):
            assert ("policy", "poddisruptionbudgets", "list") in granted
            continue
        for namespace, resource, verb in needed(method, path):
            assert ("", resource, verb) in granted or (namespace == "kube-system" and resource == "configmaps"), \
                (method, path)


def test_serve_defrag_execute_runs_the_loop_by_itself(kube):
    from extender.app import build_extender
    from extender.config import Config

    from conftest import connect

    for obj in thirds(1):
        kind = {"Node": "nodes", "Pod": "pods", "PodDisruptionBudget": "poddisruptionbudgets"}[obj["kind"]]
        kube.create(kind, obj)
    cluster = connect(kube)
    try:
        extender = build_extender(Config(defrag_execute=True, defrag_interval=0.05), cluster=cluster)
        wait_until(lambda: extender.defragger.stats.evicted == 1, what="a move made by the loop")
        wait_until(lambda: extender.defragger.stats.last_outcome == "waiting for a replacement to be bound",
                   what="the next round to wait for the replacement")
        assert extender.defragger.stats.evicted == 1
    finally:
        cluster.stop()
    assert not extender.defragger._thread.is_alive()  # stopped with the backend


def test_defrag_execute_needs_the_kubernetes_backend_and_sane_flags(capsys):
    from extender.app import build_extender
    from extender.cli import main
    from extender.config import Config
    from extender.embedded import EmbeddedCluster

    extender = build_extender(Config(defrag_execute=True), cluster=EmbeddedCluster(thirds(), "test"))
    assert extender.defragger is None  # the embedded cluster cannot evict
    for flags in (["--defrag-max-moves", "101"], ["--defrag-moves-per-hour", "0"], ["--defrag-interval", "0"],
                  ["--defrag-hold-seconds", "-1"]):
        assert main(["serve", "--demo", *flags]) == 2
        err = capsys.readouterr().err
        assert len(err.splitlines()) == 1 and "--defrag-max-moves must be 0 to 100" in err
