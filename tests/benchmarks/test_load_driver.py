"""The load benchmark runs end to end on a tiny cluster (figures are not checked here)."""

import json
import os

import numpy as np

from benchmarks import load
from benchmarks.synthetic import cluster_objects
from extender.cluster.embedded import EmbeddedCluster
from extender.serving.app import build_extender
from extender.serving.config import Config


def test_synthetic_cluster_is_deterministic_and_within_capacity():
    assert cluster_objects(30, seed=3) == cluster_objects(30, seed=3)
    extender = build_extender(Config(), cluster=EmbeddedCluster(cluster_objects(200, seed=3)))
    _, v = extender.ledger.state.view_all()
    assert (v.mem_used <= v.mem_total).all() and (v.core_used <= np.maximum(v.core_total, 0)).all()
    assert len(extender.ledger.allocations()) > 200 and not extender.ledger.unaccounted()


def test_driver_measures_extender_and_floor(tmp_path):
    out = tmp_path / "load.json"
    tables = tmp_path / "load.md"
    cores = os.sched_getaffinity(0)
    assert load.main(["--nodes", "30", "--pods", "12", "--warmup", "3", "--json", str(out),
                      "--markdown", str(tables)]) == 0
    report = json.loads(out.read_text())
    result = report["results"][0]
    for mode in ("names", "objects"):
        extender, floor, echo = result[mode]["extender"], result[mode]["floor"], result[mode]["echo"]
        assert extender["pods"] == floor["pods"] == echo["pods"] > 0
        assert min(run["server_ms"]["filter"]["p50"] for run in (extender, floor, echo)) > 0
    assert result["names"]["rss_mb_at_end"] > 0
    # every server (one per mode) had a core of its own, and the driver got all its cores back
    assert os.sched_getaffinity(0) == cores
    if len(cores) >= 2:
        assert all(result[mode]["pinned"]["server"] != result[mode]["pinned"]["driver"] for mode in ("names", "objects"))
    assert tables.read_text().count("| 30 |") == 14  # per mode: three verbs, a cycle row, three verbs' echo
