"""Stored runs of explanations scored against bAbI's supporting facts (`python -m engine rationales`).

The supporting facts are ground-truth rationales by construction, so plausibility needs no annotator: each
measure explains each input (the gold label, as the faithfulness runs do, so both axes describe one decision)
and its scores over the paragraph's tokens are compared with the tokens of the supporting facts:
- auprc: average precision of the scores ranking supporting-fact tokens first (engine.plausibility.rationales);
- token-f1: token F1 of the top-k tokens, k the cell's mean supporting-fact length in tokens (ERASER's k).

One cell per (model, dataset, measure, seed) in `<results>/rationales/<run>/cells/`, with one row per input and
metric (the per-input values are what a confidence interval over inputs needs) and the provenance record every
sweep writes; cells already there are skipped, so an interrupted run resumes.
"""
from __future__ import annotations

import math
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import pandas as pd

import engine.settings as settings
from engine.errors import InvalidInputError

METHOD = "rationales: bAbI supporting facts"
METRICS = ("auprc", "token-f1")
TARGETS = ("gold", "predicted")


@dataclass(frozen=True)
class RationaleCell:
    model: str  # checkpoint id in models_cache
    dataset: str
    measure: str
    seed: int  # seeds `random` (and the process)
    split: str = "test"
    limit: int | None = None  # first N examples of the split (only those with supporting facts are scored)
    target: str = "gold"  # the class explained: the gold label or the model's prediction

    def key(self) -> dict:
        return {**asdict(self), "kind": "rationales against supporting facts"}


def rationale_store(results_dir: str | os.PathLike | None = None):
    """The ResultsStore of rationale runs: `<results>/rationales`."""
    from engine.results import ResultsStore

    return ResultsStore(Path(results_dir) if results_dir is not None else settings.results_dir() / "rationales")


def compute_rationale_cell(cell: RationaleCell, command: str = "engine.plausibility.rationale_runs",
                           batch_size: int = 16, progress: Callable[[int, int], None] | None = None
                           ) -> tuple[pd.DataFrame, dict]:
    """One cell: per input with supporting facts, the measure's AUPRC and token-F1 against them.

    Returns (rows, provenance): rows [inputs x 2 metrics] with model, seed, dataset, split, measure, strategy,
    base_model, method, step (the input's index in the split), example_uid, metric, value, n_gold (supporting-fact
    tokens), n_tokens (scored tokens), k, n_examples; AUPRC is NaN where an input's supporting facts cover no
    scored token (truncated away)."""
    import torch

    from engine.data import get_dataset
    from engine.importance import get_explainer, seed_options
    from engine.models import load_classifier
    from engine.plausibility.rationales import average_precision, rationale_token_indices, token_prf, top_k
    from engine.runtime import configure, seed_everything
    from engine.sweeps.provenance import provenance

    if cell.target not in TARGETS:
        raise InvalidInputError(f"unknown target {cell.target!r}; use one of {', '.join(TARGETS)}")
    started = time.time()
    configure()
    seed_everything(cell.seed)
    classifier = load_classifier(cell.model)
    dataset = classifier.check_dataset(get_dataset(cell.dataset, classifier.metadata.get("split_seed", 0)))
    indexed = [(i, e) for i, e in enumerate(dataset.split(cell.split)[: cell.limit]) if e.rationale_spans]
    if not indexed:
        raise InvalidInputError(f"no example of {cell.dataset!r} ({cell.split}) carries supporting facts: rationale "
                                f"runs need a dataset with rationale spans (babi-1, babi-2, babi-3)")
    explainer = get_explainer(cell.measure, classifier, memo=False,
                              **seed_options(cell.measure, cell.seed))
    per_input = []  # (index, uid, scores over maskable tokens, gold token indices)
    for start in range(0, len(indexed), batch_size):
        chunk = indexed[start:start + batch_size]
        batch = classifier.batch_of([e for _, e in chunk])
        if cell.target == "gold":
            target = batch.target
        else:
            with torch.no_grad():
                target = classifier.predict_logits(batch).argmax(-1)
        scores = torch.as_tensor(explainer.attribute(batch, target).scores).detach().float().cpu()
        for row, (index, example) in enumerate(chunk):
            keep = batch.maskable[row].cpu()
            gold = rationale_token_indices(batch.offsets[row], keep.tolist(), example.rationale_spans)
            per_input.append((index, example.uid, scores[row][keep].tolist(), gold))
        if progress is not None:
            progress(min(start + batch_size, len(indexed)), len(indexed))
    k = max(1, round(float(np.mean([len(g) for *_, g in per_input]))))
    meta = classifier.metadata
    rows = []
    for index, uid, s, gold in per_input:
        values = {"auprc": average_precision(s, gold) if gold else math.nan, "token-f1": token_prf(top_k(s, k), gold)[2]}
        for metric in METRICS:
            rows.append({"model": cell.model, "seed": cell.seed, "dataset": cell.dataset, "split": cell.split,
                         "measure": cell.measure, "strategy": meta.get("strategy"), "base_model": meta.get("base_model"),
                         "method": METHOD, "schedule": "per input", "step": index, "ratio": math.nan,
                         "example_uid": uid, "metric": metric, "value": float(values[metric]), "p_value": math.nan,
                         "n_gold": len(gold), "n_tokens": len(s), "k": k, "n_examples": len(per_input)})
    record = provenance(command, started, classifier, n_examples=len(per_input),
                        target="gold label" if cell.target == "gold" else "predicted class",
                        measure_options={**explainer.options}, k=k,
                        rationale="supporting facts: character spans mapped to the tokens they overlap")
    return pd.DataFrame(rows), record


def run_rationales(cells: Sequence[RationaleCell], run: str, command: str, results_dir: str | os.PathLike | None = None,
                   batch_size: int = 16, progress: Callable[[RationaleCell, int, int], None] | None = None,
                   cell_done: Callable[[RationaleCell], None] | None = None
                   ) -> tuple[list[RationaleCell], list[RationaleCell]]:
    """Compute and store every cell not yet in the run; returns (computed, skipped).
    progress(cell, done, total): inputs finished in the current cell; cell_done(cell): after each cell, computed
    or skipped."""
    store = rationale_store(results_dir)
    done, skipped = [], []
    for cell in cells:
        if store.has_cell(run, cell.key()):
            skipped.append(cell)
            if cell_done is not None:
                cell_done(cell)
            continue
        rows, record = compute_rationale_cell(
            cell, command=command, batch_size=batch_size,
            progress=None if progress is None else (lambda d, n, c=cell: progress(c, d, n)))
        store.write_cell(run, cell.key(), rows, record)
        done.append(cell)
        if cell_done is not None:
            cell_done(cell)
    return done, skipped


def load_rationales(run: str | None = None, results_dir: str | os.PathLike | None = None) -> pd.DataFrame:
    """Every row of one rationale run (or of all), with a `run` column; empty when there is none."""
    store = rationale_store(results_dir)
    if run is not None and run not in store.runs():
        return pd.DataFrame()
    return store.load(run) if store.runs() else pd.DataFrame()


def by_measure(rows: pd.DataFrame, metric: str = "auprc", n_resamples: int = 2000) -> pd.DataFrame:
    """Per measure: mean of `metric` over inputs with a 95% BCa bootstrap CI over inputs.

    Each input's value is first averaged over the seeds (checkpoints) that scored it, so n counts inputs, not
    input-seed pairs (the seeds' values of one input are not independent). Returns columns measure, value, low,
    high, n (inputs), seeds; sorted by measure."""
    from engine.stats import bootstrap_ci

    cols = ["measure", "value", "low", "high", "n", "seeds"]
    if rows.empty or "metric" not in rows or metric not in set(rows["metric"]):
        return pd.DataFrame(columns=cols)
    if metric not in METRICS:
        raise InvalidInputError(f"unknown rationale metric {metric!r}; use one of {', '.join(METRICS)}")
    part = rows[rows["metric"] == metric].dropna(subset=["value"])
    out = []
    for measure, m in sorted(part.groupby("measure"), key=lambda kv: kv[0]):
        per_input = m.groupby("step")["value"].mean()
        mean, low, high = bootstrap_ci(per_input.to_numpy(), n_resamples=n_resamples)
        out.append({"measure": measure, "value": mean, "low": low, "high": high, "n": len(per_input),
                    "seeds": int(m["seed"].nunique())})
    return pd.DataFrame(out, columns=cols)


def racu_by_measure(racu_rows: pd.DataFrame) -> pd.DataFrame:
    """Per measure (random left out): RACU % with its 95% CI over seeds, from recursive-masking rows of ONE group
    (run, dataset, model, schedule, examples). Columns measure, value, low, high, n (seeds)."""
    from engine.faithfulness.summary import GROUP, area_metrics_table

    cols = ["measure", "value", "low", "high", "n"]
    table = area_metrics_table(racu_rows) if not racu_rows.empty else pd.DataFrame()
    if table.empty:
        return pd.DataFrame(columns=cols)
    if len(table.drop_duplicates([c for c in GROUP if c in table.columns])) > 1:
        raise InvalidInputError("RACU per measure needs rows of one run, dataset, model, schedule and set of examples")
    table = table[table["measure"] != "random"]
    return pd.DataFrame([{"measure": r.measure, "value": r.racu_pct, "low": r.racu_low, "high": r.racu_high,
                          "n": r.seeds} for r in table.itertuples()], columns=cols)


def paired(faith: pd.DataFrame, plaus: pd.DataFrame) -> tuple[pd.DataFrame, float]:
    """(measures on both sides with faith, faith_low, faith_high, faith_n, plaus, plaus_low, plaus_high, plaus_n,
    sorted by measure; Spearman's rho between the two axes over them, NaN with fewer than 3)."""
    from scipy.stats import spearmanr

    f = faith.rename(columns={"value": "faith", "low": "faith_low", "high": "faith_high", "n": "faith_n"})
    p = plaus.rename(columns={"value": "plaus", "low": "plaus_low", "high": "plaus_high", "n": "plaus_n"})
    both = f.merge(p.drop(columns=[c for c in ("seeds",) if c in p.columns]), on="measure", how="inner")
    both = both.sort_values("measure").reset_index(drop=True)
    rho = float(spearmanr(both["faith"], both["plaus"]).statistic) if len(both) >= 3 else float("nan")
    return both, rho


def report_table(racu_run: str, rationale_run: str) -> Callable[[Path], str]:
    """The docs' table: per measure RACU (CI over seeds) beside AUPRC and token-F1 against the supporting facts
    (CI over inputs), rows by RACU, and Spearman's rho between RACU and AUPRC with n."""
    def build(root: Path) -> str:
        from engine.results import ResultsStore

        racu_rows = ResultsStore(root).load(racu_run)
        rows = load_rationales(rationale_run, Path(root) / "rationales")
        if racu_rows.empty or rows.empty:
            raise InvalidInputError(f"faithfulness against plausibility needs the runs {racu_run!r} and "
                                    f"rationales/{rationale_run!r} in {root}")
        rows = rows[rows["model"].isin(set(racu_rows["model"]))]
        both, rho = paired(racu_by_measure(racu_rows), by_measure(rows, "auprc"))
        f1 = by_measure(rows, "token-f1").set_index("measure")

        def ci(v, lo, hi, digits):
            return f"{v:.{digits}f} ({lo:.{digits}f}-{hi:.{digits}f})" if np.isfinite(lo) and np.isfinite(hi) \
                else f"{v:.{digits}f}"

        lines = ["| measure | RACU % (95% CI over seeds) | AUPRC (95% CI over inputs) | token-F1 (95% CI) |",
                 "|---|---|---|---|"]
        for r in both.sort_values("faith", ascending=False).itertuples():
            f = f1.loc[r.measure]
            lines.append(f"| {r.measure} | {ci(r.faith, r.faith_low, r.faith_high, 1)} | "
                         f"{ci(r.plaus, r.plaus_low, r.plaus_high, 3)} | {ci(f.value, f.low, f.high, 3)} |")
        n_inputs = int(both["plaus_n"].max()) if len(both) else 0
        seeds = int(both["faith_n"].max()) if len(both) else 0
        rho_text = f"{rho:.2f}" if np.isfinite(rho) else "undefined"
        lines.append("")
        lines.append(f"Spearman's rho between RACU and AUPRC over the {len(both)} measures: {rho_text} "
                     f"({seeds} seeds, AUPRC over {n_inputs} inputs; `random` is RACU's baseline and not a row).")
        return "\n".join(lines)

    return build
