"""`cgpu-extender serve` for real: our HTTP server, on loopback, the demo cluster."""

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request

import pytest

from builders import scheduler_pod
from extender.cli import main


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
