"""Defragmentation's surfaces: `cgpu-extender defrag` (file, API server, endpoint; JSON and text),
GET {prefix}/defrag, and what the autoscaling plan says of it."""

from __future__ import annotations

import json
import threading

import pytest
import yaml
from kubernetes import client
from werkzeug.serving import make_server

from defrag_cases import budget, thirds, waiting
from extender.app import create_app
from extender.cli import main
from extender.commands.defrag import from_objects
from extender.commands.inspect import api_objects
from extender.config import Config
from extender.defrag.text import render
from extender.planning import PlanSettings
from fakekube import FakeKube

MOVE_KEYS = {"pod", "from", "to", "gpus"}


def write(tmp_path, objects, name="cluster.yaml"):
    path = tmp_path / name
    path.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": objects}))
    return str(path)


def cli(capsys, *args) -> tuple[int, str, str]:
    code = main(["defrag", *args])
    out, err = capsys.readouterr()
    return code, out, err


def test_the_issues_case_one_move_frees_a_whole_gpu(tmp_path, capsys):
    code, out, err = cli(capsys, "--cluster", write(tmp_path, thirds()), "--json")
    assert code == 0 and err == ""
    reply = json.loads(out)
    assert set(reply) == {"moves", "unblocks", "wholeGPUsFreed", "reasons"}
    (move,) = reply["moves"]
    assert set(move) == MOVE_KEYS and move["pod"].startswith("default/web-") and len(move["gpus"]) == 1
    assert move["from"] == move["to"]  # onto the neighbouring GPU of its own node: 16 of 24 GiB
    assert reply["unblocks"] == ["default/whole"] and reply["wholeGPUsFreed"] == 1
    reasons = reply["reasons"]
    assert reasons["search"] == "exact" and reasons["pending"] == {"default/whole": "gets room through 1 move"}
    assert reasons["placements"]["default/whole"]["node"] == move["from"]
    assert reasons["movable"] == {"movable": 4}


def test_text_names_the_move_and_the_room(tmp_path, capsys):
    code, out, _ = cli(capsys, "--cluster", write(tmp_path, thirds()))
    lines = out.splitlines()
    assert code == 0 and lines[0] == "1 move lets 1 pending pod in; 1 whole GPU freed (exact search, at most 5 moves)"
    assert lines[2].split() == ["MOVE", "POD", "FROM", "TO", "GPUS"] and lines[3].split()[0] == "1"
    assert "room after the moves:" in lines and any(line.startswith("default/whole") for line in lines)


def test_budgets_in_the_cluster_file_forbid_the_moves(tmp_path, capsys):
    reply = json.loads(cli(capsys, "--cluster", write(tmp_path, thirds(budget_allowed=0)), "--json")[1])
    assert reply["moves"] == [] and reply["unblocks"] == [] and reply["wholeGPUsFreed"] == 0
    assert reply["reasons"]["pending"]["default/whole"] == "PodDisruptionBudgets allow none of the evictions it needs"
    assert reply["reasons"]["summary"] == "no moves help: see pending"
    allowed = json.loads(cli(capsys, "--cluster", write(tmp_path, thirds(budget_allowed=1)), "--json")[1])
    assert len(allowed["moves"]) == 1


@pytest.mark.parametrize("change, why", [
    (lambda p: p["metadata"].pop("ownerReferences"), "not owned by a controller"),
    (lambda p: p["metadata"].update(namespace="kube-system"), "in kube-system"),
    (lambda p: p["metadata"].update(annotations={**p["metadata"]["annotations"],
                                                 "cgpu.alibabacloud.com/defrag": "false"}), "opted out"),
])
def test_pods_that_may_not_move_are_left_and_counted(tmp_path, capsys, change, why):
    objects = thirds()
    for p in objects:
        if p["kind"] == "Pod" and p["metadata"]["name"].startswith("web-"):
            change(p)
    reply = json.loads(cli(capsys, "--cluster", write(tmp_path, objects), "--json")[1])
    assert reply["moves"] == [] and why in reply["reasons"]["pending"]["default/whole"]
    assert [k for k in reply["reasons"]["movable"]] == [next(k for k in reply["reasons"]["movable"] if why in k)]


def test_a_replacement_goes_only_where_its_selector_allows(tmp_path, capsys):
    objects = thirds()
    for p in objects:
        if p["kind"] == "Pod" and p["metadata"]["name"].startswith("web-a"):
            p["spec"]["nodeSelector"] = {"kubernetes.io/hostname": "gpu-a"}
    reply = json.loads(cli(capsys, "--cluster", write(tmp_path, objects), "--json")[1])
    (move,) = reply["moves"]
    assert not move["pod"].startswith("default/web-a") or move["to"] == "gpu-a"


def test_bad_options_are_one_line_and_exit_2(tmp_path, capsys):
    assert cli(capsys, "--cluster", write(tmp_path, thirds()), "--max-moves", "-1")[0] == 2
    code, out, err = cli(capsys, "--cluster", str(tmp_path / "missing.yaml"))
    assert code == 2 and out == "" and len(err.splitlines()) == 1 and err.startswith("defrag: ")
    code, _, err = cli(capsys, "--endpoint", "http://127.0.0.1:9/cgpu-scheduler")
    assert code == 2 and err.startswith("defrag: cannot read http://127.0.0.1:9/cgpu-scheduler/defrag")


def test_the_route_answers_what_the_cli_prints_and_refuses_a_bad_max_moves(tmp_path, capsys):
    path = write(tmp_path, thirds())
    printed = json.loads(cli(capsys, "--cluster", path, "--json", "--max-moves", "3")[1])
    app = create_app(Config(cluster_file=path))
    web = app.test_client()
    reply = web.get("/cgpu-scheduler/defrag?maxMoves=3")
    assert reply.status_code == 200 and reply.get_json() == printed
    assert web.get("/cgpu-scheduler/defrag").get_json()["reasons"]["maxMoves"] == 5
    none = web.get("/cgpu-scheduler/defrag?maxMoves=0").get_json()
    assert none["moves"] == [] and none["reasons"]["pending"]["default/whole"].startswith("no plan of at most 0")
    for bad in ("-1", "x", "101", ""):
        reply = web.get(f"/cgpu-scheduler/defrag?maxMoves={bad}")
        assert reply.status_code == 400 and "maxMoves must be a whole number" in reply.get_json()["Error"]
    assert web.get("/cgpu-scheduler/inspect").status_code == 200  # nothing moved: a plan only
    assert 'cgpu_request_duration_seconds_count{verb="defrag"} 7.0' in web.get("/cgpu-scheduler/metrics").text


def test_the_route_is_503_before_the_first_sync():
    class Unsynced:
        kind = "embedded"

        def start(self, ledger):
            pass

        def ready(self):
            return False

    reply = create_app(Config(), cluster=Unsynced()).test_client().get("/cgpu-scheduler/defrag")
    assert reply.status_code == 503 and "first sync" in reply.get_json()["Error"]


@pytest.fixture
def api_server():
    kube = FakeKube().start()
    for obj in thirds(budget_allowed=1):
        kind = {"Node": "nodes", "Pod": "pods", "PodDisruptionBudget": "poddisruptionbudgets"}[obj["kind"]]
        kube.create(kind, obj)
    yield kube
    kube.stop()


def test_the_api_server_source_lists_budgets_and_the_endpoint_source_asks_the_extender(api_server, tmp_path, capsys):
    configuration = client.Configuration()
    configuration.host = api_server.url
    objects = api_objects(api_client=client.ApiClient(configuration), budgets=True)
    assert sum(o["kind"] == "PodDisruptionBudget" for o in objects) == 1
    from_api = from_objects(objects, PlanSettings(), 5)
    assert len(from_api["moves"]) == 1
    blocked = from_objects([o for o in objects if o["kind"] != "PodDisruptionBudget"] + [budget(0)], PlanSettings(), 5)
    assert blocked["moves"] == []
    app = create_app(Config(cluster_file=write(tmp_path, thirds(budget_allowed=1))))
    server = make_server("127.0.0.1", 0, app, threaded=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        code, out, _ = cli(capsys, "--endpoint", f"http://127.0.0.1:{server.server_port}/cgpu-scheduler", "--json")
    finally:
        server.shutdown()
    assert code == 0 and json.loads(out) == from_api
    assert render(from_api).splitlines()[0].startswith("1 move lets 1 pending pod in")


def pooled(objects: list) -> list:
    for obj in objects:
        if obj["kind"] == "Node":
            obj["metadata"]["labels"]["alibabacloud.com/nodepool-id"] = "np"
    return objects + [waiting("huge", 30)]


def test_the_autoscaling_plan_says_which_pods_defragmentation_could_place(tmp_path, capsys):
    objects = pooled(thirds())
    code = main(["plan", "--cluster", write(tmp_path, objects), "--json"])
    reply = json.loads(capsys.readouterr()[0])
    assert code == 0 and reply["pools"]["np"]["pods"] == ["default/whole"]
    assert reply["defragCouldPlace"] == ["default/whole"]
    main(["plan", "--cluster", write(tmp_path, objects)])
    text = capsys.readouterr()[0]
    assert "defragmentation could place without a new node (see `cgpu-extender defrag`):\ndefault/whole\n" in text
    main(["plan", "--cluster", write(tmp_path, pooled(thirds(budget_allowed=0))), "--json"])
    assert json.loads(capsys.readouterr()[0])["defragCouldPlace"] == []
