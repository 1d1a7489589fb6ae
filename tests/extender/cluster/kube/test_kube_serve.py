"""`cgpu-extender serve` as a process (one process) on the fake API server: backend selection,
binds over HTTP, and a kill -9 between binds that changes nothing."""

import json
import os
import signal
import subprocess
import sys
import urllib.error
import urllib.request

import pytest

from builders import node, scheduler_pod
from extender.ledger import annotations as A
from fakekube import FakeKube, free_port, wait_until

KUBECONFIG = """\
apiVersion: v1
kind: Config
clusters:
- name: fake
  cluster: {{server: "{url}"}}
users:
- name: tester
  user: {{token: not-checked}}
contexts:
- name: fake
  context: {{cluster: fake, user: tester}}
current-context: fake
"""


def call(url, payload=None):
    data = None if payload is None else json.dumps(payload).encode()
    try:
        with urllib.request.urlopen(urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"}), timeout=5) as reply:
            return reply.status, json.loads(reply.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


class Server:
    def __init__(self, args, env):
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}/cgpu-scheduler"
        self.process = subprocess.Popen([sys.executable, "-m", "extender", "serve", "--port", str(self.port), *args],
                                        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)

    def ready(self):
        try:
            return call(f"{self.base}/readyz")[0] == 200
        except OSError:
            assert self.process.poll() is None, self.process.stderr.read()
            return False

    def kill(self):
        """SIGKILL: no shutdown of any kind."""
        self.process.kill()
        self.process.wait(10)


@pytest.fixture
def world(tmp_path):
    kube = FakeKube().start()
    config = tmp_path / "kubeconfig"
    config.write_text(KUBECONFIG.format(url=kube.url))
    env = {k: v for k, v in os.environ.items() if k not in ("KUBERNETES_SERVICE_HOST",)}
    env["HOME"] = str(tmp_path)  # no ~/.kube/config of the developer's
    servers = []

    def serve(*args, kubeconfig_env=False):
        server = Server(args, {**env, **({"KUBECONFIG": str(config)} if kubeconfig_env else {})})
        servers.append(server)
        wait_until(server.ready, timeout=30, what="serve to become ready")
        return server

    yield kube, config, serve
    for server in servers:
        if server.process.poll() is None:
            server.process.send_signal(signal.SIGTERM)
            server.process.wait(15)
    kube.stop()


def test_backend_selection(world):
    kube, config, serve = world
    assert call(f"{serve('--kubeconfig', str(config)).base}/inspect")[1]["cluster"] == "kubernetes"
    assert call(f"{serve(kubeconfig_env=True).base}/inspect")[1]["cluster"] == "kubernetes"
    assert call(f"{serve('--demo', kubeconfig_env=True).base}/inspect")[1]["cluster"] == "embedded"
    # nothing configured: no silent demo (tests/extender/cli/test_serve.py)


def shares(report):
    """Per node and GPU: memory, compute and the UIDs of the pods holding them."""
    return [(n["name"], g["index"], g["memory"], g["core"], sorted(p["uid"] for p in g["pods"]))
            for n in report["nodes"] for g in n["gpus"]]


def bind_args(name, uid, node_name="gpu-a"):
    return {"PodName": name, "PodNamespace": "default", "PodUID": uid, "Node": node_name}


def test_kill_between_binds_changes_nothing(world):
    kube, config, serve = world
    kube.create("nodes", node("gpu-a", "core_mem", gpus=2, gib=15))
    first = kube.create("pods", scheduler_pod("a", "uid-a"))
    kube.create("pods", scheduler_pod("b", "uid-b"))
    server = serve("--kubeconfig", str(config))
    assert call(f"{server.base}/filter", {"Pod": first, "NodeNames": ["gpu-a"]})[1]["NodeNames"] == ["gpu-a"]
    assert call(f"{server.base}/bind", bind_args("a", "uid-a"))[1] == {"Error": ""}
    wait_until(lambda: call(f"{server.base}/inspect")[1]["nodes"][0]["gpus"][0]["pods"][0]["confirmed"],
               what="the binding seen by the watch")
    before = call(f"{server.base}/inspect")[1]
    server.kill()  # no shutdown of any kind
    server = serve("--kubeconfig", str(config))
    after = call(f"{server.base}/inspect")[1]
    assert shares(after) == shares(before) and shares(after)[0][2] == {"used": 2, "total": 15}
    # the restarted extender binds the next pod (read from the API: it never saw a filter for it)
    assert call(f"{server.base}/bind", bind_args("b", "uid-b"))[1] == {"Error": ""}
    annotations = kube.get("pods", "b")["metadata"]["annotations"]
    assert annotations[A.V2_ALLOCATION] == '{"0":{"0":2}}' and annotations[A.V2_CORE] == '{"0":{"0":30}}'
    kube.delete("pods", "a")
    wait_until(lambda: shares(call(f"{server.base}/inspect")[1])[0][2:] == ({"used": 2, "total": 15},
                                                                             {"used": 30, "total": 100}, ["uid-b"]),
               what="the deleted pod's GPU share freed")


def test_serve_refuses_a_missing_kubeconfig(tmp_path, capsys):
    from extender.cli.main import main

    assert main(["serve", "--kubeconfig", str(tmp_path / "nope")]) == 2
    assert "no such kubeconfig file" in capsys.readouterr().err
