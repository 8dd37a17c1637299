"""Summaries of tidy benchmark rows (the results store's format): ACU/RACU per seed against the
random baseline of the same seed, then mean and BCa CI over seeds; curves with CI bands per step."""
from __future__ import annotations

import numpy as np
import pandas as pd

from engine.errors import InvalidInputError
from engine.faithfulness.metrics import acu, racu
from engine.stats import bootstrap_ci, paired_comparison

# method: recursive masking, roar, recursive-roar; n_examples: the first n examples of the split a curve
# averages over (a beam subset and the whole split are different examples, so each has its own baseline).
# schedule: ratio / quantile / "count 0..N" (the x-axis; count rows store k / N as `ratio`, see schedule_columns).
# grid: the cell's levels as a string (ResultsStore adds it), so curves on different grids are never pooled.
# split: the examples are those of this split (a validation-split sweep in the same run is another experiment).
GROUP = ["dataset", "split", "base_model", "strategy", "method", "schedule", "n_examples", "grid"]


def _group_columns(df: pd.DataFrame) -> list[str]:
    return [c for c in GROUP if c in df.columns]


def preferred_example_set(df: pd.DataFrame) -> int:
    """The n_examples a reader should see first when a run holds several: the most seeds, then the most measures,
    then the most examples (a whole split computed for one seed so far must not hide a 3-seed subset with CIs)."""
    sizes = df.dropna(subset=["n_examples"]).groupby("n_examples").agg(seeds=("seed", "nunique"), measures=("measure", "nunique"))
    if sizes.empty:
        raise InvalidInputError("no rows with n_examples")
    best = max(sizes.itertuples(), key=lambda r: (r.seeds, r.measures, r.Index))
    return int(best.Index)


def area_metrics_per_seed(df: pd.DataFrame, baseline: str = "random") -> pd.DataFrame:
    """One row per (group, measure, seed) with ACU, RACU and RACU clipped to [-1, 1] (R-ROAR's variant),
    each measure compared with the `baseline` measure of the same seed and group."""
    rows = []
    keys = _group_columns(df)
    for group, part in df.groupby(keys + ["seed"], dropna=False):
        if "model" in part.columns and part["model"].nunique() > 1:
            # Two checkpoints of one encoder, strategy and seed (e.g. two --model-template values in one run) are
            # two experiments: pooling them would pair curves at random and repeat steps in one curve.
            where = ", ".join(f"{k}={v}" for k, v in zip(keys + ["seed"], group))
            raise InvalidInputError(f"one run holds several checkpoints for the same group and seed ({where}): "
                             f"{sorted(part['model'].unique())}; write each to its own --run")
        base = part[part["measure"] == baseline].sort_values("ratio")
        if base.empty:
            continue
        for measure, curve in part.groupby("measure"):
            curve = curve.sort_values("ratio")
            if not np.array_equal(curve["ratio"].to_numpy(), base["ratio"].to_numpy()):
                continue
            x, p, b = curve["ratio"].to_numpy(float), curve["value"].to_numpy(float), base["value"].to_numpy(float)
            rows.append({**dict(zip(keys + ["seed"], group)), "measure": measure, "acu": acu(x, p, b),
                         "racu": racu(x, p, b), "racu_clipped": racu(x, p, b, clip=True)})
    return pd.DataFrame(rows)


def area_metrics_table(df: pd.DataFrame, baseline: str = "random") -> pd.DataFrame:
    """Mean over seeds with 95% BCa bootstrap CIs of ACU and RACU (in %), per group and measure; the `acu_ci`
    and `racu_ci` columns name each interval (BCa, percentile where BCa is undefined, none for one seed)."""
    per_seed = area_metrics_per_seed(df, baseline)
    if per_seed.empty:
        return per_seed
    keys = _group_columns(per_seed)
    out = []
    for group, part in per_seed.groupby(keys + ["measure"], dropna=False):
        row = dict(zip(keys + ["measure"], group))
        for col in ("acu", "racu", "racu_clipped"):
            mean, low, high, used = bootstrap_ci(part[col].to_numpy() * 100, n_resamples=2000, with_method=True)
            row.update({f"{col}_pct": mean, f"{col}_low": low, f"{col}_high": high})
            if col != "racu_clipped":
                row[f"{col}_ci"] = used  # BCa, or what stood in for it (one seed has no interval)
        row["seeds"] = int(part["seed"].nunique())
        out.append(row)
    return pd.DataFrame(out).sort_values(keys + ["racu_pct"], ascending=[True] * len(keys) + [False])


def compare_measures(df: pd.DataFrame, a: str, b: str, metric: str = "racu", baseline: str = "random") -> dict:
    """Paired comparison of measures `a` and `b` over the seeds both have, on rows of one group (one view of
    the Benchmarks page): mean of a - b in % of `metric` (acu, racu or racu_clipped) with a 95% BCa CI, the exact
    sign-flip p-value, and the smallest p-value n seeds can give (2 / 2^n: 0.25 with 3 seeds; beyond 12 seeds the
    test samples 9,999 sign flips, whose floor is about 2e-4). A seed where either is NaN (a flat random curve
    makes RACU undefined) is left out; with no seed left, the result says so with n = 0 and NaNs."""
    per_seed = area_metrics_per_seed(df, baseline)
    if per_seed.empty:
        raise InvalidInputError(f"no {metric} to compare: the rows have no `{baseline}` baseline")
    keys = _group_columns(per_seed)
    if len(per_seed.drop_duplicates(keys)) > 1:
        raise InvalidInputError("compare measures within one group (dataset, split, model, method, examples, levels)")
    table = per_seed.pivot_table(index="seed", columns="measure", values=metric, dropna=False)
    missing = [m for m in (a, b) if m not in table.columns]
    if missing:
        raise InvalidInputError(f"no {metric} for {', '.join(missing)} in these rows")
    both = table[[a, b]].dropna()
    result = paired_comparison(both[a].to_numpy() * 100, both[b].to_numpy() * 100)
    n = len(both)
    floor = float("nan") if n == 0 else (2.0 / 2 ** n if n <= 12 else 2.0 / 10_000)
    return {**result, "metric": metric, "a": a, "b": b, "seeds": [int(s) for s in both.index],
            "smallest_p_possible": floor}


def curve_bands(df: pd.DataFrame) -> pd.DataFrame:
    """Per (group, measure, ratio): mean over seeds and a 95% bootstrap band (percentile)."""
    keys = _group_columns(df) + ["measure", "ratio"]
    out = []
    for group, part in df.groupby(keys, dropna=False):
        mean, low, high = bootstrap_ci(part["value"].to_numpy(), n_resamples=1000, method="percentile")
        out.append({**dict(zip(keys, group)), "mean": mean, "low": low, "high": high, "seeds": len(part)})
    return pd.DataFrame(out)
