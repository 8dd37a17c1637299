"""Every results table of the documentation, computed from the shipped stores (`results/`) and the published numbers
(`results/published/`), and the generated regions of the docs that hold them.

A table lives in a markdown file between `<!-- report:NAME -->` and `<!-- /report:NAME -->`; `python -m engine report
--check` compares each region with what its table function gives now, `--write` rewrites the regions. Published
numbers are always in columns whose header says "(published)", and a comparison with a paper is made only between
the same task (our rt with FMM's SST2: both binary sentence sentiment); FMM published no bAbI-1 row, so our bAbI-1
tables show their bAbI-2 row as another task's reference and compute no correlation with it.
"""
from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import stats

from engine.atomic import write_text
from engine.errors import InvalidInputError
from engine.reports.attnlrp_tables import attnlrp_table
from engine.reports.groundtruth_tables import (
    cost_markdown,
    judge_markdown,
    operator_markdown,
    recovery_markdown,
    selfexplain_markdown,
    separation_markdown,
    set_truth_markdown,
    spearman_markdown,
    truth_markdown,
    wrong_markdown,
)
from engine.reports.ig_convergence_tables import ig_convergence_table
from engine.reports.inputs import read_files, replayed_cache, unknown_code
from engine.reports.llm_tables import llm_accuracy, llm_curves, llm_racu, prompt_selection, selfexplain_table
from engine.reports.selfexplain_field_tables import field_tests_table

# Our dataset -> FMM Table 1's row of the same task (rt and SST2: movie-review sentences, binary sentiment).
SAME_TASK_FMM = {"rt": "SST2"}
# FMM's row shown beside a dataset they did not publish, labelled as another task, never correlated.
OTHER_TASK_FMM = {"babi-1": "bAbI-2"}
MEASURE_ORDER_NOTE = "rows by RACU, most faithful first"


@dataclass(frozen=True)
class Table:
    name: str
    doc: str  # the file holding the region, relative to the project root
    build: Callable[[Path], str]  # results root -> the region's markdown (without the markers)


GROUND_TRUTH_DOC = "docs/ground-truth.md"
GROUND_TRUTH_RUN = "tiny-rt-card"
GROUND_TRUTH_MINILM_RUN = "minilm-rt-card"
GROUND_TRUTH_SMOLLM2_RUN = "smollm2-rt-card"
GROUND_TRUTH_SET_RUN = "tiny-rt-graded-card"
GROUND_TRUTH_TABLES = (
    Table("ground-truth-truth-tiny-rt", GROUND_TRUTH_DOC, truth_markdown(GROUND_TRUTH_RUN)),
    Table("ground-truth-recovery-tiny-rt", GROUND_TRUTH_DOC, recovery_markdown(GROUND_TRUTH_RUN)),
    Table("ground-truth-judges-tiny-rt-mask", GROUND_TRUTH_DOC, judge_markdown(GROUND_TRUTH_RUN, "mask")),
    Table("ground-truth-judges-tiny-rt-delete", GROUND_TRUTH_DOC, judge_markdown(GROUND_TRUTH_RUN, "delete")),
    Table("ground-truth-judges-tiny-rt-unk", GROUND_TRUTH_DOC, judge_markdown(GROUND_TRUTH_RUN, "unk")),
    Table("ground-truth-wrong-tiny-rt", GROUND_TRUTH_DOC, wrong_markdown(GROUND_TRUTH_RUN, "mask")),
    Table("ground-truth-spearman-tiny-rt", GROUND_TRUTH_DOC, spearman_markdown(GROUND_TRUTH_RUN, "mask")),
    Table("ground-truth-operators-tiny-rt", GROUND_TRUTH_DOC, operator_markdown(GROUND_TRUTH_RUN)),
    Table("ground-truth-cost-tiny-rt", GROUND_TRUTH_DOC, cost_markdown(GROUND_TRUTH_RUN)),
    # MiniLM (rt): a graded trigger, OR and the control (scripts/groundtruth_rt.sh minilm)
    Table("ground-truth-truth-minilm-rt", GROUND_TRUTH_DOC, truth_markdown(GROUND_TRUTH_MINILM_RUN)),
    Table("ground-truth-recovery-minilm-rt", GROUND_TRUTH_DOC, recovery_markdown(GROUND_TRUTH_MINILM_RUN)),
    Table("ground-truth-judges-minilm-rt-mask", GROUND_TRUTH_DOC, judge_markdown(GROUND_TRUTH_MINILM_RUN, "mask")),
    Table("ground-truth-judges-minilm-rt-unk", GROUND_TRUTH_DOC, judge_markdown(GROUND_TRUTH_MINILM_RUN, "unk")),
    Table("ground-truth-spearman-minilm-rt", GROUND_TRUTH_DOC, spearman_markdown(GROUND_TRUTH_MINILM_RUN, "mask")),
    Table("ground-truth-cost-minilm-rt", GROUND_TRUTH_DOC, cost_markdown(GROUND_TRUTH_MINILM_RUN)),
    # SmolLM2 (rt), masked LoRA: the trigger and the control, [REDACTED] and delete (scripts/groundtruth_rt.sh smollm2)
    Table("ground-truth-truth-smollm2-rt", GROUND_TRUTH_DOC, truth_markdown(GROUND_TRUTH_SMOLLM2_RUN)),
    Table("ground-truth-recovery-smollm2-rt", GROUND_TRUTH_DOC, recovery_markdown(GROUND_TRUTH_SMOLLM2_RUN)),
    Table("ground-truth-judges-smollm2-rt-redacted", GROUND_TRUTH_DOC,
          judge_markdown(GROUND_TRUTH_SMOLLM2_RUN, "redacted")),
    Table("ground-truth-judges-smollm2-rt-delete", GROUND_TRUTH_DOC,
          judge_markdown(GROUND_TRUTH_SMOLLM2_RUN, "delete")),
    Table("ground-truth-spearman-smollm2-rt", GROUND_TRUTH_DOC, spearman_markdown(GROUND_TRUTH_SMOLLM2_RUN, "redacted")),
    Table("ground-truth-selfexplain-smollm2-rt", GROUND_TRUTH_DOC, selfexplain_markdown(GROUND_TRUTH_SMOLLM2_RUN)),
    Table("ground-truth-cost-smollm2-rt", GROUND_TRUTH_DOC, cost_markdown(GROUND_TRUTH_SMOLLM2_RUN)),
    # the graded set (several planted words of known order): the card that separates the measures
    Table("ground-truth-set-truth-tiny-rt", GROUND_TRUTH_DOC, set_truth_markdown(GROUND_TRUTH_SET_RUN)),
    Table("ground-truth-separation-tiny-rt", GROUND_TRUTH_DOC, separation_markdown(GROUND_TRUTH_SET_RUN)),
    Table("ground-truth-set-judges-tiny-rt-mask", GROUND_TRUTH_DOC, judge_markdown(GROUND_TRUTH_SET_RUN, "mask")),
    Table("ground-truth-set-judges-tiny-rt-retrieval", GROUND_TRUTH_DOC,
          judge_markdown(GROUND_TRUTH_SET_RUN, "retrieval")),
    Table("ground-truth-set-wrong-tiny-rt", GROUND_TRUTH_DOC, wrong_markdown(GROUND_TRUTH_SET_RUN, "mask")),
    # redundant k = 3 and cancellation
    Table("ground-truth-set2-truth-tiny-rt", GROUND_TRUTH_DOC, set_truth_markdown("tiny-rt-set-card")),
    Table("ground-truth-set2-separation-tiny-rt", GROUND_TRUTH_DOC, separation_markdown("tiny-rt-set-card")),
    Table("ground-truth-set2-judges-tiny-rt-mask", GROUND_TRUTH_DOC, judge_markdown("tiny-rt-set-card", "mask")),
    Table("ground-truth-set2-wrong-tiny-rt", GROUND_TRUTH_DOC, wrong_markdown("tiny-rt-set-card", "mask")),
)


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


def attention_table(root: Path) -> str:
    """W&P's attention diagnostics on rt (results/attention/default) beside their published SST row."""
    from engine.attention.results import load_attention_results
    from engine.results.published import load_published

    ours, _, _ = load_attention_results("default", "rt", root)  # the summary file, or the run's store cells
    wp, _ = load_published("wiegreffe_pinter")
    sst = wp[wp["dataset"] == "SST"].set_index("setting")
    mlp = ours["guided_mlp"]
    adv = ours["best_adversary"]
    rows = [
        ("base BiLSTM-attention", ours["base"]["f1_positive"], f"{sst.loc['base_reproduced', 'f1']:.3f} (reproduced)"),
        ("frozen uniform attention", ours["uniform"]["f1_positive"], f"{sst.loc['uniform', 'f1']:.3f}"),
        ("guided MLP: uniform weights", mlp["uniform"]["f1_positive"], f"{sst.loc['mlp_uniform', 'f1']:.3f}"),
        ("guided MLP: its own trained attention", mlp["trained"]["f1_positive"], f"{sst.loc['mlp_trained', 'f1']:.3f}"),
        ("guided MLP: base LSTM's attention", mlp["base_lstm"]["f1_positive"], f"{sst.loc['mlp_base_lstm', 'f1']:.3f}"),
        ("guided MLP: adversary's attention", mlp["adversary"]["f1_positive"], f"{sst.loc['mlp_adversary', 'f1']:.3f}"),
    ]
    lines = ["| setting | this project (rt) | W&P, SST (published) |", "|---|---|---|"]
    lines += [f"| {name} | {value:.3f} | {published} |" for name, value, published in rows]
    a = sst.loc["adversary"]
    lines.append(f"| best adversary with JSD > 0.4: lambda, F1, TVD, JSD | {adv['lambda']:g}, {adv['f1_positive']:.3f}, "
                 f"{adv['tvd']:.3f}, {adv['jsd']:.3f} | {a['lambda']:g}, {a['f1']:.3f}, {a['tvd']:.3f}, {a['jsd']:.3f} |")
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


def evaluation_tables(run: str, racu_run: str) -> Callable[[Path], str]:
    def build(root: Path) -> str:
        from engine.faithfulness.evaluation import ERASURE, evaluation_store, evaluation_table
        from engine.reports.evaluation_tables import ci_tables, metric_tables, ranking_tables

        data = evaluation_store(root / "evaluation").load(run)
        # level_cis=False: these tables show the aggregates over levels only, never a single level's CI
        table = evaluation_table(data[data["method"] == ERASURE], level_cis=False)
        if table.empty:
            raise InvalidInputError(f"evaluation run {run!r} in {root / 'evaluation'} has no erasure cells")
        parts = [metric_tables(table), ci_tables(table), ranking_tables(table, racu_run, root)]
        return "\n".join(p for p in parts if p).strip("\n")

    return build


OPERATOR_METRICS = ("aopc-comprehensiveness", "aopc-sufficiency", "faithfulness-correlation", "infidelity")


def operator_comparison(run: str) -> Callable[[Path], str]:
    """The metrics of each measure under each removal operator of `run` ([MASK], retrieval infill, MLM infill), each
    value with the share of its perturbed inputs MaSF calls out of distribution (p < 0.05): whether infill keeps
    the perturbed inputs closer to the data than [MASK] does, which ICE assumes (one seed, means over the inputs)."""

    def build(root: Path) -> str:
        from engine.faithfulness.evaluation import ERASURE, evaluation_store, evaluation_table
        from engine.faithfulness.registry import better

        data = evaluation_store(root / "evaluation").load(run)
        table = evaluation_table(data[data["method"] == ERASURE], level_cis=False)
        table = table[table["level"].isna()].set_index(["measure", "removal", "metric"])
        operators = [op for op in ("mask", "retrieval", "mlm") if op in table.index.get_level_values("removal")]
        measures = sorted(table.index.get_level_values("measure").unique(), key=lambda m: (m != "random", m))
        head = " | ".join(f"{m} ({better(m)} better)" for m in OPERATOR_METRICS)
        lines = [f"| measure | operator | {head} |", "|---|---|" + "---|" * len(OPERATOR_METRICS)]
        for measure in measures:
            for op in operators:
                cells = []
                for metric in OPERATOR_METRICS:
                    key = (measure, op, metric)
                    if key not in table.index:
                        cells.append("—")
                        continue
                    row = table.loc[key]
                    cells.append(f"{row['value']:.3f} ({row['p_below_005']:.1%})")
                lines.append(f"| {measure} | {op} | " + " | ".join(cells) + " |")
        return "\n".join(lines)

    return build


def metric_columns(run: str, metrics: tuple[str, ...], operator: str = "mask") -> Callable[[Path], str]:
    """Measures x `metrics` of one evaluation run under one operator: each value (mean over the inputs and seeds)
    with the MaSF share (p < 0.05) of its perturbed inputs, each metric's direction in its header."""

    def build(root: Path) -> str:
        from engine.faithfulness.evaluation import ERASURE, evaluation_store, evaluation_table
        from engine.faithfulness.registry import better

        data = evaluation_store(root / "evaluation").load(run)
        table = evaluation_table(data[data["method"] == ERASURE], level_cis=False)
        table = table[table["level"].isna() & (table["removal"] == operator)].set_index(["measure", "metric"])
        measures = sorted(table.index.get_level_values("measure").unique(), key=lambda m: (m != "random", m))
        lines = ["| measure | " + " | ".join(f"{m} ({better(m)} better)" for m in metrics) + " |",
                 "|---|" + "---|" * len(metrics)]
        for measure in measures:
            cells = [f"{table.loc[(measure, m), 'value']:.3f} ({table.loc[(measure, m), 'p_below_005']:.1%})"
                     if (measure, m) in table.index else "—" for m in metrics]
            lines.append(f"| {measure} | " + " | ".join(cells) + " |")
        return "\n".join(lines)

    return build


AGREEMENT_PAIRS = ("grad-l1 ~ grad-l2", "ig-sign ~ loo-sign", "loo-sign ~ x-grad-sign", "grad-l2 ~ loo-sign",
                   "loo-abs ~ loo-sign", "random ~ x-grad-sign")


def agreement_pairs(root: Path) -> str:
    """Krishna et al.'s agreement for selected pairs of measures, tiny and MiniLM, masked and plain fine-tuning:
    feature / sign agreement at the top 20%, Spearman and pairwise rank agreement (mean over inputs and seeds)."""
    from engine.faithfulness.evaluation import AGREEMENT, evaluation_store

    columns = []
    for run, label in (("tiny-rt-erasure", "tiny"), ("minilm-rt-erasure", "MiniLM")):
        data = evaluation_store(root / "evaluation").load(run)
        part = data[data["method"] == AGREEMENT]
        wide = part.pivot_table(index=["strategy", "measure"], columns="metric", values="value")
        for strategy in ("masked", "plain"):
            if strategy in wide.index.get_level_values("strategy"):  # a run may hold one strategy only
                columns.append((f"{label} {strategy}", wide.loc[strategy]))
    metrics = ("feature_agreement", "sign_agreement", "rank_correlation", "pairwise_rank_agreement")
    header = [f"{columns[0][0]}: feature / sign / Spearman / pairwise", *(name for name, _ in columns[1:])]
    lines = ["| pair | " + " | ".join(header) + " |", "|---" * (len(columns) + 1) + "|"]
    for pair in AGREEMENT_PAIRS:
        cells = [" / ".join(f"{w.loc[pair, m]:.2f}" for m in metrics) for _, w in columns]
        lines.append(f"| {pair} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


SANITY_ORDER = ("random", "grad-l2", "grad-l1", "x-grad-sign", "x-grad-abs", "ig-sign", "ig-abs", "loo-sign", "loo-abs")


def sanity_verdicts(root: Path) -> str:
    """Which measures pass each sanity check (pass: the 95% BCa CI of the Spearman after full randomisation ends
    below 0.5), tiny masked and plain (model and label randomisation) and MiniLM masked (model randomisation);
    label randomisation with its final Spearman and CI."""
    from engine.faithfulness.evaluation import evaluation_store

    columns = []
    for run, model in (("tiny-rt-sanity", "tiny"), ("minilm-rt-sanity", "MiniLM")):
        data = evaluation_store(root / "evaluation").load(run)
        last = data.sort_values("step").groupby(["method", "strategy", "measure"]).tail(1)
        for strategy in ("masked", "plain"):
            part = last[last["strategy"] == strategy]
            if part.empty:
                continue
            checks = {m.split(": ")[-1]: g.set_index("measure") for m, g in part.groupby("method")}
            columns.append((f"{model} {strategy}", checks))

    def verdict(row, detail: bool) -> str:
        word = "pass" if row["passes"] else "**fail**"
        return f"{word} ({row['value']:.2f} [{row['ci_low']:.2f}, {row['ci_high']:.2f}])" if detail else word.strip("*")

    header = []
    for name, checks in columns:
        kinds = [k for k in ("cascading model randomisation", "label randomisation") if k in checks]
        header.append(f"{name}: " + " / ".join("model" if k.startswith("cascading") else "labels" for k in kinds))
    lines = ["| measure | " + " | ".join(header) + " |", "|---" * (len(columns) + 1) + "|"]
    for measure in SANITY_ORDER:
        cells = []
        for _, checks in columns:
            parts = []
            for kind in ("cascading model randomisation", "label randomisation"):
                if kind in checks and measure in checks[kind].index:
                    parts.append(verdict(checks[kind].loc[measure], detail=kind == "label randomisation"))
            cells.append(" / ".join(parts) or "—")
        lines.append(f"| {measure} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def sanity_curves(run: str) -> Callable[[Path], str]:
    def build(root: Path) -> str:
        from engine.reports.evaluation_tables import sanity_tables

        return sanity_tables(run, root).strip("\n")

    return build


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


def _markdown(frame: pd.DataFrame, index_name: str) -> str:
    header = [index_name, *map(str, frame.columns)]
    lines = ["| " + " | ".join(header) + " |", "|---" * len(header) + "|"]
    for index, row in frame.iterrows():
        lines.append("| " + " | ".join([str(index), *("" if pd.isna(v) else str(v) for v in row)]) + " |")
    return "\n".join(lines)


def simulation_accuracy(run: str) -> Callable[[Path], str]:
    """SMaT's Table 1 shape for one simulability run: explainers x student budgets, median [IQR] over seeds (%)."""
    def build(root: Path) -> str:
        from engine.simulability.results import load_simulability, simulation_table

        table = simulation_table(load_simulability(run, str(root)))
        if table.empty:
            raise InvalidInputError(f"simulability run {run!r} in {root} has no simulation accuracy")
        return _markdown(table, "explainer")

    return build


def sentence_plausibility(run: str) -> Callable[[Path], str]:
    """Sentence-level AUC of each explainer against bAbI's supporting facts in one simulability run."""
    def build(root: Path) -> str:
        from engine.simulability.results import load_simulability, plausibility_table

        table = plausibility_table(load_simulability(run, str(root)))
        lines = ["| explainer | sentence AUC | cells |", "|---|---|---|"]
        lines += [f"| {r.explainer} | {r._2:.3f} | {r.cells} |" for r in table.itertuples()]
        return "\n".join(lines)

    return build


def budget_pareto_report(run: str) -> Callable[[Path], str]:
    """RACU and NAOPC against forward passes of the budgeted searches (engine.results.budget_pareto)."""
    from engine.results.budget_pareto import report_table

    return report_table(run)


def masf_false_alarms(run: str) -> Callable[[Path], str]:
    """MaSF's false alarms on fresh masked fine-tunings over training seeds, masking draws and calibration divisions,
    with their interval and variance components (engine.results.masf_calibration)."""
    from engine.results.masf_calibration import report_table

    return report_table(run)


def faith_plausibility_report(racu_run: str, rationale_run: str) -> Callable[[Path], str]:
    """RACU against AUPRC of the supporting facts per measure (engine.plausibility.rationale_runs)."""
    from engine.plausibility.rationale_runs import report_table

    return report_table(racu_run, rationale_run)


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


TABLES: tuple[Table, ...] = (
    Table("summary", "README.md", summary_per_model),
    Table("gpu-minilm-rt", "docs/gpu.md", gpu_cells_beside_cpu("minilm-rt-3seeds-gpu", "minilm-rt-3seeds", 854)),
    Table("fmm-ordering", "docs/results.md", fmm_ordering),
    Table("racu-tiny-rt", "docs/results.md", racu_table("tiny-rt-3seeds", 854, "rt")),
    Table("racu-tiny-babi1", "docs/results.md",
          racu_table("tiny-babi1-3seeds", 1000, "babi-1", ("tiny-babi1-3seeds", 200, "first 200 stories"))),
    Table("racu-minilm-rt", "docs/results.md", racu_table("minilm-rt-3seeds", 854, "rt")),
    Table("racu-minilm-babi1-full", "docs/results.md", racu_table("minilm-babi1-full", 1000, "babi-1")),
    Table("beam-subsets", "docs/results.md", beam_subsets),
    Table("attention", "docs/results.md", attention_table),
    Table("evaluation-tiny-rt", "docs/evaluation.md", evaluation_tables("tiny-rt-erasure", "tiny-rt-3seeds")),
    Table("evaluation-tiny-babi1", "docs/evaluation.md", evaluation_tables("tiny-babi1-erasure", "tiny-babi1-3seeds")),
    Table("evaluation-tiny-babi1-full", "docs/evaluation.md",
          evaluation_tables("tiny-babi1-erasure-full", "tiny-babi1-3seeds")),
    Table("agreement-pairs", "docs/evaluation.md", agreement_pairs),
    Table("operators-tiny-rt", "docs/evaluation.md", operator_comparison("tiny-rt-infill")),
    Table("pi-soft-tiny-rt", "docs/evaluation.md",
          metric_columns("tiny-rt-infill", ("soft-nc", "pi-soft-nc", "soft-ns", "pi-soft-ns"))),
    Table("simulability-babi1", "docs/simulability.md", simulation_accuracy("tiny-babi-1-masked-s0-babi-1")),
    Table("plausibility-babi1", "docs/simulability.md", sentence_plausibility("tiny-babi-1-masked-s0-babi-1")),
    Table("llm-accuracy", "docs/llm.md", llm_accuracy((
        ("SmolLM2-135M-Instruct", "smollm2-rt-prompt", "smollm2-rt-zero-shot.json"),
        ("SmolLM2-135M-Instruct", "smollm2-rt-lora", "smollm2-rt-lora.json"),
        ("Gemma 3 270M (base)", "gemma3-270m, one-line zero-shot cue", "gemma3-rt-zero-shot-cue.json"),
        ("Gemma 3 270M (base)", "gemma3-rt-prompt", "gemma3-rt-prompt.json")))),
    Table("llm-gemma-prompts", "docs/llm.md", prompt_selection((
        ("zero-shot, one-line cue, no [REDACTED] notice", "gemma3-validation/gemma3-zero-shot-cue.json"),
        ("zero-shot with the notice", "gemma3-validation/gemma3-zero-shot-notice.json"),
        ("4-shot with the notice", "gemma3-validation/gemma3-4shot-notice.json")),
        chosen="gemma3-validation/gemma3-4shot-notice.json")),
    Table("llm-selfexplain", "docs/llm.md",
          selfexplain_table("smollm2-rt-selfexplain", (("zero-shot", "smollm2-rt-prompt"), ("masked LoRA", "smollm2-rt-lora")))),
    Table("llm-ig-gap-smollm2", "docs/llm.md",
          ig_convergence_table("smollm2-rt-convergence-cuda.jsonl", compare_with="smollm2-rt-convergence.jsonl")),
    Table("llm-ig-gap-gemma3", "docs/llm.md",
          ig_convergence_table("gemma3-rt-convergence-cuda.jsonl", compare_with="gemma3-rt-convergence.jsonl")),
    Table("llm-attnlrp", "docs/llm.md", attnlrp_table(("smollm2-rt-prompt.jsonl", "smollm2-rt-lora.jsonl",
                                                       "gemma3-rt-prompt.jsonl", "gemma3-rt-lora.jsonl"))),
    Table("llm-selfexplain-field", "docs/llm.md",
          field_tests_table(("smollm2-rt-field-insertion-100", "smollm2-rt-field-biased-100", "smollm2-rt-field-ccshap-100",
                             "gemma3-rt-field-insertion-100", "gemma3-rt-field-biased-100", "gemma3-rt-field-ccshap-100"),
                            (("SmolLM2 zero-shot", "smollm2-rt-prompt"), ("Gemma 3 4-shot", "gemma3-rt-prompt")))),
    Table("masf-false-alarms", "docs/masf.md", masf_false_alarms("tiny-rt-seeds-21-up")),
    *GROUND_TRUTH_TABLES,
)

# Tables dropped from the docs because every result they read, or the part that decides them, was of unknown code
# (a "-dirty" code version, its checkpoint's included, or none) and recomputing it from committed code means
# retraining checkpoints: hours of CPU. Each doc says so where the table was and gives the commands that recompute
# its results; once they are rerun from a commit, the entry moves back into TABLES and its region into the doc.
DROPPED_TABLES: tuple[Table, ...] = (
    Table("racu-minilm-babi1", "docs/results.md", racu_table("minilm-babi1-3seeds", 40, "babi-1")),
    Table("roar", "docs/results.md", roar_table),
    Table("evaluation-minilm-rt", "docs/evaluation.md", evaluation_tables("minilm-rt-erasure", "minilm-rt-3seeds")),
    Table("sanity-verdicts", "docs/evaluation.md", sanity_verdicts),
    Table("sanity-tiny-rt", "docs/evaluation.md", sanity_curves("tiny-rt-sanity")),
    Table("sanity-minilm-rt", "docs/evaluation.md", sanity_curves("minilm-rt-sanity")),
    Table("simulability-rt", "docs/simulability.md", simulation_accuracy("minilm-rt-masked-s0-rt")),
    Table("budget-pareto", "docs/budgeted-search.md", budget_pareto_report("tiny-rt-budget")),
    Table("llm-racu", "docs/llm.md", llm_racu((("SmolLM2 zero-shot (`smollm2-rt-prompt`)", "smollm2-rt-zero-shot-masking"),
                                               ("SmolLM2 masked LoRA (`smollm2-rt-lora`)", "smollm2-rt-lora-masking")), 10)),
    Table("llm-curves", "docs/llm.md", llm_curves((("zero-shot", "smollm2-rt-zero-shot-masking"),
                                                   ("masked LoRA", "smollm2-rt-lora-masking")), 10)),
    Table("faith-plausibility-babi1", "docs/faithfulness-plausibility.md",
          faith_plausibility_report("tiny-babi1-small-3seeds", "tiny-babi1-small-rationales")),
)


def _region(name: str) -> re.Pattern:
    return re.compile(rf"(<!-- report:{re.escape(name)} -->\n)(.*?)(\n<!-- /report:{re.escape(name)} -->)", re.S)


def table_names() -> list[str]:
    return [t.name for t in TABLES]


def build(names: list[str] | None = None, results_dir: str | Path | None = None) -> dict[str, str]:
    """{name: markdown} of the chosen tables (default: all), from the results root (default: the project's)."""
    root = results_root(results_dir)
    chosen = _chosen(names)
    return {t.name: t.build(root).strip("\n") for t in chosen}


def build_with_inputs(names: list[str] | None = None, results_dir: str | Path | None = None
                      ) -> tuple[dict[str, str], dict[str, list[Path]]]:
    """({name: markdown}, {name: the provenance files it read, sorted}) of the chosen tables (default: all): one
    build, each table's reads recorded while it is built (engine.reports.inputs)."""
    root = results_root(results_dir)
    tables, inputs = {}, {}
    for table in _chosen(names):
        text = []
        inputs[table.name] = sorted(read_files(lambda r, t=table: text.append(t.build(r)) or "", root))
        tables[table.name] = text[0].strip("\n")
    return tables, inputs


def unknown_code_per_table(inputs: dict[str, list[Path]], results_dir: str | Path | None = None
                           ) -> dict[str, list[str]]:
    """{table: one line per result it reads whose code is unknown ("<file>: <why>", the file relative to the results
    root's parent)}, for every table of `inputs` (as `build_with_inputs` gives), empty lists included. Unknown: the
    file records no code version, or a "-dirty" one (its own or its checkpoint's), labelled by an audit or not."""
    root = results_root(results_dir).resolve()
    verdicts: dict[Path, str | None] = {}
    found = {}
    for name, files in inputs.items():
        lines = []
        for path in files:
            if path not in verdicts:
                verdicts[path] = unknown_code(path)
            if verdicts[path] is not None:
                lines.append(f"{path.relative_to(root.parent)}: {verdicts[path]}")
        found[name] = lines
    return found


def results_root(results_dir: str | Path | None = None) -> Path:
    from engine.runtime import PROJECT_ROOT

    return Path(results_dir) if results_dir is not None else PROJECT_ROOT / "results"


def code_provenance_check(results_dir: str | Path | None = None) -> list[str]:
    """The shipped results the tables are built from whose code no commit holds (engine.results.code_provenance):
    one line each, empty when every one names committed code or carries its audit's label."""
    from engine.results.code_provenance import code_provenance_problems

    return code_provenance_problems(results_root(results_dir))


def _chosen(names: list[str] | None) -> list[Table]:
    if not names:
        return list(TABLES)
    unknown = [n for n in names if n not in table_names()]
    if unknown:
        raise InvalidInputError(f"unknown report table(s) {', '.join(unknown)}; known: {', '.join(table_names())}")
    return [t for t in TABLES if t.name in names]


def sync(tables: dict[str, str], project_root: str | Path | None = None, write: bool = False) -> list[str]:
    """Compare (write=False) or rewrite (write=True) each table's region in its file under project_root.
    Returns the problems: '<file>: table NAME differs from what `report` prints' or '... has no region'. With
    write=True a region that differs is rewritten (and not reported); a missing region is still reported."""
    from engine.runtime import PROJECT_ROOT

    root = Path(project_root) if project_root is not None else PROJECT_ROOT
    problems = []
    by_doc: dict[str, list[Table]] = {}
    for table in TABLES:
        if table.name in tables:
            by_doc.setdefault(table.doc, []).append(table)
    for doc, chosen in by_doc.items():
        path = root / doc
        text = path.read_text(encoding="utf-8")
        new = text
        for table in chosen:
            pattern = _region(table.name)
            found = pattern.search(new)
            if found is None:
                problems.append(f"{doc}: no region <!-- report:{table.name} --> ... <!-- /report:{table.name} -->")
                continue
            if found.group(2) != tables[table.name]:
                if write:
                    new = new[:found.start(2)] + tables[table.name] + new[found.end(2):]
                else:
                    problems.append(f"{doc}: table {table.name} differs from what `python -m engine report` prints "
                                    f"(run `python -m engine report --write`)")
        if write and new != text:
            write_text(path, new)  # atomically: an interrupted --write never leaves half a document
    return problems
