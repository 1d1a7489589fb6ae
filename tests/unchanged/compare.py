"""What the extender answers, recorded once and compared later: the proof that a move changed no behaviour.

Run from the repository root, in the installed environment (``./dev test`` makes it)::

    .venv/bin/python tests/unchanged/compare.py            # compare with the recorded transcripts
    .venv/bin/python tests/unchanged/compare.py --record   # record them anew (only when a change is meant)

It talks to the extender only through its command lines — ``python -m extender serve``
on a free port, ``cgpu-extender plan/defrag/inspect`` and the trace replay — never
through a module path, so the very same script runs before and after the code moves:

* ``replies-demo.txt``, ``replies-file.txt``: a fixed, varied sequence of requests
  (filter, prioritize, bind, preempt, bad bodies, inspect, plan, defrag, metrics, the
  GPU map, probes) against ``serve --demo`` and ``serve --cluster cluster.yaml``: each
  reply's status, content type and body, byte for byte, but for the bind time a pod's
  annotations carry (the wall clock), the metrics' durations and ages, and the GPU
  map's page (its SHA-256);
* ``commands.txt``: ``plan`` and ``defrag`` on ``cluster.yaml`` (text and JSON) and
  ``inspect`` (summary and details) against the served cluster file;
* ``simulate.txt``: the replay of the shipped sample trace with two scorings and one
  seed: the figures (unallocated GPU, failed pods by shape: ``--json``, decision
  times left out), the text printed but its timings, and the one-line message when
  the openb trace is missing (the program's name left out: the command moved).

Exit 0 when everything matches; else the first differing lines of each transcript.
"""

from __future__ import annotations

import argparse
import contextlib
import difflib
import hashlib
import importlib.util
import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
CLUSTER = HERE / "cluster.yaml"
PREFIX = "/cgpu-scheduler"
BIN = Path(sys.executable).parent

DEMO_NODES = ["gpu-core-a", "gpu-core-b", "gpu-core-full", "gpu-cgpu-a", "gpu-share-a", "gpu-whole-a"]
FILE_NODES = ["n-core-1", "n-core-2", "n-cgpu-1", "n-share-1", "n-whole-1"]
MEM, CORE, COUNT = "aliyun.com/gpu-mem", "aliyun.com/gpu-core.percentage", "aliyun.com/gpu-count"


# -- the requests ----------------------------------------------------------------------------------
def pod(name: str, limits: dict, labels: dict | None = None, priority: int | None = None,
        tolerations: list | None = None, extra_containers: int = 0) -> dict:
    containers = [{"name": "main", "image": "registry.example/cuda:12", "resources": {"limits": limits,
                                                                                     "requests": dict(limits)}}]
    containers += [{"name": f"side-{i}", "image": "busybox", "resources": {"requests": {"cpu": "100m"}}}
                   for i in range(extra_containers)]
    spec = {"containers": containers, "schedulerName": "default-scheduler"}
    if priority is not None:
        spec["priority"] = priority
    if tolerations:
        spec["tolerations"] = tolerations
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}", "resourceVersion": "7",
                         "creationTimestamp": "2026-03-01T00:00:00Z", "labels": labels or {"app": name},
                         "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": name,
                                              "uid": f"rs-{name}", "controller": True}]},
            "spec": spec, "status": {"phase": "Pending"}}


def args(p: dict, names: list) -> dict:
    return {"Pod": p, "Nodes": None, "NodeNames": names}


def binding(p: dict, node: str) -> dict:
    meta = p["metadata"]
    return {"PodName": meta["name"], "PodNamespace": meta["namespace"], "PodUID": meta["uid"], "Node": node}


def victims(by_node: dict) -> dict:
    return {"NodeNameToMetaVictims": {node: {"Pods": [{"UID": u} for u in uids], "NumPDBViolations": 0}
                                      for node, uids in by_node.items()}}


def demo_requests() -> list:
    """``(label, method, path, body or None, content type)`` against ``serve --demo``."""
    small = pod("small", {MEM: "2", CORE: "30", "cpu": "1", "memory": "1Gi"}, extra_containers=1)
    memory = pod("memory", {MEM: "6"})
    pair = pod("pair", {MEM: "8", COUNT: "2"})
    whole = pod("whole", {MEM: "15", CORE: "100"})
    huge = pod("huge", {MEM: "64"})
    invalid = pod("invalid", {MEM: "two"})
    cpu = pod("cpu-only", {"cpu": "2", "memory": "2Gi"})
    urgent = pod("urgent", {MEM: "14", CORE: "80"}, priority=1000)
    steps = [("healthz", "GET", "/healthz", None, None), ("readyz", "GET", "/readyz", None, None),
             ("inspect before", "GET", "/inspect", None, None),
             ("inspect compact before", "GET", "/inspect?compact=1", None, None)]
    for p in (small, memory, pair, whole, huge, invalid, cpu):
        name = p["metadata"]["name"]
        steps.append((f"filter {name}", "POST", "/filter", args(p, DEMO_NODES), "application/json"))
        steps.append((f"prioritize {name}", "POST", "/prioritize", args(p, DEMO_NODES), "application/json"))
    steps += [
        ("filter unknown node", "POST", "/filter", args(small, ["gpu-core-a", "no-such-node"]), "application/json"),
        ("filter subset", "POST", "/filter", args(memory, ["gpu-cgpu-a", "gpu-share-a"]), "application/json"),
        ("bind small", "POST", "/bind", binding(small, "gpu-core-a"), "application/json"),
        ("bind small again", "POST", "/bind", binding(small, "gpu-core-a"), "application/json"),
        ("bind small elsewhere", "POST", "/bind", binding(small, "gpu-core-b"), "application/json"),
        ("bind memory", "POST", "/bind", binding(memory, "gpu-cgpu-a"), "application/json"),
        ("bind pair", "POST", "/bind", binding(pair, "gpu-core-b"), "application/json"),
        ("bind huge (does not fit)", "POST", "/bind", binding(huge, "gpu-core-a"), "application/json"),
        ("bind invalid", "POST", "/bind", binding(invalid, "gpu-core-a"), "application/json"),
        ("bind unknown pod", "POST", "/bind", binding(pod("never-filtered", {MEM: "1"}), "gpu-core-a"),
         "application/json"),
        ("bind cpu-only", "POST", "/bind", binding(cpu, "gpu-core-b"), "application/json"),
        ("filter after binds", "POST", "/filter", args(whole, DEMO_NODES), "application/json"),
        ("prioritize after binds", "POST", "/prioritize", args(small, DEMO_NODES), "application/json"),
        ("preempt urgent", "POST", "/preempt", {"Pod": urgent, **victims({
            "gpu-core-a": ["uid-small"], "gpu-core-full": [], "gpu-core-b": ["uid-pair"]})}, "application/json"),
        ("preempt small", "POST", "/preempt", {"Pod": small, **victims({"gpu-core-a": []})}, "application/json"),
        ("preempt invalid", "POST", "/preempt", {"Pod": invalid, **victims({"gpu-core-a": []})}, "application/json"),
        ("preempt bad body", "POST", "/preempt", {"Pod": small, "NodeNameToMetaVictims": []}, "application/json"),
        ("filter bad json", "POST", "/filter", b"{not json", "application/json"),
        ("filter not ExtenderArgs", "POST", "/filter", [1, 2], "application/json"),
        ("filter names not a list", "POST", "/filter", {"Pod": small, "NodeNames": "gpu-core-a"}, "application/json"),
        ("prioritize bad body", "POST", "/prioritize", b"[]", "application/json"),
        ("bind bad body", "POST", "/bind", {"PodName": 3}, "application/json"),
        ("filter wrong content type", "POST", "/filter", args(small, DEMO_NODES), "text/plain"),
        ("filter by GET", "GET", "/filter", None, None),
        ("inspect after", "GET", "/inspect", None, None),
        ("inspect compact after", "GET", "/inspect?compact=1", None, None),
        ("inspect compact bad", "GET", "/inspect?compact=2", None, None),
        ("plan", "GET", "/plan", None, None),
        ("defrag", "GET", "/defrag", None, None),
        ("defrag maxMoves=2", "GET", "/defrag?maxMoves=2", None, None),
        ("defrag maxMoves bad", "GET", "/defrag?maxMoves=x", None, None),
        ("metrics", "GET", "/metrics", None, None),
        ("ui", "GET", "/ui", None, None),
        ("unknown route", "GET", "/nothing", None, None),
    ]
    return steps


def file_requests() -> list:
    """The same kinds of request against ``serve --cluster cluster.yaml``."""
    small = pod("wait-small", {MEM: "4", CORE: "30"})
    small["metadata"]["uid"] = "uid-wait-small"
    tolerant = pod("tolerant", {MEM: "10"}, tolerations=[{"key": "scaler", "operator": "Exists"}])
    urgent = pod("urgent", {MEM: "12", CORE: "60"}, priority=500)
    steps = [("readyz", "GET", "/readyz", None, None), ("inspect before", "GET", "/inspect", None, None),
             ("plan before", "GET", "/plan", None, None), ("defrag before", "GET", "/defrag", None, None),
             ("defrag maxMoves=0", "GET", "/defrag?maxMoves=0", None, None)]
    for p in (small, tolerant, urgent):
        name = p["metadata"]["name"]
        steps.append((f"filter {name}", "POST", "/filter", args(p, FILE_NODES), "application/json"))
        steps.append((f"prioritize {name}", "POST", "/prioritize", args(p, FILE_NODES), "application/json"))
    steps += [
        ("preempt urgent", "POST", "/preempt", {"Pod": urgent, **victims({
            "n-core-1": [], "n-core-2": ["uid-move-g"], "n-cgpu-1": ["uid-batch-c"]})}, "application/json"),
        ("bind wait-small", "POST", "/bind", binding(small, "n-core-1"), "application/json"),
        ("bind tolerant", "POST", "/bind", binding(tolerant, "n-cgpu-1"), "application/json"),
        ("bind urgent (no room)", "POST", "/bind", binding(urgent, "n-core-2"), "application/json"),
        ("bind unknown node", "POST", "/bind", binding(urgent, "n-gone"), "application/json"),
        ("inspect after", "GET", "/inspect", None, None),
        ("inspect compact after", "GET", "/inspect?compact=1", None, None),
        ("plan after", "GET", "/plan", None, None),
        ("defrag after", "GET", "/defrag", None, None),
        ("metrics", "GET", "/metrics", None, None),
    ]
    return steps


# -- serving and reading ------------------------------------------------------------------------
def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def serving(*options: str):
    port = free_port()
    process = subprocess.Popen([sys.executable, "-m", "extender", "serve", "--port", str(port), *options],
                               cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}{PREFIX}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(f"{url}/readyz", timeout=2):
                    break
            except (urllib.error.URLError, ConnectionError, OSError):
                if process.poll() is not None or time.monotonic() > deadline:
                    raise SystemExit(f"serve {' '.join(options)} did not start")
                time.sleep(0.2)
        yield url
    finally:
        process.terminate()
        process.wait(30)


def request(url: str, method: str, path: str, body, content_type) -> tuple:
    data = None if body is None else body if isinstance(body, bytes) else json.dumps(body).encode()
    req = urllib.request.Request(url + path, data=data, method=method)
    if content_type:
        req.add_header("Content-Type", content_type)
    try:
        with urllib.request.urlopen(req, timeout=30) as reply:
            return reply.status, reply.headers.get("Content-Type"), reply.read()
    except urllib.error.HTTPError as error:
        return error.code, error.headers.get("Content-Type"), error.read()


ASSUME = re.compile(rb'(assume-time|ASSUME_TIME)(\\?"\s*:\s*\\?")(\d+)')
TIMED = re.compile(r"_duration_seconds|_cpu_seconds|_age_seconds|_created$|^process_|^python_")


def shown(label: str, status: int, content_type, body: bytes, path: str) -> str:
    if path.endswith("/ui"):
        text = f"{len(body)} bytes, sha256 {hashlib.sha256(body).hexdigest()}"
    elif path.endswith("/metrics"):
        text = "\n".join(line for line in body.decode().splitlines()
                         if not TIMED.search(line.split(" ")[2] if line.startswith("#") and len(line.split(" ")) > 2
                                             else line.split("{")[0].split(" ")[0]))
    else:
        text = ASSUME.sub(lambda m: m.group(1) + m.group(2) + b"<time>", body).decode()
    return f"## {label}\n{status} {content_type}\n{text}\n"


def replies(options: tuple, steps: list) -> str:
    out = []
    with serving(*options) as url:
        for label, method, path, body, content_type in steps:
            out.append(shown(label, *request(url, method, path, body, content_type), path))
    return "\n".join(out)


def command(argv: list, name: str = "cgpu-extender", url: str | None = None) -> str:
    done = subprocess.run([str(BIN / name), *argv], cwd=ROOT, capture_output=True, text=True, timeout=300)
    shown_argv = " ".join("URL" if a == url else a for a in argv)
    return f"$ {name} {shown_argv}\nexit {done.returncode}\n{done.stdout}{done.stderr}"


def commands() -> str:
    cluster = str(CLUSTER.relative_to(ROOT))
    out = [command(["plan", "--cluster", cluster]), command(["plan", "--cluster", cluster, "--json"]),
           command(["defrag", "--cluster", cluster]), command(["defrag", "--cluster", cluster, "--json"]),
           command(["defrag", "--cluster", cluster, "--max-moves", "0"])]
    with serving("--cluster", cluster) as url:
        out += [command(["inspect", "--endpoint", url], url=url), command(["inspect", "-d", "--endpoint", url], url=url),
                command(["inspect", "--endpoint", url, "n-core-1"], url=url),
                command(["inspect", "--endpoint", url, "no-such-node"], url=url)]
    return "\n".join(ASSUME.sub(lambda m: m.group(1) + m.group(2) + b"<time>", o.encode()).decode() for o in out)


# -- the replay -----------------------------------------------------------------------------------
def simulate_command() -> list:
    """The replay's command line: ``cgpu-simulate`` where it is a benchmarks entry point, else
    ``cgpu-extender simulate`` (before the move)."""
    if importlib.util.find_spec("benchmarks.simulate") is not None:
        return [sys.executable, "-m", "benchmarks.simulate"]
    return [sys.executable, "-m", "extender", "simulate"]


TIMINGS = re.compile(r", decision median \d+ us, p99 \d+ us|^decision time per pod: .*$", re.M)


def simulate() -> str:
    out = []
    with tempfile.TemporaryDirectory() as folder:
        for options in (["--policy", "fragmentation", "--seeds", "1"],
                        ["--policy", "binpack", "--mapping", "cgpu", "--seeds", "1"],
                        ["--policy", "fragmentation", "--setting", "kube", "--seeds", "1"]):
            path = os.path.join(folder, "result.json")
            done = subprocess.run([*simulate_command(), *options, "--json", path], cwd=ROOT, capture_output=True,
                                  text=True, timeout=600)
            with open(path) as f:
                result = json.load(f)
            figures = {k: v for k, v in result.items() if not k.startswith("decision_us") and k not in ("nodes", "pods")}
            figures["runs"] = [{k: v for k, v in run.items() if k != "decision_us"} for run in result["runs"]]
            out.append(f"$ simulate {' '.join(options)}\nexit {done.returncode}\n{TIMINGS.sub('', done.stdout)}"
                       f"{json.dumps(figures, indent=1, sort_keys=True)}\n")
        done = subprocess.run([*simulate_command(), "--trace", "default", "--openb-dir", "/nonexistent/openb"],
                              cwd=ROOT, capture_output=True, text=True, timeout=60)
        message = re.sub(r"^[\w-]+: ", "<program>: ", done.stderr)
        out.append(f"$ simulate --trace default --openb-dir /nonexistent/openb\nexit {done.returncode}\n"
                   f"{done.stdout}{message}")
    return "\n".join(out)


TRANSCRIPTS = {
    "replies-demo.txt": lambda: replies(("--demo",), demo_requests()),
    "replies-file.txt": lambda: replies(("--cluster", str(CLUSTER)), file_requests()),
    "commands.txt": commands,
    "simulate.txt": simulate,
}


def main(argv: list | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--record", action="store_true", help="write the transcripts instead of comparing")
    options = parser.parse_args(argv)
    differ = 0
    for name, make in TRANSCRIPTS.items():
        text = make()
        path = HERE / name
        if options.record:
            path.write_text(text)
            print(f"recorded {path.relative_to(ROOT)} ({len(text.splitlines())} lines)")
            continue
        recorded = path.read_text()
        if text == recorded:
            print(f"same: {path.relative_to(ROOT)} ({len(text.splitlines())} lines)")
            continue
        differ += 1
        print(f"DIFFERENT: {path.relative_to(ROOT)}")
        sys.stdout.writelines(list(difflib.unified_diff(recorded.splitlines(True), text.splitlines(True),
                                                        "recorded", "now"))[:80])
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
