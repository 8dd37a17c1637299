"""The docs' tables of recursive masking and ROAR: ACU / RACU per measure with CIs beside FMM's published row of the same
task, FMM's ordering, beam search on its subsets, the README's summary, GPU cells beside the CPU's, and ROAR /
Recursive ROAR with retraining. A comparison with a paper is made only between the same task (our rt with FMM's SST2:
both binary sentence sentiment); FMM published no bAbI-1 row, so our bAbI-1 tables show their bAbI-2 row as another
task's reference and compute no correlation with it."""
from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import stats

from engine.errors import InvalidInputError
from engine.reports.inputs import replayed_cache

# Our dataset -> FMM Table 1's row of the same task (rt and SST2: movie-review sentences, binary sentiment).
SAME_TASK_FMM = {"rt": "SST2"}
# FMM's row shown beside a dataset they did not publish, labelled as another task, never correlated.
OTHER_TASK_FMM = {"babi-1": "bAbI-2"}
MEASURE_ORDER_NOTE = "rows by RACU, most faithful first"


def _pct(value: float) -> str:
    return "—" if value is None or not np.isfinite(value) else f"{value:.1f}"


def _ci(mean: float, low: float, high: float) -> str:
    if not np.isfinite(low) or not np.isfinite(high):
        return _pct(mean)
    return f"{mean:.1f} ({low:.1f}-{high:.1f})"


@replayed_cache
def _areas(root: Path, run: str, n_examples: int) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(ACU/RACU per measure with CIs, per seed) of one run's recursive-masking cells on n_examples inputs.
    Cached: several tables read the same run (the callers never modify the frames); a cached answer still counts
    the run's files among the reads of the table that asks (engine.reports.inputs)."""
    from engine.faithfulness.summary import area_metrics_per_seed, area_metrics_table
    from engine.results.store import ResultsStore

    data = ResultsStore(root).load(run)
    data = data[data["n_examples"] == n_examples]
    if data.empty:
        raise InvalidInputError(f"run {run!r} in {root} has no cells on {n_examples} examples")
    return area_metrics_table(data), area_metrics_per_seed(data)


def _fmm(row: str) -> pd.DataFrame:
    from engine.results.published import load_published

    table, _ = load_published("fmm_table1")
    return table[table["dataset"] == row].set_index("importance_measure")


def racu_table(run: str, n_examples: int, dataset: str, subset: tuple[str, int, str] | None = None) -> Callable[[Path], str]:
    """Recursive masking without retraining: ACU and RACU per measure (mean over seeds, 95% BCa CI), RACU per seed,
    R-ROAR's clipped RACU, optionally the RACU of a subset (run, n_examples, label), and FMM's published RACU of the
    same task (or of another task, labelled so)."""

    def build(root: Path) -> str:
        table, per_seed = _areas(root, run, n_examples)
        seeds = sorted(int(s) for s in per_seed["seed"].unique())
        sub = None
        if subset is not None:
            sub = _areas(root, subset[0], subset[1])[0].set_index("measure")
        if dataset in SAME_TASK_FMM:
            fmm, fmm_label = _fmm(SAME_TASK_FMM[dataset]), f"FMM {SAME_TASK_FMM[dataset]} RACU % (published)"
        else:
            fmm, fmm_label = _fmm(OTHER_TASK_FMM[dataset]), f"FMM {OTHER_TASK_FMM[dataset]} RACU % (published, another task)"
        header = ["measure", "ACU % (95% CI)", "RACU % (95% CI)", f"RACU per seed {' / '.join(map(str, seeds))}",
                  "RACU clipped %"]
        if sub is not None:
            header.append(f"{subset[2]}: RACU %")
        header.append(fmm_label)
        lines = ["| " + " | ".join(header) + " |", "|---" * len(header) + "|"]
        for row in table.itertuples():
            racus = per_seed[per_seed["measure"] == row.measure].sort_values("seed")["racu"] * 100
            cells = [row.measure, _ci(row.acu_pct, row.acu_low, row.acu_high), _ci(row.racu_pct, row.racu_low, row.racu_high),
                     " / ".join(f"{v:.0f}" for v in racus), _pct(row.racu_clipped_pct)]
            if sub is not None:
                cells.append(_pct(sub["racu_pct"].get(row.measure, float("nan"))))
            cells.append(_pct(fmm["racu_pct"].get(row.measure, float("nan"))))
            lines.append("| " + " | ".join(cells) + " |")
        n_seeds = len(seeds)
        lines.append("")
        lines.append(f"`{run}`: {n_examples} test inputs x {n_seeds} fine-tuning seeds; {MEASURE_ORDER_NOTE}; "
                     "95% BCa bootstrap CIs over seeds (few seeds make them narrow and optimistic).")
        return "\n".join(lines)

    return build


# (model, dataset, run, n_examples) of the recursive-masking runs compared with FMM's ordering.
RACU_RUNS = (
    ("tiny", "rt", "tiny-rt-3seeds", 854),
    ("minilm", "rt", "minilm-rt-3seeds", 854),
    ("tiny", "babi-1", "tiny-babi1-3seeds", 1000),
    ("minilm", "babi-1", "minilm-babi1-full", 1000),
)


def fmm_ordering(root: Path) -> str:
    """Per model and dataset: Spearman across measures between our RACU and FMM's, only against FMM's row of the
    same task; a dataset FMM did not publish gets no correlation, and says why."""
    lines = ["| model | dataset | run (inputs x seeds) | measures | FMM row of the same task (published) | "
             "Spearman with FMM's published RACU | without x-grad-sign |",
             "|---|---|---|---|---|---|---|"]
    for model, dataset, run, n in RACU_RUNS:
        table, per_seed = _areas(root, run, n)
        ours = table[~table["measure"].isin(["random", "beam"])].set_index("measure")["racu_pct"]
        seeds = per_seed["seed"].nunique()
        where = f"`{run}` ({n} x {seeds})"
        if dataset not in SAME_TASK_FMM:
            lines.append(f"| {model} | {dataset} | {where} | {len(ours)} | none: FMM published {OTHER_TASK_FMM[dataset]}, "
                         "another task | not compared | not compared |")
            continue
        fmm = _fmm(SAME_TASK_FMM[dataset])["racu_pct"]
        common = sorted(set(ours.index) & set(fmm.index))
        rho = stats.spearmanr(ours[common], fmm[common]).statistic
        rest = [m for m in common if m != "x-grad-sign"]
        rho_rest = stats.spearmanr(ours[rest], fmm[rest]).statistic
        lines.append(f"| {model} | {dataset} | {where} | {len(common)} | {SAME_TASK_FMM[dataset]} (RoBERTa-base) | "
                     f"{rho:.2f} | {rho_rest:.2f} |")
    return "\n".join(lines)


def beam_subsets(root: Path) -> str:
    """Beam search beside the measures it is compared with on the same examples (RACU %, mean of seeds, 95% BCa CI)."""
    runs = (("tiny, rt", "tiny-rt-beam-subset", 100, "SST2"), ("tiny, babi-1", "tiny-babi1-beam-subset", 10, "bAbI-2"))
    shown = ("beam", "loo-sign", "ig-sign", "x-grad-sign")
    lines = ["| model, data | examples x seeds | " + " | ".join(shown) + " | FMM beam / loo-sign RACU % (published) |",
             "|---" * (len(shown) + 3) + "|"]
    for label, run, n, row in runs:
        table, per_seed = _areas(root, run, n)
        table = table.set_index("measure")
        cells = [_ci(table.loc[m, "racu_pct"], table.loc[m, "racu_low"], table.loc[m, "racu_high"]) if m in table.index
                 else "—" for m in shown]
        fmm = _fmm(row)["racu_pct"]
        note = row if row == "SST2" else f"{row}, another task"
        lines.append(f"| {label} | {n} x {per_seed['seed'].nunique()} | " + " | ".join(cells) +
                     f" | {fmm['beam']:.1f} / {fmm['loo-sign']:.1f} ({note}) |")
    return "\n".join(lines)


def roar_table(root: Path) -> str:
    """ROAR and Recursive ROAR with retraining (bilstm-rt-roar): mean test accuracy of the retrained models per
    masking level, RACU (mean over seeds, 95% BCa CI), and R-ROAR's published SST row (LSTM, clipped RACU)."""
    from engine.faithfulness.summary import area_metrics_table
    from engine.results.published import load_published
    from engine.results.store import ResultsStore

    data = ResultsStore(root).load("bilstm-rt-roar")
    data = data[data["metric"] == "accuracy"]
    areas = area_metrics_table(data).set_index(["method", "measure"])
    curves = data.groupby(["method", "measure", "ratio"])["value"].mean().unstack()
    published, _ = load_published("recursive_roar_table2")
    sst = published[(published["dataset"] == "SST") & (published["model"] == "lstm")].set_index("importance_measure")
    ours_to_paper = {"attention": "attention", "grad-l2": "gradient"}
    levels = list(curves.columns)
    lines = ["| method | measure | " + " | ".join(f"{r:.0%}" for r in levels) +
             " | RACU % (95% CI), this project | R-ROAR, SST, LSTM, clipped RACU % (published) |",
             "|---" * (len(levels) + 4) + "|"]
    for method, label in (("recursive-roar", "Recursive ROAR"), ("roar", "ROAR")):
        for measure in ("attention", "grad-l2"):
            row = areas.loc[(method, measure)]
            paper = "—"
            if method == "recursive-roar" and ours_to_paper[measure] in sst.index:
                p = sst.loc[ours_to_paper[measure]]
                paper = f"{p['racu_pct']:.1f} (+{p['ci_plus']:.1f}/-{p['ci_minus']:.1f})"
            lines.append(f"| {label} | {measure} | " + " | ".join(f"{v:.3f}" for v in curves.loc[(method, measure)]) +
                         f" | {_ci(row['racu_pct'], row['racu_low'], row['racu_high'])} | {paper} |")
    lines.append("| both | random | " + " | ".join(f"{v:.3f}" for v in curves.loc[("recursive-roar", "random")]) +
                 " | 0 | 0 |")
    return "\n".join(lines)


def summary_per_model(root: Path) -> str:
    """The README's digest: per model and dataset, the most and least faithful measures by RACU, x-grad-sign, and
    the correlation with FMM's ordering where FMM published the same task."""
    ordering = {(line.split(" | ")[0].strip("| "), line.split(" | ")[1]): line.split(" | ")[5]
                for line in fmm_ordering(root).splitlines()[2:]}
    lines = ["| model | dataset | inputs x seeds | most faithful (RACU %) | least faithful but random (RACU %) | "
             "x-grad-sign RACU % | Spearman with FMM's published ordering (same task) |", "|---|---|---|---|---|---|---|"]
    for model, dataset, run, n in RACU_RUNS:
        table, per_seed = _areas(root, run, n)
        table = table[table["measure"] != "random"].set_index("measure")["racu_pct"]
        top, bottom = table.idxmax(), table.idxmin()
        xg = table.get("x-grad-sign", float("nan"))
        lines.append(f"| {model} | {dataset} | {n} x {per_seed['seed'].nunique()} (`{run}`) | {top} ({table[top]:.0f}) | "
                     f"{bottom} ({table[bottom]:.0f}) | {_pct(xg)} | {ordering[(model, dataset)]} |")
    return "\n".join(lines)


def gpu_cells_beside_cpu(gpu_run: str, cpu_run: str, n_examples: int) -> Callable[[Path], str]:
    """Recursive-masking cells computed on a GPU (models fine-tuned there) beside the CPU's shipped cells of the same
    specification: ACU % per seed (higher: the ranking removes what the model relies on sooner), the mean over the
    seeds both runs hold, and each run's device and median seconds per cell (from the cells' provenance)."""
    import json
    import statistics

    def device_line(root: Path, run: str) -> str:
        seconds, devices = [], set()
        for path in sorted((root / run / "cells").glob("*.json")):
            prov = json.loads(path.read_text(encoding="utf-8")).get("provenance", {})
            if prov.get("n_examples") != n_examples:  # the same run may hold cells of a subset
                continue
            seconds.append(float(prov.get("seconds", float("nan"))))
            runtime = prov.get("runtime") or {}
            devices.add(runtime.get("gpu") or prov.get("machine", "unknown"))
        return (f"`{run}`: {len(seconds)} cells on {', '.join(sorted(devices))}, "
                f"median {statistics.median(seconds):.1f} s per cell")

    def build(root: Path) -> str:
        _, cpu = _areas(root, cpu_run, n_examples)
        _, gpu = _areas(root, gpu_run, n_examples)
        seeds = sorted(int(s) for s in cpu["seed"].unique())
        cpu_acu = cpu.set_index(["measure", "seed"])["acu"] * 100
        gpu_acu = gpu.set_index(["measure", "seed"])["acu"] * 100
        header = ["measure", *[f"seed {s}: CPU / GPU" for s in seeds], "mean over seeds both hold: CPU / GPU (GPU - CPU)"]
        lines = ["| " + " | ".join(header) + " |", "|---" * len(header) + "|"]
        for measure in sorted(cpu["measure"].unique()):
            cells, both = [], []
            for seed in seeds:
                c = cpu_acu.get((measure, seed))
                g = gpu_acu.get((measure, seed))
                cells.append(f"{c:.1f} / " + ("not run" if g is None else f"{g:.1f}"))
                if g is not None:
                    both.append((c, g))
            if both:
                mc, mg = float(np.mean([c for c, _ in both])), float(np.mean([g for _, g in both]))
                cells.append(f"{mc:.1f} / {mg:.1f} ({mg - mc:+.1f}; {len(both)} seed{'s' if len(both) > 1 else ''})")
            else:
                cells.append("no GPU cell")
            lines.append(f"| {measure} | " + " | ".join(cells) + " |")
        lines.append("")
        lines.append(f"ACU % of recursive masking on {n_examples} rt test sentences (MaSF included in each cell). "
                     f"{device_line(root, cpu_run)}; {device_line(root, gpu_run)}. The GPU's models were fine-tuned "
                     "there with the same command and seeds, so their weights differ from the CPU's: differences "
                     "are of models, not only of arithmetic.")
        return "\n".join(lines)

    return build
