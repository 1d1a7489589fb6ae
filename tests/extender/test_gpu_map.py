"""GET ui: the GPU map, self-contained, rendered by a real headless Chromium against a real demo server.

Set ``CGPU_SCREENSHOT=docs/gpu-map.png`` to write the README's screenshot from the rendered page.
"""

import json
import os
import re
import urllib.request
from pathlib import Path

import pytest

from browser import Browser, chromium
from demo_server import serving_demo
from extender.app import create_app
from extender.config import Config

README_POD = {"metadata": {"name": "cuda-sample", "namespace": "default", "uid": "0d4c6f1e-demo"},
              "spec": {"containers": [{"name": "cuda", "resources": {"limits": {
                  "aliyun.com/gpu-mem": "2", "aliyun.com/gpu-core.percentage": "30"}}}]}}
DEMO_NODES = ["gpu-core-a", "gpu-core-b", "gpu-core-full", "gpu-cgpu-a", "gpu-share-a", "gpu-whole-a"]
TILES = "[...document.querySelectorAll('.gpu')].map(t => ({...t.dataset}))"


def post(url: str, body: dict) -> dict:
    request = urllib.request.Request(url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=10) as reply:
        return json.loads(reply.read())


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


@pytest.mark.skipif(chromium() is None, reason="Debian's chromium is not installed (./dev test installs it as root)")
def test_the_map_renders_the_demo_and_shows_a_bind_without_a_reload(tmp_path):
    with serving_demo() as url, Browser(width=1280, height=760) as browser:
        browser.open(f"{url}/ui?refresh=1000")
        browser.wait_for("document.querySelectorAll('.node').length === 6", what="the demo's six nodes")
        rows = browser.evaluate("[...document.querySelectorAll('.node')].map(n => "
                                "[n.dataset.node, n.querySelectorAll('.gpu').length])")
        assert rows == [["gpu-core-a", 4], ["gpu-core-b", 4], ["gpu-core-full", 2], ["gpu-cgpu-a", 2],
                        ["gpu-share-a", 1], ["gpu-whole-a", 0]]
        tiles = {(t["node"], t["gpu"]): t for t in browser.evaluate(TILES)}
        assert tiles[("gpu-core-a", "1")]["pods"] == "default/train-a" and tiles[("gpu-core-a", "1")]["memUsed"] == "4"
        assert tiles[("gpu-cgpu-a", "0")]["pods"] == "default/infer-a"
        refreshed = browser.evaluate("Number(document.body.dataset.refreshed)")

        assert post(f"{url}/filter", {"Pod": README_POD, "Nodes": None, "NodeNames": DEMO_NODES})["NodeNames"] == [
            "gpu-core-a", "gpu-core-b"]
        assert post(f"{url}/bind", {"PodName": "cuda-sample", "PodNamespace": "default", "PodUID": "0d4c6f1e-demo",
                                    "Node": "gpu-core-a"}) == {"Error": ""}
        browser.wait_for("document.querySelector('.gpu[data-node=\"gpu-core-a\"][data-gpu=\"1\"]')"
                         ".dataset.pods.includes('cuda-sample')", what="the bound pod on its GPU")
        assert browser.evaluate("Number(document.body.dataset.refreshed)") > refreshed  # refreshed, not reloaded
        tile = {(t["node"], t["gpu"]): t for t in browser.evaluate(TILES)}[("gpu-core-a", "1")]
        assert (tile["pods"], tile["memUsed"], tile["memTotal"], tile["coreUsed"]) == (
            "default/cuda-sample,default/train-a", "6", "15", "50")
        # a click lists the GPU's pods
        browser.evaluate("document.querySelector('.gpu[data-node=\"gpu-core-a\"][data-gpu=\"1\"]').click()")
        assert browser.wait_for("[...document.querySelectorAll('#details tr[data-pod]')].map(r => r.dataset.pod)") == [
            "default/cuda-sample", "default/train-a"]
        # stranded GPUs are marked: gpu-core-full's 1 GiB left fits no pod seen (2 GiB)
        assert browser.evaluate("[...document.querySelectorAll('.gpu.stranded')].map(t => t.dataset.node)").count(
            "gpu-core-full") == 2
        if os.environ.get("CGPU_SCREENSHOT"):
            browser.screenshot(Path(os.environ["CGPU_SCREENSHOT"]))
        browser.screenshot(tmp_path / "gpu-map.png")
        assert (tmp_path / "gpu-map.png").read_bytes().startswith(b"\x89PNG")
        # the mode filter keeps only the nodes of that mode
        browser.evaluate("(s => { s.value = 'memory'; s.dispatchEvent(new Event('input')); })"
                         "(document.getElementById('mode'))")
        assert browser.evaluate("[...document.querySelectorAll('.node')].map(n => n.dataset.node)") == [
            "gpu-cgpu-a", "gpu-share-a"]
