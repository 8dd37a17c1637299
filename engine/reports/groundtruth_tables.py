"""Markdown tables of a report-card run (docs/ground-truth.md): the truth by intervention (flip rates), the measures'
recovery of the planted words, the metrics as judges (a: preference for the true explanation; b: Spearman with the
ground-truth ranking of the measures), and the operators' effect on the verdicts. Each builder takes the results
root and returns the region's markdown; a run not yet computed gives a line saying so (never a silent blank).
"""
from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd

OPERATOR_LABELS = {"mask": "[MASK]", "delete": "delete", "unk": "[UNK]", "pad": "[PAD]", "redacted": "[REDACTED]"}


def _load(root: Path, run: str) -> pd.DataFrame:
    from engine.groundtruth.card import card_store

    store = card_store(root / "groundtruth")
    if not (store.root / run / "cells").is_dir():
        return pd.DataFrame()
    return store.load(run)


def _pct(v: float) -> str:
    return "—" if v is None or not np.isfinite(v) else f"{v:.0%}"


def _rate(row, name: str) -> str:
    v = row.get(name, np.nan)
    if v is None or not np.isfinite(v):
        return "—"
    return f"{v:.0%} ({row.get(name + '_low', np.nan):.0%}-{row.get(name + '_high', np.nan):.0%}, n={int(row.get(name + '_n', 0))})"


def _short(model: str) -> str:
    return model.replace("gt-", "")


def truth_markdown(run: str) -> Callable[[Path], str]:
    """Per planted model: the flip rates that establish the truth (Wilson 95% CIs), accuracy on carriers and clean
    inputs, deciding inputs, learned or not."""

    def build(root: Path) -> str:
        from engine.groundtruth.tables import truth_table

        table = truth_table(_load(root, run))
        if table.empty:
            return f"(no truth cells in results/groundtruth/{run} yet)"
        lines = ["| model | mechanism (words, q) | strategy | insertion flip (95% CI) | removal flip on carriers | "
                 "accuracy carriers / clean | mechanism-specific flip | deciding inputs | learned |",
                 "|---|---|---|---|---|---|---|---|---|"]
        for _, r in table.iterrows():
            r = r.to_dict()
            special = []
            for name, label in (("single_removal_flip_first", "one word removed (1st)"),
                                ("single_removal_flip_second", "(2nd)"), ("outside_gate_flip", "outside gate"),
                                ("decoy_removal_flip", "decoy removed"), ("inert_insertion_flip", "inert inserted")):
                if name in r and np.isfinite(r[name]):
                    special.append(f"{label} {_rate(r, name)}")
            q = f", q={r['q']:g}" if r.get("mechanism") == "graded" else ""
            ins = _rate(r, "insertion_flip") if "insertion_flip" in r else "— (control)"
            lines.append(f"| {_short(r['model'])} | {r['mechanism']} ({r['words']}{q}) | {r['strategy']} | {ins} | "
                         f"{_rate(r, 'removal_flip')} | {_pct(r.get('accuracy_carriers', np.nan))} / "
                         f"{_pct(r.get('accuracy_clean', np.nan))} | {'; '.join(special) or '—'} | "
                         f"{r.get('n_deciding', 0)} of {r.get('n_inputs', 0)} | {'yes' if r.get('learned') else 'no'} |")
        return "\n".join(lines)

    return build


def recovery_markdown(run: str) -> Callable[[Path], str]:
    """Measures x planted models: top-hit rate (the planted word(s) ranked first; higher better) with its MRR; for
    the decoy and the control, the share ranking the decoy / inert word first (lower better)."""

    def build(root: Path) -> str:
        from engine.groundtruth.tables import recovery_table

        table = recovery_table(_load(root, run))
        if table.empty:
            return f"(no report-card cells in results/groundtruth/{run} yet)"
        models = list(dict.fromkeys(table["model"]))
        lines = ["Top-hit rate (planted word(s) ranked first; higher better) and mean reciprocal rank; decoy / none: "
                 "share ranking the decoy / inert word first (lower better).\n",
                 "| measure | " + " | ".join(_short(m) for m in models) + " |",
                 "|---" * (len(models) + 1) + "|"]
        for measure, g in table.groupby("measure", sort=False):
            g = g.set_index("model")
            cells = []
            for m in models:
                if m not in g.index:
                    cells.append("—")
                    continue
                r = g.loc[m]
                parts = []
                if "top_hit" in r and np.isfinite(r.get("top_hit", np.nan)):
                    parts.append(f"{r['top_hit']:.0%} ({r['top_hit_low']:.0%}-{r['top_hit_high']:.0%}), MRR {r['mrr']:.2f}")
                for name in ("decoy", "inert"):
                    if f"{name}_top1" in r and np.isfinite(r.get(f"{name}_top1", np.nan)):
                        parts.append(f"{name} first {r[f'{name}_top1']:.0%}")
                cells.append("; ".join(parts) or "—")
            lines.append(f"| {measure} | " + " | ".join(cells) + " |")
        n = int(table["n"].max()) if "n" in table else 0
        lines.append(f"\nInputs per model: up to {n} deciding test inputs (each model's count is in the truth table).")
        return "\n".join(lines)

    return build


def judge_markdown(run: str, operator: str = "mask") -> Callable[[Path], str]:
    """Metrics x planted models under one operator: share of inputs on which the metric prefers the true
    explanation over the hard wrong ones (pooled; 50% = chance; higher better), bootstrap 95% CI, MaSF share."""

    def build(root: Path) -> str:
        from engine.groundtruth.tables import JUDGE_ORDER, judge_table

        table = judge_table(_load(root, run))
        if table.empty:
            return f"(no judge cells in results/groundtruth/{run} yet)"
        part = table[(table["wrong"] == "all") & (table["operator"] == operator)]
        if part.empty:
            return f"(no {operator} cells in results/groundtruth/{run} yet)"
        models = list(dict.fromkeys(part["model"]))
        lines = [f"Operator {OPERATOR_LABELS.get(operator, operator)}: share of inputs (x wrong explanations) on which the "
                 f"metric prefers the true explanation (higher better; 50% = chance), 95% bootstrap CI, [MaSF share "
                 f"p<0.05 of its perturbed inputs].\n",
                 "| metric | " + " | ".join(_short(m) for m in models) + " |", "|---" * (len(models) + 1) + "|"]
        for metric in [m for m in JUDGE_ORDER if m in set(part["metric"])]:
            g = part[part["metric"] == metric].set_index("model")
            cells = []
            for m in models:
                if m not in g.index:
                    cells.append("—")
                    continue
                r = g.loc[m]
                share = f" [{r['masf_share']:.0%}]" if np.isfinite(r["masf_share"]) else ""
                cells.append(f"{r['prefers_true']:.0%} ({r['low']:.0%}-{r['high']:.0%}){share}")
            lines.append(f"| {g['label'].iloc[0]} | " + " | ".join(cells) + " |")
        return "\n".join(lines)

    return build


def wrong_markdown(run: str, operator: str = "mask") -> Callable[[Path], str]:
    """Per wrong explanation (pooled over models): the share preferring the true explanation, per metric."""

    def build(root: Path) -> str:
        from engine.groundtruth.tables import JUDGE_ORDER, judge_table

        table = judge_table(_load(root, run))
        part = table[(table["wrong"] != "all") & (table["operator"] == operator)] if not table.empty else table
        if part.empty:
            return f"(no judge cells in results/groundtruth/{run} yet)"
        wrongs = list(dict.fromkeys(part["wrong"]))
        lines = [f"Operator {OPERATOR_LABELS.get(operator, operator)}, every model pooled (mean of per-model shares, "
                 f"higher better): which wrong explanation fools which metric.\n",
                 "| metric | " + " | ".join(wrongs) + " |", "|---" * (len(wrongs) + 1) + "|"]
        for metric in [m for m in JUDGE_ORDER if m in set(part["metric"])]:
            g = part[part["metric"] == metric]
            cells = []
            for w in wrongs:
                gw = g[g["wrong"] == w]
                cells.append(f"{gw['prefers_true'].mean():.0%} ({len(gw)} models)" if len(gw) else "—")
            lines.append(f"| {g['label'].iloc[0]} | " + " | ".join(cells) + " |")
        return "\n".join(lines)

    return build


def spearman_markdown(run: str, operator: str = "mask") -> Callable[[Path], str]:
    """Metrics x planted models: Spearman of the metric's ranking of the measures with the ground-truth ranking."""

    def build(root: Path) -> str:
        from engine.groundtruth.tables import JUDGE_ORDER, spearman_table

        table = spearman_table(_load(root, run))
        part = table[table["operator"] == operator] if not table.empty else table
        if part.empty:
            return f"(no measure cells in results/groundtruth/{run} yet)"
        models = list(dict.fromkeys(part["model"]))
        n = int(part["n_measures"].max())
        lines = [f"Operator {OPERATOR_LABELS.get(operator, operator)}: Spearman's rho between each metric's ranking of the "
                 f"{n} measures and their ranking by the truth (mean reciprocal rank of the planted word(s); none: the "
                 f"inert word's attribution share, lower better), 95% bootstrap CI over inputs (higher better).\n",
                 "| metric | " + " | ".join(_short(m) for m in models) + " |", "|---" * (len(models) + 1) + "|"]
        for metric in [m for m in JUDGE_ORDER if m in set(part["metric"])]:
            g = part[part["metric"] == metric].set_index("model")
            cells = [f"{g.loc[m, 'spearman']:.2f} ({g.loc[m, 'low']:.2f} to {g.loc[m, 'high']:.2f})" if m in g.index
                     else "—" for m in models]
            lines.append(f"| {g['label'].iloc[0]} | " + " | ".join(cells) + " |")
        return "\n".join(lines)

    return build


def operator_markdown(run: str) -> Callable[[Path], str]:
    """Metrics x planted models: share of (input, wrong explanation) verdicts that change with the operator."""

    def build(root: Path) -> str:
        from engine.groundtruth.tables import JUDGE_ORDER, judge_table, operator_table

        data = _load(root, run)
        table = operator_table(data)
        if table.empty:
            return f"(fewer than two operators in results/groundtruth/{run} yet)"
        models = list(dict.fromkeys(table["model"]))
        judges = judge_table(data)
        ops = " / ".join(OPERATOR_LABELS.get(o, o) for o in dict.fromkeys(judges["operator"]))
        lines = [f"Share of (input, wrong explanation) verdicts that change between the operators ({ops}; lower = the "
                 f"verdict does not hinge on how tokens are removed), Wilson 95% CI. NAOPC and F-Fidelity replace "
                 f"tokens, so their rows compare the replacement operators only.\n",
                 "| metric | " + " | ".join(_short(m) for m in models) + " |", "|---" * (len(models) + 1) + "|"]
        for metric in [m for m in JUDGE_ORDER if m in set(table["metric"])]:
            g = table[table["metric"] == metric].set_index("model")
            cells = [f"{g.loc[m, 'changed']:.0%} ({g.loc[m, 'low']:.0%}-{g.loc[m, 'high']:.0%})" if m in g.index
                     else "—" for m in models]
            lines.append(f"| {g['label'].iloc[0]} | " + " | ".join(cells) + " |")
        return "\n".join(lines)

    return build


def cost_markdown(run: str) -> Callable[[Path], str]:
    """CPU seconds of each model's card (sum of its cells' recorded process CPU time) by operator, from provenance."""

    def build(root: Path) -> str:
        from engine.groundtruth.card import card_store

        store = card_store(root / "groundtruth")
        if not (store.root / run / "cells").is_dir():
            return f"(no cells in results/groundtruth/{run} yet)"
        rows = []
        for entry in store.provenance(run):
            cell, prov = entry.get("cell", {}), entry.get("provenance", {})
            rows.append({"model": cell.get("model"), "operator": cell.get("operator", "truth"),
                         "seconds": prov.get("cpu_seconds", prov.get("seconds", 0.0)), "machine": prov.get("machine", "")})
        df = pd.DataFrame(rows)
        if df.empty:
            return f"(no cells in results/groundtruth/{run} yet)"
        wide = df.pivot_table(index="model", columns="operator", values="seconds", aggfunc="sum").fillna(0)
        cols = list(wide.columns)
        lines = [f"CPU seconds per model and operator (sum of the cells' process CPU time, one thread; "
                 f"machine: {df['machine'].iloc[0]}).\n",
                 "| model | " + " | ".join(cols) + " | total |", "|---" * (len(cols) + 2) + "|"]
        for model, r in wide.iterrows():
            lines.append(f"| {_short(model)} | " + " | ".join(f"{r[c]:.0f}" for c in cols) + f" | {r.sum():.0f} |")
        return "\n".join(lines)

    return build
