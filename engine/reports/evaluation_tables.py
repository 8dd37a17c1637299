"""Markdown tables of an evaluation run (docs/evaluation.md): each aggregate erasure metric per measure beside its
MaSF share (masked and plain side by side), the Spearman of each metric's ranking of the measures with RACU's, the
agreement between measures and the sanity verdicts. Each function returns the lines it would print, joined.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
from scipy import stats

from engine.faithfulness.evaluation import (
    AGGREGATES,
    AGREEMENT,
    ERASURE,
    agreement_with_racu,
    evaluation_store,
    evaluation_table,
)
from engine.faithfulness.summary import area_metrics_table
from engine.results.store import ResultsStore

SHOWN = ("aopc-comprehensiveness", "aopc-sufficiency", "deletion-area", "insertion-area", "flip-fraction", "top1-flip",
         "soft-comprehensiveness", "soft-sufficiency")


def metric_tables(table: pd.DataFrame) -> str:
    out = []
    for strategy, part in table[table["level"].isna()].groupby("strategy"):
        seeds = sorted({s for v in part["seeds"] for s in v})
        n = int(part["n_examples"].iloc[0])
        out.append(f"\n**{part['base_model'].iloc[0]} {strategy}**, {part['dataset'].iloc[0]} {part['split'].iloc[0]} "
              f"({n} inputs), seeds {seeds}: mean over seeds (MaSF share p < 0.05 of the perturbed inputs)\n")
        shown = [m for m in SHOWN if m in set(part["metric"])]
        out.append("| measure | " + " | ".join(f"{m} ({part[part.metric == m]['better'].iloc[0]} better)" for m in shown)
              + " | s per explanation |")
        out.append("|---" * (len(shown) + 2) + "|")
        for measure, g in part.groupby("measure"):
            g = g.set_index("metric")
            cells = [f"{g.loc[m, 'value']:.3f} ({g.loc[m, 'p_below_005']:.0%})" for m in shown]
            out.append(f"| {measure} | " + " | ".join(cells) + f" | {g['seconds_per_explanation'].iloc[0] * 1e3:.1f} ms |")
    return "\n".join(out)


CI_SHOWN = ("aopc-comprehensiveness", "aopc-sufficiency", "deletion-area", "insertion-area", "soft-nc", "soft-ns")


def ci_tables(table: pd.DataFrame) -> str:
    """Mean over the model seeds with its 95% bootstrap CI (only where there are several seeds)."""
    out = []
    part = table[table["level"].isna() & table["metric"].isin(CI_SHOWN)]
    if part.empty or part["seeds"].map(len).max() < 2:
        return ""
    shown = [m for m in CI_SHOWN if m in set(part["metric"])]
    out.append("\nMean over seeds with its 95% bootstrap CI (" + ", ".join(
        f"{m} {part[part.metric == m]['better'].iloc[0]} better" for m in shown) + "):\n")
    out.append("| model | measure | " + " | ".join(shown) + " |")
    out.append("|---" * (len(shown) + 2) + "|")
    for (strategy, measure), g in part.groupby(["strategy", "measure"]):
        g = g.set_index("metric")
        out.append(f"| {strategy} | {measure} | " + " | ".join(
            f"{g.loc[m, 'value']:.3f} [{g.loc[m, 'ci_low']:.3f}, {g.loc[m, 'ci_high']:.3f}]" for m in shown) + " |")
    return "\n".join(out)


def ranking_tables(table: pd.DataFrame, racu_run: str | None, racu_dir: str | None = None) -> str:
    lines = []
    if racu_run:
        racu = area_metrics_table(ResultsStore(racu_dir).load(racu_run))
        racu = racu[(racu["dataset"] == table["dataset"].iloc[0]) & (racu["base_model"] == table["base_model"].iloc[0])]
        racu = racu[racu["n_examples"] == racu["n_examples"].max()]
        out = agreement_with_racu(table, racu)
        lines.append(f"\nSpearman across measures between each metric (oriented: larger = more faithful) and RACU of "
              f"`{racu_run}` ({', '.join(sorted(set(racu['strategy'])))} models):\n")
        wide = out.pivot_table(index="metric", columns="strategy", values="spearman_with_racu")
        share = out.pivot_table(index="metric", columns="strategy", values="mean_p_below_005")
        lines.append("| metric | " + " | ".join(f"{s}: rho with RACU (mean MaSF share)" for s in wide.columns) + " |")
        lines.append("|---" * (len(wide.columns) + 1) + "|")
        for metric, row in wide.iterrows():
            lines.append(f"| {metric} | " + " | ".join(f"{row[s]:+.2f} ({share.loc[metric, s]:.0%})" for s in wide.columns) + " |")
    strategies = sorted(table["strategy"].unique())
    if {"masked", "plain"} <= set(strategies):
        lines.append("\nDoes the ranking of the measures change on the plain model? Spearman across measures, masked vs plain:\n")
        lines.append("| metric | rho masked vs plain | MaSF share masked | MaSF share plain |")
        lines.append("|---|---|---|---|")
        agg = table[table["level"].isna() & table["metric"].isin(AGGREGATES)]
        for metric, g in agg.groupby("metric"):
            m = g[g.strategy == "masked"].set_index("measure")
            p = g[g.strategy == "plain"].set_index("measure")
            common = sorted(set(m.index) & set(p.index))
            if len(common) < 3:
                continue
            x, y = m.loc[common, "value"].to_numpy(float), p.loc[common, "value"].to_numpy(float)
            rho = stats.spearmanr(x, y).statistic if np.ptp(x) > 0 and np.ptp(y) > 0 else float("nan")
            lines.append(f"| {metric} | {rho:+.2f} | {m.loc[common, 'p_below_005'].mean():.0%} | "
                  f"{p.loc[common, 'p_below_005'].mean():.0%} |")
    return "\n".join(lines)


def agreement_table(data: pd.DataFrame) -> str:
    out = []
    part = data[data["method"] == AGREEMENT]
    if part.empty:
        return ""
    out.append("\nAgreement between measures (Krishna et al.), mean over inputs and seeds; top 20% by magnitude:\n")
    for strategy, g in part.groupby("strategy"):
        wide = g.pivot_table(index="measure", columns="metric", values="value")
        cols = ["feature_agreement", "sign_agreement", "rank_correlation", "pairwise_rank_agreement"]
        out.append(f"\n*{strategy}*\n\n| pair | " + " | ".join(cols) + " |\n" + "|---" * (len(cols) + 1) + "|")
        for pair, row in wide.iterrows():
            out.append(f"| {pair} | " + " | ".join(f"{row[c]:.2f}" for c in cols) + " |")
    return "\n".join(out)


def sanity_tables(run: str, results_dir=None) -> str:
    out = []
    data = evaluation_store(None if results_dir is None else Path(results_dir) / "evaluation").load(run)
    if data.empty:
        return ""
    out.append(f"\nSanity checks (`{run}`): mean Spearman with the trained model's scores after each stage; the last with "
          "its 95% BCa CI; pass (our rule): CI upper end < 0.5\n")
    for (method, model, strategy), part in data.groupby(["method", "base_model", "strategy"]):
        stages = part.sort_values("step")["stage"].unique().tolist()
        out.append(f"\n*{method}*, {model} {strategy}, {int(part['n_examples'].iloc[0])} inputs, "
              f"seeds {sorted(int(v) for v in part['seed'].unique())}\n")
        out.append("| measure | " + " | ".join(stages) + " | CI after full randomisation | passes |")
        out.append("|---" * (len(stages) + 3) + "|")
        for measure, g in part.groupby("measure"):
            g = g.sort_values("step")
            last = g.iloc[-1]
            out.append(f"| {measure} | " + " | ".join(f"{v:+.2f}" for v in g["value"]) +
                  f" | [{last['ci_low']:+.2f}, {last['ci_high']:+.2f}] | {'yes' if last['passes'] else 'no'} |")
    return "\n".join(out)


def evaluation_report(run: str, racu_run: str | None = None, sanity_run: str | None = None,
                      results_dir: str | Path | None = None) -> str:
    """Every table of one evaluation run (and of its sanity run), as scripts/experiments/evaluation_report.py prints them.
    results_dir: the results root (holding `evaluation/` and the RACU run); default: the project's."""
    evaluation_dir = None if results_dir is None else Path(results_dir) / "evaluation"
    data = evaluation_store(evaluation_dir).load(run)
    table = evaluation_table(data[data["method"] == ERASURE])
    parts = []
    if not table.empty:
        parts += [metric_tables(table), ci_tables(table), ranking_tables(table, racu_run, results_dir)]
    parts.append(agreement_table(data))
    if sanity_run:
        parts.append(sanity_tables(sanity_run, results_dir))
    return "\n".join(p for p in parts if p)
