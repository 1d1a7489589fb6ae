"""`cgpu-simulate` from a fresh clone: the shipped synthetic sample runs, the openb trace is pointed to."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import small_trace
from benchmarks import sample_trace
from benchmarks.simulate import main
from benchmarks.trace import read_nodes, read_pods

ROOT = Path(__file__).resolve().parents[2]


def test_the_shipped_files_are_what_the_committed_script_writes(tmp_path):
    written = sample_trace.write(str(tmp_path))
    for path, shipped in zip(written, (sample_trace.NODES_PATH, sample_trace.PODS_PATH)):
        assert Path(path).read_bytes() == Path(shipped).read_bytes(), f"run python -m benchmarks.sample_trace"


def test_the_sample_is_small_in_openb_columns_and_mixes_every_kind_of_pod():
    with open(sample_trace.NODES_PATH) as f:
        assert f.readline().strip() == small_trace.NODE_HEADER  # openb's columns, as the replay tests write them
    with open(sample_trace.PODS_PATH) as f:
        assert f.readline().strip() == small_trace.POD_HEADER
    nodes, pods = read_nodes(sample_trace.NODES_PATH), read_pods(sample_trace.PODS_PATH)
    assert 5 <= len(nodes) <= 20 and 200 <= len(pods) <= 500
    kinds = {"cpu": pods.num_gpu == 0, "share": (pods.num_gpu == 1) & (pods.gpu_milli < 1000),
             "whole": (pods.num_gpu == 1) & (pods.gpu_milli == 1000), "multi": pods.num_gpu > 1,
             "models": pods.gpu_spec != ""}
    assert all(mask.sum() >= 10 for mask in kinds.values()), {k: int(m.sum()) for k, m in kinds.items()}
    assert pods.demand.sum() > 1.3 * nodes.gpu_capacity  # enough to reach the protocol's 130 % of capacity


def test_simulate_runs_on_the_sample_by_default(capsys):
    assert main(["--seeds", "2", "--policy", "binpack"]) == 0
    out = capsys.readouterr().out
    assert "binpack on sample (milli, paper): unallocated GPU at 100 % arrived" in out


def test_a_lone_pod_list_takes_the_node_list_beside_it(tmp_path, capsys):
    _, pods_path = small_trace.write(str(tmp_path))
    assert main(["--pods", pods_path, "--seeds", "1", "--policy", "binpack"]) == 0
    assert "binpack on synthetic" in capsys.readouterr().out
    assert main(["--pods", sample_trace.PODS_PATH, "--seeds", "1", "--policy", "binpack"]) == 0
    assert "binpack on sample" in capsys.readouterr().out


def test_an_openb_trace_that_is_not_there_is_one_line_saying_where_it_comes_from(tmp_path, capsys):
    assert main(["--trace", "gpushare40", "--openb-dir", str(tmp_path), "--seeds", "1"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("cgpu-simulate: ")
    for needed in (str(tmp_path / "openb_pod_list_gpushare40.csv"), "https://github.com/alibaba/clusterdata",
                   "cluster-trace-gpu-v2023/csv", "Weng et al.", "Beware of Fragmentation", "USENIX ATC 2023",
                   "--openb-dir"):
        assert needed in err, needed
    assert main(["--pods", str(tmp_path / "openb_pod_list_default.csv"), "--seeds", "1"]) == 2
    assert "--openb-dir" in capsys.readouterr().err


def fresh_clone(target: Path) -> Path:
    """The repository's packages copied where no ../shared/traces is beside them."""
    for package in ("policy", "extender", "benchmarks"):
        shutil.copytree(ROOT / package, target / package,
                        ignore=shutil.ignore_patterns("__pycache__", "out", "results", "*.png"))
    return target


def test_from_a_fresh_clone_simulate_runs_and_the_openb_trace_is_pointed_to(tmp_path):
    clone = fresh_clone(tmp_path / "clone")
    assert not (clone.parent / "shared").exists() and not (clone.parent.parent / "shared").exists()
    env = {**os.environ, "PYTHONPATH": str(clone)}

    def simulate(*args):
        return subprocess.run([sys.executable, "-m", "benchmarks.simulate", *args], cwd=clone, env=env,
                              capture_output=True, text=True, timeout=300)

    done = simulate("--seeds", "1", "--policy", "binpack")
    assert done.returncode == 0, done.stderr
    assert "binpack on sample (milli, paper)" in done.stdout
    done = simulate("--trace", "default", "--seeds", "1")
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
    assert "https://github.com/alibaba/clusterdata" in done.stderr and "--openb-dir" in done.stderr
    assert str(clone) in subprocess.run([sys.executable, "-c", "import extender; print(extender.__file__)"],
                                        cwd=clone, env=env, capture_output=True, text=True).stdout
