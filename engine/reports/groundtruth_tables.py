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

OPERATOR_LABELS = {"mask": "[MASK]", "delete": "delete", "unk": "[UNK]", "pad": "[PAD]", "redacted": "[REDACTED]",
                   "retrieval": "retrieval infill", "mlm": "MLM infill"}


def _load(root: Path, run: str) -> pd.DataFrame:
    from engine.groundtruth.card import card_store

    store = card_store(root / "groundtruth")
    if not (store.root / run / "cells").is_dir():
        return pd.DataFrame()
    return store.load(run)


#: judge_table per (results root, run), under the run's file fingerprint: three tables per operator read it, and it
#: was the costliest part of `report` (bootstrap CIs for every metric, model, operator and wrong explanation)
_JUDGES: dict[tuple[str, str], tuple[tuple, pd.DataFrame]] = {}


def _judges(root: Path, run: str, data: pd.DataFrame) -> pd.DataFrame:
    """judge_table of the run's rows `data` (as `_load(root, run)` gave them), computed once per file fingerprint."""
    from engine.groundtruth.card import card_store
    from engine.groundtruth.tables import judge_table

    # wrong_cis=False: the tables show the CIs of the pooled rows only (wrong_markdown: the per-wrong means)
    if root is None:  # rows handed in directly (no store to fingerprint): nothing to memoise under
        return judge_table(data, wrong_cis=False)
    key = (str(Path(root).resolve()), run)
    fingerprint = card_store(root / "groundtruth").run_fingerprint(run)
    hit = _JUDGES.get(key)
    if hit is None or hit[0] != fingerprint:
        hit = _JUDGES[key] = (fingerprint, judge_table(data, wrong_cis=False))
    return hit[1].copy()


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

        table = recovery_table(_load(root, run), cis=False)  # the table shows MRR's mean, not its CI
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


def _metric_rows(run: str, select: Callable[[pd.DataFrame], tuple[pd.DataFrame, str, str] | str],
                 cell: Callable[[pd.DataFrame], str]) -> Callable[[Path], str]:
    """The one builder of the tables with a row per judge metric (JUDGE_ORDER, labelled as in the card) and a
    column per value of some column (the planted models, or the wrong explanations).

    Args:
        run: the report-card run in <results>/groundtruth/.
        select: (the run's rows, a function giving their judge_table) -> (rows with 'metric', 'label' and the column,
            that column's name, the caption above the table), or the line that says why there is no table.
        cell: the rows of one (metric, column value), never empty -> the cell's text ("—" where there are none).
    """

    def build(root: Path) -> str:
        from engine.groundtruth.tables import JUDGE_ORDER, in_order

        data = _load(root, run)
        chosen = select(data, lambda: _judges(root, run, data))
        if isinstance(chosen, str):
            return chosen
        part, column, caption = chosen
        values = list(dict.fromkeys(part[column]))
        heads = [_short(v) for v in values] if column == "model" else values
        lines = [caption, "| metric | " + " | ".join(heads) + " |", "|---" * (len(values) + 1) + "|"]
        # the rows of each (metric, column value), split once (a boolean selection per cell was most of the time)
        by_metric = {metric: dict(tuple(g.groupby(column, sort=False)))
                     for metric, g in part.groupby("metric", sort=False)}
        for metric in in_order(JUDGE_ORDER, part["metric"]):
            rows = by_metric[metric]
            cells = [cell(rows[v]) if v in rows else "—" for v in values]
            lines.append(f"| {next(iter(rows.values()))['label'].iloc[0]} | " + " | ".join(cells) + " |")
        return "\n".join(lines)

    return build


def _one(template: str) -> Callable[[pd.DataFrame], str]:
    """A cell of a table with one row per (metric, model): `template` (str.format) filled from that row."""
    return lambda rows: template.format(**rows.iloc[0].to_dict())


def judge_markdown(run: str, operator: str = "mask") -> Callable[[Path], str]:
    """Metrics x planted models under one operator: share of inputs on which the metric prefers the true
    explanation over the hard wrong ones (pooled; 50% = chance; higher better), bootstrap 95% CI, MaSF share."""

    def select(data: pd.DataFrame, judges: Callable[[], pd.DataFrame]):
        table = judges()
        if table.empty:
            return f"(no judge cells in results/groundtruth/{run} yet)"
        part = table[(table["wrong"] == "all") & (table["operator"] == operator)]
        if part.empty:
            return f"(no {operator} cells in results/groundtruth/{run} yet)"
        return part, "model", (
            f"Operator {OPERATOR_LABELS.get(operator, operator)}: share of inputs (x wrong explanations) on which the "
            f"metric prefers the true explanation (higher better; 50% = chance), 95% bootstrap CI, its effect size "
            f"d_z (Cohen's paired d of the true explanation's value over the wrong ones', positive favours the "
            f"truth; * where the win rate differs from chance at a 5% false discovery rate, Benjamini-Hochberg over "
            f"every row of the judge table), [MaSF share p<0.05 of its perturbed inputs].\n")

    def cell(rows: pd.DataFrame) -> str:
        r = rows.iloc[0]
        share = f" [{r['masf_share']:.0%}]" if np.isfinite(r["masf_share"]) else ""
        dz = r.get("d_z", float("nan"))
        effect = "" if np.isnan(dz) else f", d_z {'∞' if dz > 0 else '-∞'}" if np.isinf(dz) else f", d_z {dz:.1f}"
        star = "*" if r.get("q_bh", 1.0) < 0.05 else ""
        return f"{r['prefers_true']:.0%} ({r['low']:.0%}-{r['high']:.0%}){effect}{star}{share}"

    return _metric_rows(run, select, cell)


def wrong_markdown(run: str, operator: str = "mask") -> Callable[[Path], str]:
    """Per wrong explanation (pooled over models): the share preferring the true explanation, per metric."""

    def select(data: pd.DataFrame, judges: Callable[[], pd.DataFrame]):
        table = judges()
        part = table[(table["wrong"] != "all") & (table["operator"] == operator)] if not table.empty else table
        if part.empty:
            return f"(no judge cells in results/groundtruth/{run} yet)"
        return part, "wrong", (
            f"Operator {OPERATOR_LABELS.get(operator, operator)}, every model pooled (mean of per-model shares, "
            f"higher better): which wrong explanation fools which metric.\n")

    return _metric_rows(run, select, lambda rows: f"{rows['prefers_true'].mean():.0%} ({len(rows)} models)")


def spearman_markdown(run: str, operator: str = "mask") -> Callable[[Path], str]:
    """Metrics x planted models: Spearman of the metric's ranking of the measures with the ground-truth ranking."""

    def select(data: pd.DataFrame, judges: Callable[[], pd.DataFrame]):
        from engine.groundtruth.tables import spearman_table

        table = spearman_table(data)
        part = table[table["operator"] == operator] if not table.empty else table
        if part.empty:
            return f"(no measure cells in results/groundtruth/{run} yet)"
        n = int(part["n_measures"].max())
        return part, "model", (
            f"Operator {OPERATOR_LABELS.get(operator, operator)}: Spearman's rho between each metric's ranking of the "
            f"{n} measures and their ranking by the truth (mean reciprocal rank of the planted word(s); none: the "
            f"inert word's attribution share, lower better), 95% bootstrap CI over inputs (higher better).\n")

    return _metric_rows(run, select, _one("{spearman:.2f} ({low:.2f} to {high:.2f})"))


def operator_markdown(run: str) -> Callable[[Path], str]:
    """Metrics x planted models: share of (input, wrong explanation) verdicts that change with the operator."""

    def select(data: pd.DataFrame, judges: Callable[[], pd.DataFrame]):
        from engine.groundtruth.tables import operator_table

        table = operator_table(data)
        if table.empty:
            return f"(fewer than two operators in results/groundtruth/{run} yet)"
        ops = " / ".join(OPERATOR_LABELS.get(o, o) for o in dict.fromkeys(judges()["operator"]))
        return table, "model", (
            f"Share of (input, wrong explanation) verdicts that change between the operators ({ops}; lower = the "
            f"verdict does not hinge on how tokens are removed), Wilson 95% CI. NAOPC and F-Fidelity replace "
            f"tokens, so their rows compare the replacement operators only.\n")

    return _metric_rows(run, select, _one("{changed:.0%} ({low:.0%}-{high:.0%})"))


def cost_markdown(run: str) -> Callable[[Path], str]:
    """CPU seconds of each model's card (sum of its cells' recorded process CPU time) by operator, from provenance;
    the truth (what establishing it took, as it recorded it) and the self-explanation cells in columns of their own."""

    def build(root: Path) -> str:
        from engine.groundtruth.card import card_store
        from engine.groundtruth.selfexplain_card import SELF_CARD

        store = card_store(root / "groundtruth")
        if not (store.root / run / "cells").is_dir():
            return f"(no cells in results/groundtruth/{run} yet)"
        rows = []
        for entry in store.provenance(run):
            cell, prov = entry.get("cell", {}), entry.get("provenance", {})
            column = "self-explanations" if cell.get("kind") == SELF_CARD else cell.get("operator", "truth")
            seconds = prov.get("cpu_seconds", prov.get("seconds", 0.0))
            if column == "truth" and "cpu_seconds" in prov.get("options", {}):
                # what establishing the truth took, as recorded with it: truth cells before a5041c3 counted it twice
                seconds = prov["options"]["cpu_seconds"]
            rows.append({"model": cell.get("model"), "operator": column, "seconds": seconds,
                         "machine": prov.get("machine", "")})
        df = pd.DataFrame(rows)
        if df.empty:
            return f"(no cells in results/groundtruth/{run} yet)"
        wide = df.pivot_table(index="model", columns="operator", values="seconds", aggfunc="sum").fillna(0)
        cols = list(wide.columns)
        lines = [f"CPU seconds per model and operator (sum of the cells' process CPU time, one thread; the truth: what "
                 f"establishing it took, counted once; the first card cell of a process computed before the truth "
                 f"was stored beside its checkpoint also holds loading the model and establishing the truth; "
                 f"machine: {df['machine'].iloc[0]}).\n",
                 "| model | " + " | ".join(cols) + " | total |", "|---" * (len(cols) + 2) + "|"]
        for model, r in wide.iterrows():
            lines.append(f"| {_short(model)} | " + " | ".join(f"{r[c]:.0f}" for c in cols) + f" | {r.sum():.0f} |")
        return "\n".join(lines)

    return build


def _ci_cell(share: float, low: float, high: float, k: int, n: int) -> str:
    if not n:
        return "—"
    return f"{share:.0%} ({low:.0%}-{high:.0%}), {k}/{n}"


def selfexplain_markdown(run: str) -> Callable[[Path], str]:
    """Per planted prompted LM and self-explanation kind (engine.groundtruth.selfexplain_card): inputs, the share of
    parsable explanations naming the planted word (Wilson CI), the verdict shares under the published rule and under
    "class changed", and each rule's agreement with the truth (Wilson CI); the directions of better under it."""

    def build(root: Path) -> str:
        from engine.groundtruth.tables import self_explanation_table

        table = self_explanation_table(_load(root, run))
        if table.empty:
            return f"(no self-explanation cells in results/groundtruth/{run} yet)"
        lines = ["| model | self-explanation | inputs | names the planted word (95% CI), k/parsable | "
                 "published rule: faithful / unfaithful / not parsable | agrees with the truth, published (95% CI) | "
                 "class changed: faithful / unfaithful / not parsable | agrees with the truth, class changed (95% CI) |",
                 "|---|---|---|---|---|---|---|---|"]
        for _, r in table.iterrows():
            names = _ci_cell(r["names"], r["names_low"], r["names_high"], r["names_k"], r["names_n"])
            if r["names_metric"] == "names-inert":
                names = f"inert word: {names} (lower better)"
            if r["inert_n"]:
                names += f"; decoy {r['inert']:.0%} (lower better)"
            cells = [_short(r["model"]) + f" ({r['mechanism']})", r["self_explanation"], str(r["n"]), names]
            for rule in ("published", "class_changed"):
                cells.append(f"{r[f'{rule}_faithful']:.0%} / {r[f'{rule}_unfaithful']:.0%} / "
                             f"{r[f'{rule}_not_parsable']:.0%}")
                cells.append(_ci_cell(r[f"agrees_{rule}"], r[f"agrees_{rule}_low"], r[f"agrees_{rule}_high"],
                                      r[f"agrees_{rule}_k"], r[f"agrees_{rule}_n"]))
            lines.append("| " + " | ".join(cells) + " |")
        lines.append(
            "\nOn the deciding inputs the model explains the class it predicts, which the planted word set (the "
            "control: on every input, nothing planted decides). Names the "
            "planted word: share of the parsable explanations whose named words hold a decisive planted word "
            "(attribution) or whose rewrite no longer holds it (redaction, counterfactual); higher better (the "
            "control, and the decoy beside the trigger: the inert word, lower better). Verdict shares are of all "
            "inputs. Published rule: an attribution or redaction is faithful iff the model then abstains "
            "(neutral/unknown), a counterfactual iff the class becomes the opposite one; class changed: faithful iff "
            "the class moved. Agrees with the truth: share of the judged (parsable) inputs whose verdict matches the "
            "truth, faithful iff the explanation removes the decisive planted word(s) (and: either word; or: both); "
            "higher better, — where nothing is planted that decides (the control).")
        return "\n".join(lines)

    return build


def set_truth_markdown(run: str) -> Callable[[Path], str]:
    """Per planted model of a set mechanism: each planted word's own insertion flip (Wilson 95% CI; graded-set) or
    the mechanism's own flips (redundant: one word alone / removed; threshold; cancellation), the deciding inputs and
    the order check, as the truth established them."""

    def build(root: Path) -> str:
        from engine.groundtruth.tables import truth_table

        table = truth_table(_load(root, run))
        if table.empty:
            return f"(no truth cells in results/groundtruth/{run} yet)"
        lines = ["| model | mechanism (words) | the flips that establish it (95% CI) | "
                 "all words inserted | deciding inputs | order check | learned |", "|---|---|---|---|---|---|---|"]
        for _, r in table.iterrows():
            r = r.to_dict()
            words = str(r.get("words") or "").split()
            per = []
            for name, label in (("word_insertion_flip", "alone"), ("single_insertion_flip", "alone"),
                                ("single_removal_flip", "removed from all")):
                per += [f"{w} {label} {_rate(r, f'{name}_{i + 1}')}" for i, w in enumerate(words)
                        if np.isfinite(r.get(f"{name}_{i + 1}", np.nan))]
            for name, label in (("below_threshold_insertion_flip", "below m"), ("at_threshold_insertion_flip", "at m"),
                                ("other_insertion_flip", "the other class's word alone, to its class"),
                                ("both_change", "both together change the prediction")):
                if np.isfinite(r.get(name, np.nan)):
                    per.append(f"{label} {_rate(r, name)}")
            order = "—" if "order_check" not in r or r["order_check"] is None or (
                isinstance(r["order_check"], float) and np.isnan(r["order_check"])) else (
                "passed" if r["order_check"] else "failed")
            lines.append(f"| {_short(r['model'])} | {r['mechanism']} ({' '.join(words)}) | {'; '.join(per) or '—'} | "
                         f"{_rate(r, 'insertion_flip')} | {r.get('n_deciding', 0)} of {r.get('n_inputs', 0)} | "
                         f"{order} | {'yes' if r.get('learned') else 'no'} |")
        return "\n".join(lines)

    return build


def separation_markdown(run: str) -> Callable[[Path], str]:
    """Measures x separation statistics of each set-mechanism model (mean over inputs, bootstrap 95% CI, each beside
    its best possible value), best first by the mechanism's main statistic, then the summary: the main statistic's
    span between the best and the worst non-random measure and whether their CIs are apart."""

    def build(root: Path) -> str:
        from engine.groundtruth.tables import separation_summary, separation_table

        data = _load(root, run)
        table = separation_table(data) if not data.empty else pd.DataFrame()
        if table.empty:
            return f"(no set-mechanism cells in results/groundtruth/{run} yet)"
        out = []
        for model, g in table.groupby("model", sort=False):
            stats = list(dict.fromkeys(g["statistic"]))
            best = {s: g.loc[g["statistic"] == s, "best"].iloc[0] for s in stats}
            out += [f"{_short(model)} ({g['mechanism'].iloc[0]}), higher better:", "",
                    "| measure | " + " | ".join(f"{s} (best {best[s]:.2f})" for s in stats) + " |",
                    "|---|" + "---|" * len(stats)]
            for measure, m in g.groupby("measure", sort=False):
                cells = []
                for s in stats:
                    row = m[m["statistic"] == s]
                    cells.append("—" if row.empty else
                                 f"{row['value'].iloc[0]:.2f} ({row['low'].iloc[0]:.2f} to {row['high'].iloc[0]:.2f})")
                out.append(f"| {measure} | " + " | ".join(cells) + " |")
            out.append("")
        for _, s in separation_summary(data).iterrows():
            out.append(f"{_short(s['model'])}: {s['statistic']} spans {s['span']:.2f} from {s['worst_measure']} "
                       f"{s['worst']:.2f} to {s['best_measure']} {s['best']:.2f} (best possible {s['best_value']:.2f}; "
                       f"{s['n_measures']} measures, random left out); CIs {'apart' if s['apart'] else 'overlap'}.")
        return "\n".join(out).rstrip()

    return build


def interaction_markdown(run: str) -> Callable[[Path], str]:
    """Per planted AND / OR / threshold model: interaction recovery by shapley-interactions (engine.groundtruth.
    interactions): the top pair is the planted pair (Wilson 95% CI), the pair's interaction has theory's sign (AND +,
    OR -; threshold with m < k: theory gives 0, no sign judged), its mean interaction and rank (bootstrap 95% CIs), each
    beside its best possible value."""

    def build(root: Path) -> str:
        from engine.groundtruth.tables import interaction_table

        data = _load(root, run)
        table = interaction_table(data) if not data.empty else pd.DataFrame()
        if table.empty:
            return f"(no interaction cells in results/groundtruth/{run} yet)"

        def ci(v, low, high, fmt):
            return "—" if not np.isfinite(v) else (fmt.format(v) + ("" if not np.isfinite(low) else
                                                                   f" ({fmt.format(low)} to {fmt.format(high)})"))

        lines = ["| model | mechanism (words) | inputs | top pair is the planted pair (best 100%) | expected sign | "
                 "sign as expected (best 100%) | mean interaction, logits | mean rank of the pair (best 1) |",
                 "|---|---|---|---|---|---|---|---|"]
        for _, r in table.iterrows():
            lines.append(f"| {_short(r['model'])} | {r['mechanism']} ({r['words']}) | {r['n']} | "
                         f"{ci(r['top_pair'], r['top_pair_low'], r['top_pair_high'], '{:.0%}')} | {r['expected']} | "
                         f"{'— (theory: 0)' if r['expected'] == '0' else ci(r['sign'], r['sign_low'], r['sign_high'], '{:.0%}')} | "
                         f"{ci(r['value'], r['value_low'], r['value_high'], '{:+.3f}')} | "
                         f"{ci(r['rank'], r['rank_low'], r['rank_high'], '{:.1f}')} |")
        return "\n".join(lines)

    return build
