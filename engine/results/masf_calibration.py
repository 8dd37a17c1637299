"""MaSF's false alarms on fresh masked fine-tunings, before and after cross-fitting (scripts/masf_calibration.py
writes a run; the table in docs/masf.md reads it through here).

A run folder `masf-calibration/<run>/` holds one JSON per checkpoint: the share of its test inputs (masked like
training, so drawn like the calibration inputs) with p < alpha for each of `DIVISIONS` divisions of the calibration
inputs, `before` (one split into three parts, fit version 3) and `after` (the `FOLDS`-fold cross-fit, fit version
4); division 0 is the one the tool fits. Lower false alarms are not better beyond alpha: the target is "at most
alpha", and a smaller spread over divisions is better (the verdict hangs less on the division).
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from engine.errors import InvalidInputError

ALPHA = 0.05
DIVISIONS = 10
FOLDS = 5
FOLDER = "masf-calibration"


def run_folder(run: str, root: str | Path | None = None) -> Path:
    from engine.settings import results_dir

    return Path(root if root is not None else results_dir()) / FOLDER / run


def load_run(run: str, root: str | Path | None = None) -> list[dict]:
    """The run's records, one per checkpoint, sorted by the checkpoint's seed (its id's trailing number)."""
    folder = run_folder(run, root)
    files = sorted(folder.glob("*.json"))
    if not files:
        raise InvalidInputError(f"no MaSF calibration run {run!r} in {folder.parent} (written by scripts/masf_calibration.py)")
    records = [json.loads(f.read_text(encoding="utf-8")) for f in files]

    def seed(record):
        digits = "".join(ch for ch in record["model"].split("-s")[-1] if ch.isdigit())
        return (int(digits) if digits else 0, record["model"])

    return sorted(records, key=seed)


def _t_interval(values) -> str:
    from scipy.stats import t as student

    x = np.asarray(values, dtype=float)
    half = student.ppf(0.975, len(x) - 1) * x.std(ddof=1) / np.sqrt(len(x)) if len(x) > 1 else float("nan")
    return f"{x.mean():.2%} [{x.mean() - half:.2%}, {x.mean() + half:.2%}]"


def report_table(run: str):
    """Per checkpoint: false alarms (p < alpha on inputs drawn like the calibration inputs) as fitted and over the
    divisions, before and after; then the mean over checkpoints with a 95% t-interval, and the spread over divisions."""

    def build(root: Path) -> str:
        records = load_run(run, root)
        alpha = records[0]["alpha"]
        divisions = len(records[0]["before"])
        lines = [f"| model | test inputs | before: as fitted (parts seed 0) | before: {divisions} divisions, mean [min, max] | "
                 f"after: as fitted (fold seed 0) | after: {divisions} divisions, mean [min, max] | all masked flagged, "
                 "before / after (mean) | folds disagree (after) |", "|---|---|---|---|---|---|---|---|"]
        for r in records:
            b = [row["share"] for row in r["before"]]
            a = [row["share"] for row in r["after"]]
            flagged = [np.mean([row["share_all_masked"] for row in r[k]]) for k in ("before", "after")]
            lines.append(f"| {r['model']} | {r['n_test']} | {b[0]:.1%} | {np.mean(b):.1%} [{min(b):.1%}, {max(b):.1%}] | "
                         f"{a[0]:.1%} | {np.mean(a):.1%} [{min(a):.1%}, {max(a):.1%}] | {flagged[0]:.0%} / {flagged[1]:.0%} "
                         f"(n={r['n_all_masked']}) | {r['folds_disagree_share']:.1%} |")
        lines.append("")
        for key, label in (("before", "before (one split, fit v3)"), ("after", f"after ({records[0]['folds']}-fold cross-fit, fit v4)")):
            fitted = [r[key][0]["share"] for r in records]
            every = [np.mean([row["share"] for row in r[key]]) for r in records]
            spread = [np.std([row["share"] for row in r[key]], ddof=1) for r in records]
            width = [max(row["share"] for row in r[key]) - min(row["share"] for row in r[key]) for r in records]
            lines.append(f"- {label}: p < {alpha:g} on {_t_interval(fitted)} of the test inputs as fitted (mean over "
                         f"{len(records)} seeds, 95% t-interval), {_t_interval(every)} averaged over the divisions; "
                         f"spread over the {divisions} divisions of one model: standard deviation {np.mean(spread):.2%} "
                         f"(mean over seeds), max - min {np.mean(width):.2%}")
        versions = sorted({r["provenance"]["code_version"] for r in records})
        lines.append("")
        lines.append(f"`{FOLDER}/{run}`: code {', '.join(versions)}; {records[0]['n_calibration']} calibration inputs "
                     f"(level 3 ranks {records[0]['before'][0]['n_level3']} before, {records[0]['after'][0]['n_level3']} after).")
        return "\n".join(lines)

    return build
