from benchmarks.report import mixes


def cell(trace, setting, label, mean, seeds=2):
    return {"trace": trace, "mapping": "milli", "setting": setting, "label": label, "unallocated_mean": mean,
            "unallocated_sd": 0.1, "seeds": list(range(seeds))}


def test_the_mix_table_has_a_row_per_trace_and_a_column_per_policy_and_setting_present():
    summary = [cell("default", "paper", "fragmentation", 4.15, 10), cell("share80", "shipped", "binpack", 12.5),
               cell("share80", "paper", "fragmentation", 10.7), cell("mine", "paper", "fragmentation", 3.0)]
    lines = mixes(summary).splitlines()
    assert lines[0] == "| trace | fragmentation (paper) | binpack (shipped) | *FGD (published)* |"
    assert lines[2] == "| default | 4.15 ± 0.10 (10) | — | *4.77* |"
    assert lines[3] == "| share80 | 10.70 ± 0.10 (2) | 12.50 ± 0.10 (2) | *10.92* |"
    assert lines[4] == "| mine | 3.00 ± 0.10 (2) | — | — |"
