"""`cgpu-extender serve` for real: our HTTP server, on loopback, the demo cluster."""

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from builders import scheduler_pod
from extender.cli.main import main


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def call(url, payload=None):
    data = None if payload is None else json.dumps(payload).encode()
    with urllib.request.urlopen(urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"}), timeout=5) as reply:
        return reply.status, json.loads(reply.read())


@pytest.fixture
def server():
    port = free_port()
    process = subprocess.Popen([sys.executable, "-m", "extender", "serve", "--demo", "--port", str(port)],
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    base = f"http://127.0.0.1:{port}/cgpu-scheduler"
    deadline = time.monotonic() + 30
    while True:
        try:
            if call(f"{base}/readyz")[0] == 200:
                break
        except OSError:
            if process.poll() is not None or time.monotonic() > deadline:
                process.kill()
                pytest.fail(f"server did not start: {process.stdout.read()}")
            time.sleep(0.1)
    yield base, process
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=15)


def test_demo_over_http_with_json_logs(server):
    base, process = server
    p = scheduler_pod()
    status, result = call(f"{base}/filter", {"Pod": p, "Nodes": None, "NodeNames": ["gpu-core-a", "gpu-core-b"]})
    assert status == 200 and result["NodeNames"] == ["gpu-core-a", "gpu-core-b"]
    status, scores = call(f"{base}/prioritize", {"Pod": p, "Nodes": None, "NodeNames": result["NodeNames"]})
    assert scores[0] == {"Host": "gpu-core-a", "Score": 10}
    status, bound = call(f"{base}/bind", {"PodName": p["metadata"]["name"], "PodNamespace": "default",
                                          "PodUID": p["metadata"]["uid"], "Node": "gpu-core-a"})
    assert bound == {"Error": ""}
    _, report = call(f"{base}/inspect")
    gpu1 = report["nodes"][0]["gpus"][1]
    assert p["metadata"]["name"] in [q["name"] for q in gpu1["pods"]]
    process.send_signal(signal.SIGTERM)
    output, _ = process.communicate(timeout=15)
    lines = [json.loads(line) for line in output.splitlines() if line.startswith("{")]
    assert any(line.get("msg") == "bound" and line.get("node") == "gpu-core-a" for line in lines)
    assert all(line.startswith("{") for line in output.splitlines() if line.strip()), output


def test_serve_refuses_bad_arguments_clearly(tmp_path, capsys):
    assert main(["serve", "--cluster", str(tmp_path / "missing.yaml")]) == 2
    assert "missing.yaml: cannot read" in capsys.readouterr().err
    bad = tmp_path / "bad.yaml"
    bad.write_text("a: [")
    assert main(["serve", "--cluster", str(bad)]) == 2
    assert "not valid YAML" in capsys.readouterr().err
    assert main(["serve", "--port", "0"]) == 2
    assert "--port must be 1..65535" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["serve", "--scoring", "nonsense"])


def test_serve_without_a_cluster_exits_2_saying_what_it_tried(tmp_path):
    """No --cluster, no --demo, no Kubernetes configuration: never the demo (it would report Ready).
    A process, so that serving the demo after all fails the test instead of hanging it."""
    env = {k: v for k, v in os.environ.items() if k not in ("KUBECONFIG", "KUBERNETES_SERVICE_HOST")}
    env["HOME"] = str(tmp_path)

    def serve(**extra):
        done = subprocess.run([sys.executable, "-m", "extender", "serve", "--port", str(free_port())],
                              env={**env, **extra}, capture_output=True, text=True, timeout=60)
        assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
        return done.stderr

    err = serve()
    assert err.startswith("cgpu-extender: no cluster to serve")
    assert "--demo" in err and "--kubeconfig" in err and str(tmp_path / ".kube" / "config") in err
    err = serve(KUBECONFIG=str(tmp_path / "elsewhere"), KUBERNETES_SERVICE_HOST="10.0.0.1")
    assert f"$KUBECONFIG={tmp_path / 'elsewhere'}" in err and "service account" in err


def test_version_is_the_package_version(capsys):
    import configparser

    setup = configparser.ConfigParser()
    setup.read(Path(__file__).resolve().parents[3] / "setup.cfg")
    with pytest.raises(SystemExit) as exit_:
        main(["--version"])
    assert exit_.value.code == 0
    assert capsys.readouterr().out == f"cgpu-extender {setup['metadata']['version']}\n"


def test_a_port_in_use_a_fifo_and_yaml_aliases_are_one_line_and_exit_2(tmp_path):
    """Each in a process of its own, bounded: a server that started instead, or hung, fails the test."""
    from test_clusterfile import BILLION_LAUGHS

    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    fifo = tmp_path / "cluster.fifo"
    os.mkfifo(fifo)
    laughs = tmp_path / "laughs.yaml"
    laughs.write_text(BILLION_LAUGHS)
    cases = [(["--demo", "--port", str(taken.getsockname()[1])], "cannot listen on 127.0.0.1:"),
             (["--cluster", str(fifo)], "not a regular file"),
             (["--cluster", str(laughs)], "YAML aliases")]
    try:
        for args, words in cases:
            done = subprocess.run([sys.executable, "-m", "extender", "serve", *args], capture_output=True,
                                  text=True, timeout=60)
            assert done.returncode == 2 and words in done.stderr, (args, done.stderr)
            assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
    finally:
        taken.close()
