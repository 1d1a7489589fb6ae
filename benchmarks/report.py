"""Tables and the figure of ``benchmarks/RESULTS.md`` from a matrix summary.

``python -m benchmarks.report [--summary benchmarks/out/summary.json] [--out benchmarks/results]``
writes ``tables.md`` (every table of RESULTS.md), ``summary.json`` (the
summary without per-run data, small enough to keep in git) and
``unallocated-default.png`` (unallocated GPU % against arrived workload on the
default trace, like Fig. 9a of the FGD paper; needs the ``bench`` extra).
"""

from __future__ import annotations

import argparse
import json
import os
import sys

from benchmarks.matrix import POLICIES
from benchmarks.summary import aggregate
from benchmarks.trace import TRACES

# Unallocated GPU % at 100 % arrived, 10 seeds, from the FGD authors' runs (traces README).
PUBLISHED = {
    "Random": dict(default=13.70, cpu050=10.98, gpushare40=15.14, multigpu20=13.08, gpuspec10=13.74),
    "DotProd": dict(default=9.38, cpu050=6.97, gpushare40=10.70, multigpu20=8.15, gpuspec10=9.83),
    "Clustering": dict(default=8.35, cpu050=6.48, gpushare40=10.24, multigpu20=6.66, gpuspec10=8.04),
    "Packing": dict(default=8.22, cpu050=6.54, gpushare40=10.23, multigpu20=6.50, gpuspec10=7.76),
    "BestFit": dict(default=7.14, cpu050=6.44, gpushare40=8.56, multigpu20=6.27, gpuspec10=6.90),
    "FGD": dict(default=4.77, cpu050=5.00, gpushare40=6.04, multigpu20=4.47, gpuspec10=5.34),
}
# FGD's published figure for the paper's other mixes (its variant files in alibaba/clusterdata; our
# benchmarks.variants builds them the same way: gpushareXX = shareXX, multigpuXX = multiXX, cpu250 = cpu25).
PUBLISHED_FGD_MIXES = dict(share80=10.92, share100=13.36, multi30=3.64, multi40=3.09, multi50=2.91, cpu25=6.80)
MIX_COLUMNS = (("binpack", "paper"), ("bestfit", "paper"), ("fragmentation", "paper"),
               ("fragmentation[no-starved]", "paper"), ("fragmentation[fgd]", "paper"),
               ("binpack", "shipped"), ("bestfit", "shipped"), ("fragmentation", "shipped"))
COLORS = {"random": "tab:blue", "spread": "tab:orange", "ack": "tab:olive", "binpack": "tab:green",
          "bestfit": "tab:purple", "fragmentation": "black"}
SHAPES = ("1x1000", "1x810", "1x650", "1x470", "1x460", "1x320", "1x230", "2x1000", "4x1000", "8x1000")


def _index(summary: list) -> dict:
    return {(s["trace"], s["mapping"], s["setting"], s["label"]): s for s in summary}


def headline(summary: list, mapping: str, setting: str, labels=POLICIES, published: bool = True) -> str:
    index = _index(summary)
    traces = [t for t in TRACES if any(k[0] == t and k[1:3] == (mapping, setting) for k in index)]
    lines = ["| policy | " + " | ".join(traces) + " |", "|---|" + "---|" * len(traces)]
    for label in labels:
        cells = []
        for t in traces:
            s = index.get((t, mapping, setting, label))
            cells.append(f"{s['unallocated_mean']:.2f} ± {s['unallocated_sd']:.2f}" if s else "—")
        if any(c != "—" for c in cells):
            lines.append(f"| {label} | " + " | ".join(cells) + " |")
    if published:
        for name, row in PUBLISHED.items():
            lines.append(f"| *{name} (published)* | " + " | ".join(f"*{row[t]:.2f}*" for t in traces) + " |")
    return "\n".join(lines)


def failures(summary: list, trace="default", mapping="milli", setting="paper", labels=POLICIES) -> str:
    index = _index(summary)
    lines = ["| policy | " + " | ".join(SHAPES) + " | all |", "|---|" + "---|" * (len(SHAPES) + 1)]
    for label in labels:
        s = index.get((trace, mapping, setting, label))
        if s:
            by = s["failed_by_shape_mean"]
            lines.append(f"| {label} | " + " | ".join(f"{by.get(k, 0):.1f}" for k in SHAPES)
                         + f" | {sum(by.values()):.1f} |")
    return "\n".join(lines)


def timing(summary: list, trace="default", labels=POLICIES) -> str:
    index = _index(summary)
    lines = ["| policy | mapping | median µs | mean µs | p99 µs |", "|---|---|---|---|---|"]
    for mapping in ("milli", "cgpu"):
        for label in labels:
            s = index.get((trace, mapping, "paper", label))
            if s:
                lines.append(f"| {label} | {mapping} | {s['decision_us_median']:.0f} | {s['decision_us_mean']:.0f} "
                             f"| {s['decision_us_p99']:.0f} |")
    return "\n".join(lines)


def ablations(summary: list) -> str:
    lines = ["| variant | default, milli, paper |", "|---|---|"]
    for s in summary:
        if s["label"].startswith("fragmentation") and (s["trace"], s["mapping"], s["setting"]) == (
                "default", "milli", "paper"):
            lines.append(f"| {s['label']} | {s['unallocated_mean']:.2f} ± {s['unallocated_sd']:.2f} |")
    return "\n".join(lines) if len(lines) > 2 else ""


def mixes(summary: list, mapping: str = "milli") -> str:
    """Every trace of the summary (rows) × the policies and ablations in the paper and shipped settings."""
    index = _index(summary)
    traces = list(dict.fromkeys(s["trace"] for s in summary if s["mapping"] == mapping))
    columns = [c for c in MIX_COLUMNS if any((t, mapping, c[1], c[0]) in index for t in traces)]
    lines = ["| trace | " + " | ".join(f"{label} ({setting})" for label, setting in columns) + " | *FGD (published)* |",
             "|---|" + "---|" * (len(columns) + 1)]
    for t in traces:
        cells = []
        for label, setting in columns:
            s = index.get((t, mapping, setting, label))
            cells.append(f"{s['unallocated_mean']:.2f} ± {s['unallocated_sd']:.2f} ({len(s['seeds'])})" if s else "—")
        fgd = PUBLISHED["FGD"].get(t, PUBLISHED_FGD_MIXES.get(t))
        cells.append(f"*{fgd:.2f}*" if fgd is not None else "—")
        lines.append(f"| {t} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def tables(summary: list) -> str:
    parts = ["### Every mix, paper and shipped settings (mean ± sd (seeds))\n\n" + mixes(summary)]
    for mapping in ("milli", "cgpu"):
        parts.append(f"### Unallocated GPU % at 100 % arrived — {mapping} mapping, paper setting\n\n"
                     + headline(summary, mapping, "paper"))
    for mapping in ("milli", "cgpu"):
        table = headline(summary, mapping, "kube", published=False)
        if table.count("\n") > 1:
            parts.append(f"### Unallocated GPU % at 100 % arrived — {mapping} mapping, kube setting\n\n" + table)
    parts.append("### Failed pods per seed by shape (GPUs x milli), default trace, milli, paper\n\n"
                 + failures(summary))
    parts.append("### Decision time per pod (ledger path), default trace, paper setting\n\n" + timing(summary))
    extra = ablations(summary)
    if extra:
        parts.append("### Fragmentation ablations\n\n" + extra)
    consistent = all(s["consistent"] for s in summary)
    parts.append(f"Ledger CPU/memory counts equal kube-scheduler's at the end of every run: {consistent}.")
    return "\n\n".join(parts) + "\n"


def plot(summary: list, path: str, trace: str = "default") -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    index = _index(summary)
    panels = [(m, s) for m, s in (("milli", "paper"), ("cgpu", "paper"), ("milli", "kube"))
              if any(k[0] == trace and k[1:3] == (m, s) for k in index)]
    fig, axes = plt.subplots(1, len(panels), figsize=(5.2 * len(panels), 4.2), sharey=True, squeeze=False)
    for ax, (mapping, setting) in zip(axes[0], panels):
        for label in POLICIES:
            s = index.get((trace, mapping, setting, label))
            if not s:
                continue
            points = [(x, y) for x, y in enumerate(s["curve"]) if y is not None]
            ax.plot([p[0] for p in points], [p[1] for p in points], label=label, color=COLORS.get(label),
                    linewidth=2.2 if label == "fragmentation" else 1.2,
                    linestyle="--" if label == "ack" else "-")
        ax.plot([0, 100], [100, 0], color="grey", linewidth=0.6, linestyle=":")
        ax.set_xlim(60, 130)
        ax.set_ylim(0, 40)
        ax.axvline(100, color="grey", linewidth=0.6)
        ax.set_title(f"{trace} trace, {mapping} mapping, {setting} setting", fontsize=9)
        ax.set_xlabel("arrived workload (% of GPU capacity)")
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel("unallocated GPU (%)")
    axes[0][0].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main(argv=None) -> int:
    here = os.path.dirname(__file__)
    parser = argparse.ArgumentParser(prog="python -m benchmarks.report", description=__doc__.splitlines()[0])
    parser.add_argument("--summary", nargs="*", default=[os.path.join(here, "out", "summary.json")],
                        help="matrix summaries, merged (a later one's cell replaces an earlier one's)")
    parser.add_argument("--runs", nargs="+", default=None, metavar="OUT",
                        help="also every run record under OUT/runs (matrix calls sharing an --out), merged last")
    parser.add_argument("--out", default=os.path.join(here, "results"))
    args = parser.parse_args(argv)
    summary = []
    for path in args.summary:
        with open(path) as f:
            summary += json.load(f)
    if args.runs:
        records = []
        for out in args.runs:
            for name in sorted(os.listdir(os.path.join(out, "runs"))):
                with open(os.path.join(out, "runs", name)) as f:
                    records.append(json.load(f))
        summary += aggregate(records)
    summary = list(_index(summary).values())  # a cell from a later source replaces an earlier one
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "tables.md"), "w") as f:
        f.write(tables(summary))
    with open(os.path.join(args.out, "summary.json"), "w") as f:
        json.dump([{k: v for k, v in s.items() if k != "curve" or s["trace"] == "default"} for s in summary], f,
                  indent=1)
    plot(summary, os.path.join(args.out, "unallocated-default.png"))
    print(f"wrote {args.out}/tables.md, summary.json, unallocated-default.png")
    return 0


if __name__ == "__main__":
    sys.exit(main())
