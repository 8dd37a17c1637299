"""Markdown tables of an evaluation run for docs/evaluation.md: each aggregate erasure metric per measure beside its
MaSF share (masked and plain side by side), the Spearman of each metric's ranking of the measures with RACU's, and
the sanity verdicts.

    python scripts/evaluation_report.py --run tiny-rt-erasure --racu-run tiny-rt-3seeds --sanity-run tiny-rt-sanity
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from scipy import stats  # noqa: E402

from engine.faithfulness.evaluation import (  # noqa: E402
    AGGREGATES,
    AGREEMENT,
    ERASURE,
    agreement_with_racu,
    evaluation_store,
    evaluation_table,
)
from engine.faithfulness.summary import area_metrics_table  # noqa: E402
from engine.results import ResultsStore  # noqa: E402

SHOWN = ("aopc-comprehensiveness", "aopc-sufficiency", "deletion-area", "insertion-area", "flip-fraction", "top1-flip",
         "soft-comprehensiveness", "soft-sufficiency")


def metric_tables(table: pd.DataFrame) -> None:
    for strategy, part in table[table["level"].isna()].groupby("strategy"):
        seeds = sorted({s for v in part["seeds"] for s in v})
        n = int(part["n_examples"].iloc[0])
        print(f"\n**{part['base_model'].iloc[0]} {strategy}**, {part['dataset'].iloc[0]} {part['split'].iloc[0]} "
              f"({n} inputs), seeds {seeds}: mean over seeds (MaSF share p < 0.05 of the perturbed inputs)\n")
        shown = [m for m in SHOWN if m in set(part["metric"])]
        print("| measure | " + " | ".join(f"{m} ({part[part.metric == m]['better'].iloc[0]} better)" for m in shown)
              + " | s per explanation |")
        print("|---" * (len(shown) + 2) + "|")
        for measure, g in part.groupby("measure"):
            g = g.set_index("metric")
            cells = [f"{g.loc[m, 'value']:.3f} ({g.loc[m, 'p_below_005']:.0%})" for m in shown]
            print(f"| {measure} | " + " | ".join(cells) + f" | {g['seconds_per_explanation'].iloc[0] * 1e3:.1f} ms |")


CI_SHOWN = ("aopc-comprehensiveness", "aopc-sufficiency", "deletion-area", "insertion-area", "soft-nc", "soft-ns")


def ci_tables(table: pd.DataFrame) -> None:
    """Mean over the model seeds with its 95% bootstrap CI (only where there are several seeds)."""
    part = table[table["level"].isna() & table["metric"].isin(CI_SHOWN)]
    if part.empty or part["seeds"].map(len).max() < 2:
        return
    shown = [m for m in CI_SHOWN if m in set(part["metric"])]
    print("\nMean over seeds with its 95% bootstrap CI (" + ", ".join(
        f"{m} {part[part.metric == m]['better'].iloc[0]} better" for m in shown) + "):\n")
    print("| model | measure | " + " | ".join(shown) + " |")
    print("|---" * (len(shown) + 2) + "|")
    for (strategy, measure), g in part.groupby(["strategy", "measure"]):
        g = g.set_index("metric")
        print(f"| {strategy} | {measure} | " + " | ".join(
            f"{g.loc[m, 'value']:.3f} [{g.loc[m, 'ci_low']:.3f}, {g.loc[m, 'ci_high']:.3f}]" for m in shown) + " |")


def ranking_tables(table: pd.DataFrame, racu_run: str | None, racu_dir: str | None = None) -> None:
    if racu_run:
        racu = area_metrics_table(ResultsStore(racu_dir).load(racu_run))
        racu = racu[(racu["dataset"] == table["dataset"].iloc[0]) & (racu["base_model"] == table["base_model"].iloc[0])]
        racu = racu[racu["n_examples"] == racu["n_examples"].max()]
        out = agreement_with_racu(table, racu)
        print(f"\nSpearman across measures between each metric (oriented: larger = more faithful) and RACU of "
              f"`{racu_run}` ({', '.join(sorted(set(racu['strategy'])))} models):\n")
        wide = out.pivot_table(index="metric", columns="strategy", values="spearman_with_racu")
        share = out.pivot_table(index="metric", columns="strategy", values="mean_p_below_005")
        print("| metric | " + " | ".join(f"{s}: rho with RACU (mean MaSF share)" for s in wide.columns) + " |")
        print("|---" * (len(wide.columns) + 1) + "|")
        for metric, row in wide.iterrows():
            print(f"| {metric} | " + " | ".join(f"{row[s]:+.2f} ({share.loc[metric, s]:.0%})" for s in wide.columns) + " |")
    strategies = sorted(table["strategy"].unique())
    if {"masked", "plain"} <= set(strategies):
        print("\nDoes the ranking of the measures change on the plain model? Spearman across measures, masked vs plain:\n")
        print("| metric | rho masked vs plain | MaSF share masked | MaSF share plain |")
        print("|---|---|---|---|")
        agg = table[table["level"].isna() & table["metric"].isin(AGGREGATES)]
        for metric, g in agg.groupby("metric"):
            m = g[g.strategy == "masked"].set_index("measure")
            p = g[g.strategy == "plain"].set_index("measure")
            common = sorted(set(m.index) & set(p.index))
            if len(common) < 3:
                continue
            x, y = m.loc[common, "value"].to_numpy(float), p.loc[common, "value"].to_numpy(float)
            rho = stats.spearmanr(x, y).statistic if np.ptp(x) > 0 and np.ptp(y) > 0 else float("nan")
            print(f"| {metric} | {rho:+.2f} | {m.loc[common, 'p_below_005'].mean():.0%} | "
                  f"{p.loc[common, 'p_below_005'].mean():.0%} |")


def agreement_table(data: pd.DataFrame) -> None:
    part = data[data["method"] == AGREEMENT]
    if part.empty:
        return
    print("\nAgreement between measures (Krishna et al.), mean over inputs and seeds; top 20% by magnitude:\n")
    for strategy, g in part.groupby("strategy"):
        wide = g.pivot_table(index="measure", columns="metric", values="value")
        cols = ["feature_agreement", "sign_agreement", "rank_correlation", "pairwise_rank_agreement"]
        print(f"\n*{strategy}*\n\n| pair | " + " | ".join(cols) + " |\n" + "|---" * (len(cols) + 1) + "|")
        for pair, row in wide.iterrows():
            print(f"| {pair} | " + " | ".join(f"{row[c]:.2f}" for c in cols) + " |")


def sanity_tables(run: str) -> None:
    data = evaluation_store().load(run)
    if data.empty:
        return
    print(f"\nSanity checks (`{run}`): mean Spearman with the trained model's scores after each stage; the last with "
          "its 95% BCa CI; pass (our rule): CI upper end < 0.5\n")
    for (method, model, strategy), part in data.groupby(["method", "base_model", "strategy"]):
        stages = part.sort_values("step")["stage"].unique().tolist()
        print(f"\n*{method}*, {model} {strategy}, {int(part['n_examples'].iloc[0])} inputs, "
              f"seeds {sorted(int(v) for v in part['seed'].unique())}\n")
        print("| measure | " + " | ".join(stages) + " | CI after full randomisation | passes |")
        print("|---" * (len(stages) + 3) + "|")
        for measure, g in part.groupby("measure"):
            g = g.sort_values("step")
            last = g.iloc[-1]
            print(f"| {measure} | " + " | ".join(f"{v:+.2f}" for v in g["value"]) +
                  f" | [{last['ci_low']:+.2f}, {last['ci_high']:+.2f}] | {'yes' if last['passes'] else 'no'} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--run", required=True)
    parser.add_argument("--racu-run", default=None, help="recursive-masking run of the same model family")
    parser.add_argument("--racu-dir", default=None, help="results store of the RACU run (default: the project's)")
    parser.add_argument("--sanity-run", default=None)
    args = parser.parse_args()
    data = evaluation_store().load(args.run)
    table = evaluation_table(data[data["method"] == ERASURE])
    if not table.empty:
        metric_tables(table)
        ci_tables(table)
        ranking_tables(table, args.racu_run, args.racu_dir)
    agreement_table(data)
    if args.sanity_run:
        sanity_tables(args.sanity_run)


if __name__ == "__main__":
    main()
