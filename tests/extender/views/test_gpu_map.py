"""GET ui: the GPU map, self-contained, rendered by a real headless Chromium against real servers: the demo, and a
cluster of 1,000 nodes (benchmarks/operator_cluster.py). ``python tests/gpu_map_screenshot.py`` writes docs/gpu-map.png.
"""

import json
import re
import urllib.request
from collections import Counter

import pytest

from benchmarks.operator_cluster import POOL_LABEL, learn_mix, operator_objects, write_cluster
from browser import Browser, chromium
from demo_server import serving, serving_demo
from extender.serving.app import create_app
from extender.serving.config import Config
from policy.names import NODE_SCHEDULE

README_POD = {"metadata": {"name": "cuda-sample", "namespace": "default", "uid": "0d4c6f1e-demo"},
              "spec": {"containers": [{"name": "cuda", "resources": {"limits": {
                  "aliyun.com/gpu-mem": "2", "aliyun.com/gpu-core.percentage": "30"}}}]}}
DEMO_NODES = ["gpu-core-a", "gpu-core-b", "gpu-core-full", "gpu-cgpu-a", "gpu-share-a", "gpu-whole-a"]
TILES = "[...document.querySelectorAll('#nodeRows .gpu')].map(t => ({...t.dataset}))"
ROWS = "[...document.querySelectorAll('#nodeRows tr')]"
NEEDS_CHROMIUM = pytest.mark.skipif(chromium() is None,
                                    reason="Debian's chromium is not installed (./dev test installs it as root)")

HOSTILE = '<img src=x onerror="window.pwned=1">'


def with_hostile_names(objects: list) -> list:
    """``objects`` with script in a node's name, a pool label, a bound pod's name and a pending pod's name."""
    node = next(o for o in objects if o["kind"] == "Node" and o["metadata"]["labels"].get(NODE_SCHEDULE))
    old = node["metadata"]["name"]
    node["metadata"]["name"] = f"{HOSTILE}-node"
    node["metadata"]["labels"][POOL_LABEL] = "<script>window.pwned=2</script>"
    bound = [o for o in objects if o["kind"] == "Pod" and o["spec"].get("nodeName") == old]
    for pod in bound:
        pod["spec"]["nodeName"] = node["metadata"]["name"]
    bound[0]["metadata"]["name"] = f"{HOSTILE}-pod"
    waiting = next(o for o in objects if o["kind"] == "Pod" and "nodeName" not in o["spec"])
    waiting["metadata"]["name"] = f"{HOSTILE}-pending"
    return objects



def post(url: str, body: dict) -> dict:
    request = urllib.request.Request(url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=10) as reply:
        return json.loads(reply.read())


def get(url: str) -> dict:
    with urllib.request.urlopen(url, timeout=60) as reply:
        return json.loads(reply.read())


def choose(browser: Browser, control: str, value) -> None:
    """Set a control of the page as a user would (a select's value, a search text, a checkbox) and let it redraw."""
    prop = "checked" if isinstance(value, bool) else "value"
    browser.evaluate(f"(c => {{ c.{prop} = {json.dumps(value)}; c.dispatchEvent(new Event('input')); }})"
                     f"(document.getElementById({json.dumps(control)}))")


def rows(browser: Browser, what: str = "n => n.dataset.node"):
    return browser.evaluate(f"{ROWS}.map({what})")


def test_the_page_is_one_self_contained_file_served_on_get_only():
    client = create_app(Config()).test_client()
    reply = client.get("/cgpu-scheduler/ui")
    assert reply.status_code == 200 and reply.mimetype == "text/html"
    page = reply.get_data(as_text=True)
    assert "<script>" in page and "<style>" in page
    # nothing fetched from elsewhere: no src/href attributes, no CSS url()/@import, no absolute URL
    assert not re.search(r"\b(src|href)\s*=|url\(|@import|https?://|//cdn", page, re.I)
    assert client.post("/cgpu-scheduler/ui").status_code == 405


def test_the_compact_inspect_is_the_full_one_less_the_annotations():
    client = create_app(Config()).test_client()
    client.post("/cgpu-scheduler/filter", json={"Pod": README_POD, "Nodes": None, "NodeNames": DEMO_NODES})
    client.post("/cgpu-scheduler/bind", json={"PodName": "cuda-sample", "PodNamespace": "default",
                                              "PodUID": "0d4c6f1e-demo", "Node": "gpu-core-a"})
    full = client.get("/cgpu-scheduler/inspect").json
    reply = client.get("/cgpu-scheduler/inspect?compact=1")
    compact = reply.json
    assert compact["compact"] == 1 and len(reply.data) < len(client.get("/cgpu-scheduler/inspect").data) / 2
    assert {k: v for k, v in compact.items() if k not in ("nodes", "compact")} == {
        k: v for k, v in full.items() if k != "nodes"}
    assert [n["name"] for n in compact["nodes"]] == [n["name"] for n in full["nodes"]]
    for small, node in zip(compact["nodes"], full["nodes"]):
        assert {k: small[k] for k in ("pool", "model", "ready", "unschedulable", "sharing", "problem",
                                      "wholeGpus", "stranded")} == {
            k: node[k] for k in ("pool", "model", "ready", "unschedulable", "sharing", "problem", "wholeGpus",
                                 "stranded")}
        assert small["gpus"] == [[g["memory"]["used"], g["memory"]["total"], g["core"]["used"], g["core"]["total"],
                                  int(g["healthy"]) + 2 * int(g["stranded"]),
                                  [[f"{p['namespace']}/{p['name']}", p["memory"], p["core"], int(p["confirmed"])]
                                   for p in g["pods"]]] for g in node["gpus"]]
    gpu1 = compact["nodes"][0]["gpus"][1]
    assert gpu1[5] == [["default/cuda-sample", 2, 30, 1], ["default/train-a", 4, 20, 1]]
    idle = {n["name"]: n["idle"] for n in compact["nodes"]}
    assert idle["gpu-core-full"] == round(2 / 15, 4) and idle["gpu-core-b"] == 4


@pytest.mark.parametrize("value", ["yes", "2", "", "1' or '1"])
def test_a_bad_compact_value_is_refused_with_a_message(value):
    reply = create_app(Config()).test_client().get("/cgpu-scheduler/inspect", query_string={"compact": value})
    assert reply.status_code == 400 and reply.json["Error"].startswith("compact must be 1 or 0, not ")


@NEEDS_CHROMIUM
def test_the_map_renders_the_demo_and_shows_a_bind_without_a_reload(tmp_path):
    with serving_demo() as url, Browser(width=1280, height=760) as browser:
        browser.record_errors()
        browser.open(f"{url}/ui?refresh=1000")
        browser.wait_for(f"{ROWS}.length === 6 && !!document.querySelector('#pending td')", what="the demo's nodes")
        assert rows(browser, "n => [n.dataset.node, n.querySelectorAll('.gpu').length]") == [
            ["gpu-cgpu-a", 2], ["gpu-core-a", 4], ["gpu-core-b", 4], ["gpu-core-full", 2], ["gpu-share-a", 1],
            ["gpu-whole-a", 0]]
        tiles = {(t["node"], t["gpu"]): t for t in browser.evaluate(TILES)}
        assert tiles[("gpu-core-a", "1")]["pods"] == "default/train-a" and tiles[("gpu-core-a", "1")]["memUsed"] == "4"
        assert tiles[("gpu-cgpu-a", "0")]["pods"] == "default/infer-a"
        refreshed = browser.evaluate("Number(document.body.dataset.refreshed)")

        assert post(f"{url}/filter", {"Pod": README_POD, "Nodes": None, "NodeNames": DEMO_NODES})["NodeNames"] == [
            "gpu-core-a", "gpu-core-b"]
        assert post(f"{url}/bind", {"PodName": "cuda-sample", "PodNamespace": "default", "PodUID": "0d4c6f1e-demo",
                                    "Node": "gpu-core-a"}) == {"Error": ""}
        browser.wait_for("document.querySelector('#nodeRows .gpu[data-node=\"gpu-core-a\"][data-gpu=\"1\"]')"
                         ".dataset.pods.includes('cuda-sample')", what="the bound pod on its GPU")
        assert browser.evaluate("Number(document.body.dataset.refreshed)") > refreshed  # refreshed, not reloaded
        tile = {(t["node"], t["gpu"]): t for t in browser.evaluate(TILES)}[("gpu-core-a", "1")]
        assert (tile["pods"], tile["memUsed"], tile["memTotal"], tile["coreUsed"]) == (
            "default/cuda-sample,default/train-a", "6", "15", "50")
        # a click on a GPU lists its pods
        browser.evaluate("document.querySelector('#nodeRows .gpu[data-node=\"gpu-core-a\"][data-gpu=\"1\"]').click()")
        assert browser.wait_for("[...document.querySelectorAll('#details tr[data-pod]')].map(r => r.dataset.pod)") == [
            "default/cuda-sample", "default/train-a"]
        # stranded: only gpu-core-full's 1 GiB + 60 % left (the pod seen asks for 2 GiB + 30 %); never an untouched
        # GPU, nor the memory-only nodes no pod seen could use
        browser.wait_for("document.querySelectorAll('#nodeRows .gpu.stranded').length > 0", what="stranded GPUs")
        assert sorted((t["node"], t["gpu"]) for t in browser.evaluate(TILES) if t["stranded"] == "true") == [
            ("gpu-core-full", "0"), ("gpu-core-full", "1")]
        # the whole-GPU node is a plain row, not an error: muted, no warning mark, its GPUs counted
        whole = browser.evaluate("(r => ({cls: r.className, warn: r.querySelectorAll('.warn').length, "
                                 "color: getComputedStyle(r.cells[0]).color, text: r.innerText}))"
                                 "(document.querySelector('#nodeRows tr[data-node=\"gpu-whole-a\"]'))")
        assert whole["cls"] == "plain" and whole["warn"] == 0 and "2 whole GPUs" in whole["text"]
        assert whole["color"] == "rgb(102, 112, 133)"  # --muted, not --bad
        browser.screenshot(tmp_path / "gpu-map.png")
        assert (tmp_path / "gpu-map.png").read_bytes().startswith(b"\x89PNG")
        choose(browser, "mode", "memory")
        assert rows(browser) == ["gpu-cgpu-a", "gpu-share-a"]
        assert browser.errors() == []


def shared_gib_free(node: dict) -> int:
    return sum(max(g[1] - g[0], 0) for g in node["gpus"] if g[4] & 1)


@NEEDS_CHROMIUM
def test_at_1000_nodes_the_summary_the_pending_pods_and_sorted_rows_fit_one_screen(tmp_path):
    path = write_cluster(tmp_path / "cluster.json", with_hostile_names(operator_objects(1000, pending=40)))
    with serving("--cluster", path, start_seconds=120) as url, Browser(width=1440, height=900) as browser:
        learn_mix(url)
        report, plan = get(f"{url}/inspect?compact=1"), get(f"{url}/plan")
        nodes = report["nodes"]
        browser.record_errors()
        browser.open(f"{url}/ui?refresh=5000")
        browser.wait_for(f"{ROWS}.length > 0 && !!document.querySelector('#pending tr[data-pod]')",
                         timeout=60, what="the map of 1,000 nodes")

        # one screen: nothing scrolls but the panels; the summary, the pools and the pending pods are in view
        assert browser.evaluate("document.scrollingElement.scrollHeight <= innerHeight")
        boxes = browser.evaluate("Object.fromEntries(['totals', 'pools', 'pendingPanel', 'nodesPanel'].map(id => "
                                 "[id, document.getElementById(id).getBoundingClientRect().toJSON()]))")
        assert all(0 <= box["top"] and box["bottom"] <= 900 and box["height"] > 0 for box in boxes.values()), boxes
        in_view = browser.evaluate("(p => [...p.querySelectorAll('#pending tr')].filter(r => "
                                   "r.getBoundingClientRect().bottom <= p.getBoundingClientRect().bottom).length)"
                                   "(document.getElementById('pendingPanel'))")
        assert in_view >= 10
        assert len(rows(browser)) == 400  # a page of rows; "show more" for the rest
        assert browser.evaluate("document.getElementById('totals').innerText").startswith("nodes 1,000 ")

        # the pools' summary is the nodes' own figures
        pools = browser.evaluate("[...document.querySelectorAll('#poolRows tr')].map(r => "
                                 "[r.dataset.pool, ...[...r.cells].map(c => c.textContent)])")
        by_pool = {}
        for n in nodes:
            by_pool.setdefault(n["pool"] or "(none)", []).append(n)
        assert [p[0] for p in pools] == sorted(by_pool) and len(pools) == 11
        for name, _, count, usable, _, gpus, used, free, stranded, _ in pools:
            members = by_pool[name]
            assert int(count) == len(members)
            assert int(usable) == sum(1 for n in members if n["ready"] is True and not n["unschedulable"])
            assert int(gpus.replace(",", "")) == sum(len(n["gpus"]) for n in members)
            assert int(free.replace(",", "")) == sum(shared_gib_free(n) for n in members)
            assert int(used.replace(",", "")) == sum(g[0] for n in members for g in n["gpus"])
            assert float(stranded.split()[0]) == pytest.approx(sum(n["stranded"] for n in members), abs=0.01)

        # sorting by stranded share and by free memory, both ways
        browser.evaluate("document.querySelector('#nodes th[data-sort=stranded]').click()")
        top = rows(browser, "r => Number(r.dataset.stranded)")
        assert top == sorted(top, reverse=True) and top[0] == pytest.approx(max(n["stranded"] for n in nodes))
        browser.evaluate("document.querySelector('#nodes th[data-sort=free]').click()")
        free = rows(browser, "r => Number(r.dataset.free)")
        assert free == sorted(free, reverse=True) and free[0] == max(shared_gib_free(n) for n in nodes if n["gpus"])
        browser.evaluate("document.querySelector('#nodes th[data-sort=free]').click()")
        free = rows(browser, "r => Number(r.dataset.free)")
        assert free == sorted(free) and free[0] == min(shared_gib_free(n) for n in nodes if n["gpus"])

        # search by pod name: the node that holds it, its GPU marked; by a pending pod's name
        host = nodes[500]
        pod_ref = next(p[0] for g in host["gpus"] for p in g[5])
        choose(browser, "search", pod_ref)
        assert rows(browser) == [host["name"]]
        assert browser.evaluate("[...document.querySelectorAll('#nodeRows .gpu.hit')].map(t => t.dataset.pods)") == [
            next(",".join(p[0] for p in g[5]) for g in host["gpus"] if any(p[0] == pod_ref for p in g[5]))]
        choose(browser, "search", "team-0/job-0008")
        assert browser.evaluate("[...document.querySelectorAll('#pending tr[data-pod]')].map(r => r.dataset.pod)") == [
            "team-0/job-0008"]
        choose(browser, "search", "")

        # filters by readiness and GPU model
        choose(browser, "ready", "notready")
        assert len(rows(browser)) == sum(1 for n in nodes if n["ready"] is False) == 20
        assert set(rows(browser, "r => r.cells[3].textContent")) <= {"NotReady", "NotReady, cordoned"}
        choose(browser, "ready", "")
        choose(browser, "model", "NVIDIA-A10")
        assert set(rows(browser, "r => r.cells[2].textContent")) == {"NVIDIA-A10"}
        assert browser.evaluate(f"{ROWS}.length") == min(400, sum(1 for n in nodes if n["model"] == "NVIDIA-A10"))
        choose(browser, "model", "")

        # the pending pods, with where the plan puts each, as the plan says
        listed = browser.evaluate("[...document.querySelectorAll('#pending tr[data-pod]')].map(r => "
                                  "[r.dataset.pod, r.dataset.outcome, r.innerText])")
        assert [p[0] for p in listed] == [p["pod"] for p in plan["pendingPods"]] and len(listed) == 40
        assert Counter(p[1] for p in listed) == Counter(p["outcome"] for p in plan["pendingPods"])
        assert set(p[1] for p in listed) == {"fits_now", "new_node", "unplaceable"}
        for (_, outcome, text), planned in zip(listed, plan["pendingPods"]):
            expected = {"fits_now": lambda p: f"room on {p['node']}", "new_node": lambda p: f"of pool {p['pool']}",
                        "unplaceable": lambda p: p["reason"][:40]}[outcome](planned)
            assert expected in text, (text, planned)
        fits = next(p for p in plan["pendingPods"] if p["outcome"] == "fits_now")
        browser.evaluate(f"document.querySelector('#pending tr[data-node={json.dumps(fits['node'])}]').click()")
        assert browser.evaluate("document.getElementById('detailsTitle').textContent") == fits["node"]

        # names are text, never markup
        assert browser.evaluate("window.pwned") is None
        assert browser.evaluate("document.querySelectorAll('img, #nodeRows script, #poolRows script').length") == 0
        choose(browser, "search", "onerror")
        assert rows(browser, "r => r.cells[0].textContent") == [f"{HOSTILE}-node"]
        assert browser.evaluate("[...document.querySelectorAll('#pending tr[data-pod]')].map(r => r.dataset.pod)") == [
            f"team-0/{HOSTILE}-pending"]
        assert browser.evaluate("document.querySelector('#poolRows tr').cells[0].textContent") == (
            "<script>window.pwned=2</script>")
        browser.screenshot(tmp_path / "gpu-map-1000.png")
        assert browser.errors() == []
