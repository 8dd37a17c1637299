"""Faithfulness against forward passes of the budgeted searches (scripts/experiments/budget_pareto.py writes the run; the report
table in docs/budgeted-search.md and the Benchmarks page's Pareto view read it through here).

A run folder holds `points.csv`: one row per (input, method point) with the passes the method spent (`forwards`),
the full-curve AOPC of its order, the input's AOPC bounds (`lower`, `upper`, `bounds_exact`) and `correct_0` ..
`correct_10`: whether the input is still classified correctly with the first floor(r N) tokens of the order masked,
r = 0, 0.1, ..., 1 (the `random` rows hold the mean over random orders). From these:
- NAOPC per input = (AOPC - L) / (U - L) (0 when U = L), averaged, with a 95% BCa bootstrap CI over inputs;
- RACU = the area between the random and the method's accuracy curves over the inputs, relative to the random
  curve's area above its end (engine.faithfulness.metrics.racu), with a 95% percentile bootstrap CI that
  resamples inputs (the same resample for the method and random).
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd

from engine.errors import InvalidInputError

POINTS = "points.csv"
PROVENANCE = "provenance.json"
RATIOS = np.array([i / 10 for i in range(11)])
CORRECT = [f"correct_{k}" for k in range(11)]
BEAM_CURVE = ("loo", "greedy-loo", "beam-2", "beam-5", "beam-10", "beam-20")  # the points of beam's cost curve
METRICS = {"racu": "RACU %", "naopc": "NAOPC", "aopc": "AOPC"}


def load_run(run: str, root: str | Path | None = None) -> tuple[pd.DataFrame, dict]:
    """(points, provenance) of a run folder under the results root (default: the project's results/)."""
    from engine.settings import results_dir

    folder = Path(root if root is not None else results_dir()) / run
    if not (folder / POINTS).is_file():
        raise InvalidInputError(f"no budget run {run!r} in {folder.parent}: expected {folder / POINTS} "
                                "(written by scripts/experiments/budget_pareto.py)")
    table = pd.read_csv(folder / POINTS)
    provenance = json.loads((folder / PROVENANCE).read_text()) if (folder / PROVENANCE).is_file() else {}
    return table, provenance


def naopc_values(table: pd.DataFrame) -> np.ndarray:
    """Per row: (aopc - lower) / (upper - lower), 0 where upper = lower."""
    span = (table["upper"] - table["lower"]).to_numpy(float)
    flat = np.abs(span) <= 1e-12
    return np.where(flat, 0.0, (table["aopc"].to_numpy(float) - table["lower"].to_numpy(float)) / np.where(flat, 1.0, span))


def _racu_rows(curves: np.ndarray, base: np.ndarray) -> np.ndarray:
    """RACU of accuracy curves [R, 11] against random curves [R, 11] (row by row); NaN where random is flat."""
    dx = np.diff(RATIOS)

    def area(y):
        return np.sum(0.5 * dx * (y[:, :-1] + y[:, 1:]), axis=1)

    norm = area(base - base[:, -1:])
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(np.abs(norm) < 1e-12, np.nan, area(base - curves) / norm)


def racu_with_ci(correct: np.ndarray, random: np.ndarray, n_resamples: int = 2000, seed: int = 0
                 ) -> tuple[float, float, float]:
    """RACU (fraction) of per-input correctness [n, 11] against the random baseline's [n, 11] (same inputs, same
    order), with a 95% percentile bootstrap CI over inputs. Fewer than 2 inputs: no interval (NaN bounds)."""
    correct, random = np.asarray(correct, float), np.asarray(random, float)
    if correct.shape != random.shape or correct.ndim != 2 or correct.shape[1] != len(RATIOS):
        raise InvalidInputError(f"correctness tables must both be [inputs, {len(RATIOS)}], got {correct.shape} and {random.shape}")
    value = float(_racu_rows(correct.mean(0)[None], random.mean(0)[None])[0])
    n = len(correct)
    if n < 2:
        return value, float("nan"), float("nan")
    idx = np.random.default_rng(seed).integers(0, n, size=(n_resamples, n))
    boot = _racu_rows(correct[idx].mean(1), random[idx].mean(1))
    boot = boot[np.isfinite(boot)]
    if boot.size == 0:
        return value, float("nan"), float("nan")
    low, high = np.percentile(boot, [2.5, 97.5])
    return value, float(low), float(high)


def summarise(table: pd.DataFrame, n_resamples: int = 2000) -> pd.DataFrame:
    """One row per method point (method, multiple): inputs, mean forwards per input, mean forwards / G (greedy's
    cost N(N+1)/2 + 1), AOPC, NAOPC with its CI, RACU % with its CI, the share that ran to completion."""
    from engine.stats import bootstrap_ci

    need = {"input", "method", "multiple", "forwards", "aopc", "lower", "upper", "n_tokens", *CORRECT}
    missing = sorted(need - set(table.columns))
    if missing:
        raise InvalidInputError(f"budget points lack the columns {', '.join(missing)}")
    random = table[table["method"] == "random"].set_index("input").sort_index()
    if random.empty:
        raise InvalidInputError("budget points have no `random` rows: RACU compares against them")
    table = table.assign(naopc=naopc_values(table))
    rows = []
    for (method, multiple), part in table[table["method"] != "random"].groupby(["method", "multiple"], sort=False):
        part = part.set_index("input").sort_index()
        base = random.loc[part.index]
        racu, r_lo, r_hi = racu_with_ci(part[CORRECT].to_numpy(), base[CORRECT].to_numpy(), n_resamples)
        na, na_lo, na_hi = bootstrap_ci(part["naopc"].to_numpy(), n_resamples=n_resamples)
        g = part["n_tokens"] * (part["n_tokens"] + 1) // 2 + 1
        rows.append({"method": method, "multiple": float(multiple), "inputs": len(part),
                     "forwards": float(part["forwards"].mean()), "forwards_per_g": float((part["forwards"] / g).mean()),
                     "aopc": float(part["aopc"].mean()), "naopc": na, "naopc_low": na_lo, "naopc_high": na_hi,
                     "racu": racu * 100, "racu_low": r_lo * 100, "racu_high": r_hi * 100,
                     "complete": float(part["complete"].mean()) if "complete" in part else float("nan")})
    out = pd.DataFrame(rows)
    return out.sort_values(["forwards", "method"]).reset_index(drop=True)


def label(row) -> str:
    """A method point's name for tables and plots: 'anytime @ 2xG' for a budgeted point, else the method."""
    return f"{row['method']} @ {row['multiple']:g}xG" if row["multiple"] else str(row["method"])


def pareto_front(summary: pd.DataFrame, metric: str = "racu") -> pd.Series:
    """Boolean per row: no other point spends at most as many forwards with at least as high a `metric` and is
    strictly better in one of the two (fewer forwards is better, higher metric is better)."""
    if metric not in summary.columns:
        raise InvalidInputError(f"unknown metric {metric!r}; use one of {', '.join(m for m in METRICS if m in summary.columns)}")
    x, y = summary["forwards"].to_numpy(float), summary[metric].to_numpy(float)
    keep = []
    for i in range(len(x)):
        dominated = np.any((x <= x[i]) & (y >= y[i]) & ((x < x[i]) | (y > y[i])))
        keep.append(not dominated and np.isfinite(y[i]))
    return pd.Series(keep, index=summary.index)


def beam_curve_at(summary: pd.DataFrame, forwards: float, metric: str) -> float:
    """Beam's curve at a budget: the best `metric` among LOO, greedy LOO and the beams whose mean cost is at most
    `forwards` (what a beam user affords with that many passes); NaN below LOO's cost."""
    beams = summary[summary["method"].isin(BEAM_CURVE) & (summary["forwards"] <= forwards + 1e-9)]
    return float(beams[metric].max()) if len(beams) else float("nan")


def anytime_against_beam(summary: pd.DataFrame, metric: str) -> pd.DataFrame:
    """Each anytime point up to beam-20's cost beside beam's curve at its spent forwards: (multiple, forwards,
    anytime, beam, above: anytime >= beam)."""
    limit = summary.loc[summary["method"] == "beam-20", "forwards"]
    cap = float(limit.iloc[0]) if len(limit) else float("inf")
    rows = []
    for r in summary[summary["method"] == "anytime"].itertuples():
        if r.forwards > cap + 1e-9:
            continue
        beam = beam_curve_at(summary, r.forwards, metric)
        value = getattr(r, metric)
        rows.append({"multiple": r.multiple, "forwards": r.forwards, "anytime": value, "beam": beam,
                     "above": bool(np.isfinite(beam) and value >= beam - 1e-12)})
    return pd.DataFrame(rows)


def _ci(v, lo, hi, fmt) -> str:
    if not np.isfinite(v):
        return "—"
    if not (np.isfinite(lo) and np.isfinite(hi)):
        return format(v, fmt)
    return f"{format(v, fmt)} ({format(lo, fmt)}-{format(hi, fmt)})"


def markdown_table(table: pd.DataFrame, provenance: dict, run: str) -> str:
    """The report region of docs/budgeted-search.md: every method point by forwards, then how the anytime search
    stands against beam's curve on each metric."""
    summary = summarise(table)
    front_r, front_n = pareto_front(summary, "racu"), pareto_front(summary, "naopc")
    lines = ["| method | budget (x G) | forward passes per input | AOPC | NAOPC (95% CI) | RACU % (95% CI) | "
             "Pareto front (RACU / NAOPC) |", "|---|---|---|---|---|---|---|"]
    for i, r in summary.iterrows():
        front = " / ".join("yes" if f else "no" for f in (front_r[i], front_n[i]))
        lines.append(f"| {r['method']} | {r['multiple']:g} | {r['forwards']:.0f} ({r['forwards_per_g']:.2f} G) | "
                     f"{r['aopc']:.4f} | {_ci(r['naopc'], r['naopc_low'], r['naopc_high'], '.3f')} | "
                     f"{_ci(r['racu'], r['racu_low'], r['racu_high'], '.1f')} | {front} |")
    n_inputs = int(table["input"].nunique())
    sizes = table.drop_duplicates("input")["n_tokens"]
    exact = table.drop_duplicates("input")["bounds_exact"].mean()
    cfg = provenance.get("config", {})
    lines.append("")
    lines.append(f"`{run}`: {n_inputs} {cfg.get('dataset', '?')} {cfg.get('split', '?')} inputs of "
                 f"{int(sizes.min())}-{int(sizes.max())} tokens (mean {sizes.mean():.1f}), model "
                 f"`{provenance.get('checkpoint', '?')}`, gold label explained; G = N(N+1)/2 + 1 (greedy LOO's cost); "
                 f"exact AOPC bounds on {exact:.0%} of the inputs; budget 0 = the method's own cost.")
    for metric in ("racu", "naopc"):
        versus = anytime_against_beam(summary, metric)
        if versus.empty:
            continue
        below = versus[~versus["above"]]
        where = ("at every budget up to beam-20's cost" if below.empty else
                 "below it at " + ", ".join(f"{m:g} G ({a:.3g} vs {b:.3g})" for m, a, b in
                                            zip(below["multiple"], below["anytime"], below["beam"])))
        lines.append(f"Anytime vs beam's curve ({METRICS[metric]}): at or above it at {int(versus['above'].sum())} of "
                     f"{len(versus)} budgets; {where}.")
    return "\n".join(lines)


def report_table(run: str):
    """A `report` table builder (results root -> markdown) for engine.results.report."""
    def build(root: Path) -> str:
        table, provenance = load_run(run, root)
        return markdown_table(table, provenance, run)

    return build
