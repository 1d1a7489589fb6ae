from benchmarks.matrix import FGD_MEASURE, ablation_configs, standard_configs
from policy.scoring import make_strategy


def test_shipped_and_kube_settings_run_only_on_the_traces_named():
    configs = standard_configs(traces=("default", "cpu050"), policies=("binpack",), mappings=("milli",),
                               kube_traces=("default",), shipped_traces=("cpu050", "elsewhere"))
    settings = {(c["trace"], c["setting"]) for c in configs}
    assert settings == {("default", "paper"), ("cpu050", "paper"), ("default", "kube"), ("cpu050", "shipped")}


def test_ablations_per_trace_and_by_label():
    labels = {c["label"] for c in ablation_configs(("a",))}
    assert {"fragmentation[no-starved]", "fragmentation[fgd]", "fragmentation[no-stranded]"} <= labels
    chosen = ablation_configs(("a", "b"), ["fragmentation[fgd]"])
    assert [(c["trace"], c["options"]) for c in chosen] == [("a", FGD_MEASURE), ("b", FGD_MEASURE)]


def test_fgd_measure_is_fgd_count_without_our_two_terms():
    strategy = make_strategy("fragmentation", **FGD_MEASURE)
    assert (strategy.mix.weighting, strategy.stranded, strategy.starved) == ("pods", False, False)
