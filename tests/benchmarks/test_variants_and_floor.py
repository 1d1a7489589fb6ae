import numpy as np
import pytest

import small_trace
from benchmarks.trace import read_pods
from benchmarks.variants import kind_mask, reweigh


@pytest.fixture(scope="module")
def pods(tmp_path_factory):
    return read_pods(small_trace.write(str(tmp_path_factory.mktemp("v")))[1])


@pytest.mark.parametrize("kind,fraction", [("multi", 0.5), ("cpu", 0.4)])
def test_the_kind_reaches_its_fraction(pods, kind, fraction):
    out = reweigh(pods, kind, fraction, seed=1)
    mine = kind_mask(out, kind)
    size = np.ones(len(out)) if kind == "cpu" else out.demand
    share = size[mine].sum() / size.sum()
    largest = size[mine].max() / size.sum()
    assert abs(share - fraction) <= largest + 1e-9
    assert (kind_mask(out, kind) == mine).all() and len(out) > 0


def test_other_pods_are_kept_and_the_draws_are_seeded(pods):
    a, b = reweigh(pods, "multi", 0.6, seed=3), reweigh(pods, "multi", 0.6, seed=3)
    assert a.name == b.name
    others = [n for n, m in zip(pods.name, kind_mask(pods, "multi")) if not m]
    assert sorted(n for n, m in zip(a.name, kind_mask(a, "multi")) if not m) == sorted(others)


def share_by_mean_demand(base, out):
    """Sharing pods' part of ``out``'s GPU demand, counted with ``base``'s mean demand per kind (as the draw is)."""
    share, other = kind_mask(base, "share"), (base.demand > 0) & ~kind_mask(base, "share")
    sharing = kind_mask(out, "share").sum() * base.demand[share].mean()
    return sharing / (sharing + ((out.demand > 0) & ~kind_mask(out, "share")).sum() * base.demand[other].mean())


@pytest.mark.parametrize("fraction", [0.1, 0.4, 0.8])
def test_share_variants_keep_every_pod_count_but_the_mix_of_gpu_pods(pods, fraction):
    out = reweigh(pods, "share", fraction, seed=4)
    assert len(out) == len(pods)
    assert (out.demand == 0).sum() == (pods.demand == 0).sum()
    gpu_pods = (pods.demand > 0).sum()
    assert abs(share_by_mean_demand(pods, out) - fraction) <= 1 / gpu_pods * 2
    assert reweigh(pods, "share", fraction, seed=4).name == out.name


def test_share_one_makes_every_gpu_pod_a_sharing_pod(pods):
    out = reweigh(pods, "share", 1.0, seed=2)
    assert len(out) == len(pods)
    assert (kind_mask(out, "share") == (out.demand > 0)).all()


def test_multi_fraction_one_keeps_only_the_kind_and_cpu_pods_at_the_base_demand(pods):
    kind = "multi"
    out = reweigh(pods, kind, 1.0, seed=2)
    gpu = out.demand > 0
    assert (kind_mask(out, kind) | ~gpu).all()
    assert (~gpu).sum() == (pods.demand == 0).sum()
    largest = out.demand[gpu].max()
    assert pods.demand.sum() <= out.demand.sum() < pods.demand.sum() + largest


def test_bad_arguments(pods):
    with pytest.raises(ValueError):
        reweigh(pods, "cpu", 1.0)
    with pytest.raises(ValueError):
        reweigh(pods, "share", 1.5)
    with pytest.raises(ValueError):
        kind_mask(pods, "gpu")


def test_best_fit_decreasing_waste_hand_cases():
    from benchmarks.floor import best_fit_decreasing_waste
    assert best_fit_decreasing_waste([810, 190]) == 0
    assert best_fit_decreasing_waste([470, 470, 810]) == 60 + 190
    assert best_fit_decreasing_waste([300, 700, 650, 350, 100]) == 0 + 0 + 900
    assert best_fit_decreasing_waste([]) == 0
