"""The standard evaluation suite as resumable sweeps into the results store: erasure metrics (erasure.py) and
sanity checks (engine/sanity), one cell per (checkpoint, dataset, measure, seed), with provenance and cost.

Cells live in their own store, `<results>/evaluation/<run>/cells/` (the same ResultsStore format), so the
recursive-masking pages, which read every run at the top of the results folder, never mistake them for curves.

An erasure cell explains the gold label of every example of a split (as the benchmarks do), ranks its tokens once
by the measure, and computes the erasure metrics with a MaSF p-value for every perturbed input. It records the
wall time per explanation and the forward / forward+backward rows the measure used (counted by a hook on the
model, so every measure is counted the same way), and the time and rows of the metrics themselves.
"""
from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from functools import partial
from pathlib import Path

import numpy as np
import pandas as pd

import engine.settings as settings
from engine.faithfulness.cost import CostMeter, RowCounter, counting_rows
from engine.faithfulness.registry import INFILL_OPERATORS, aggregates, default_evaluate_families
from engine.importance.levels import word_ids_of
from engine.results.store import WHOLE_WORDS
from engine.sweeps import Backend, CellContext, CellResult, SweepReport, provenance, run_cells
from engine.sweeps.cells import shared_lock

ERASURE = "erasure"
FFIDELITY = "f-fidelity"  # the metric family computed by engine/faithfulness/ffidelity.py beside the erasure families
SANITY_MODEL = "sanity: cascading model randomisation"
SANITY_LABELS = "sanity: label randomisation"
SANITY_LOGIT = "sanity: random logit"
SANITY_CHECKS = {"model": SANITY_MODEL, "labels": SANITY_LABELS, "logit": SANITY_LOGIT}


def evaluation_store(results_dir: str | os.PathLike | None = None):
    """The ResultsStore of the evaluation suite: `<results>/evaluation`."""
    from engine.results import ResultsStore

    return ResultsStore(Path(results_dir) if results_dir is not None else settings.results_dir() / "evaluation")


@dataclass(frozen=True)
class EvaluationCell:
    model: str  # checkpoint id in models_cache
    dataset: str
    measure: str
    seed: int  # the model's seed when the id carries it; also seeds `random` and the soft draws
    split: str = "test"
    limit: int | None = None
    removal: str = "mask"
    metrics: tuple[str, ...] = tuple(default_evaluate_families())
    soft_draws: int = 5
    options: tuple[tuple[str, object], ...] = ()
    whole_words: bool = False  # units are whole words (k%, ratios and flips count words); soft metrics stay per token
    naopc: bool = False  # also naopc-comprehensiveness: AOPC normalised by per-input bounds (engine/faithfulness/naopc.py)
    ffidelity: tuple[tuple[str, object], ...] = ()  # F-Fidelity's alpha, beta, draws when 'f-fidelity' is in metrics

    def key(self) -> dict:
        d = asdict(self)
        d["options"] = dict(self.options)
        d["metrics"] = list(self.metrics)
        d["kind"] = ERASURE
        if not self.whole_words:
            del d["whole_words"]  # token-level cells keep the keys they had before whole-word units existed
        if not self.naopc:
            del d["naopc"]  # likewise for cells without NAOPC
        if self.ffidelity:
            d["ffidelity"] = dict(self.ffidelity)
        else:
            del d["ffidelity"]  # and for cells without F-Fidelity
        return d

    @property
    def removal_label(self) -> str:
        """The `removal` column of the cell's rows: how tokens are removed, and ', whole words' for word units
        (so word-level and token-level values are never pooled)."""
        return self.removal + (WHOLE_WORDS if self.whole_words else "")


@dataclass(frozen=True)
class SanityCell:
    model: str
    dataset: str
    measure: str
    seed: int  # seeds the re-initialisation (model check) or the label permutation (labels check)
    check: str = "model"  # "model" (cascading randomisation), "labels" or "logit" (another class explained)
    split: str = "test"
    limit: int | None = 100
    options: tuple[tuple[str, object], ...] = ()

    def key(self) -> dict:
        d = asdict(self)
        d["options"] = dict(self.options)
        d["kind"] = SANITY_CHECKS[self.check]
        return d


def _cell_inputs(cell) -> tuple:
    """Seed the process for `cell` and return (its classifier, the examples of its split, first `limit`), the
    dataset checked against the model's classes."""
    from engine.data import get_dataset
    from engine.models import load_classifier
    from engine.runtime import configure, seed_everything

    configure()
    seed_everything(cell.seed)
    classifier = load_classifier(cell.model)
    dataset = get_dataset(cell.dataset, classifier.meta.split_seed)
    dataset = classifier.check_dataset(dataset)
    return classifier, dataset.split(cell.split)[: cell.limit]


def compute_evaluation_cell(cell: EvaluationCell, context: CellContext, batch_size: int = 32) -> CellResult:
    """Compute one erasure cell.

    Args:
        cell: the EvaluationCell.
        context: command (recorded in provenance), progress(done, total) (examples finished), should_stop.
        batch_size: inputs explained per batch.

    Returns:
        CellResult: one row per (metric, level) with its mean, SD, MaSF share and p-value and the cost; provenance.
    """
    command = context.command or "engine.faithfulness.evaluation.run_evaluation_cell"
    progress, should_stop = context.progress, context.should_stop
    from engine.faithfulness.erasure import erasure_metrics
    from engine.faithfulness.registry import FAMILIES, better, function_families, kernel_families
    from engine.importance import get_explainer, seed_options
    from engine.ood import MaSF, load_or_fit_masf

    if cell.naopc and (cell.whole_words or cell.removal != "mask" or "comprehensiveness" not in cell.metrics):
        from engine.errors import InvalidInputError

        raise InvalidInputError("NAOPC normalises the token-level, [MASK]-removal aopc-comprehensiveness: use removal "
                                "'mask', no whole words, and the comprehensiveness metrics")
    started = time.time()
    classifier, examples = _cell_inputs(cell)
    meta = classifier.meta
    ffid = FFIDELITY in cell.metrics
    if ffid and (cell.whole_words or cell.removal != "mask" or meta.strategy != "masked"):
        from engine.errors import InvalidInputError

        raise InvalidInputError(f"F-Fidelity removes tokens by [MASK] on a model fine-tuned with random removal: use "
                                f"removal 'mask', no whole words and a masked-fine-tuned model ({cell.model!r} is "
                                f"{meta.strategy!r})")
    erasure_families = [m for m in cell.metrics if m in kernel_families()]
    # families computed by a function of their own (the registry's Family.function): per token, every operator
    own = [FAMILIES[m] for m in cell.metrics if m in function_families()]
    wrong_operator = [f.id for f in own if "*" not in f.operators and cell.removal not in f.operators]
    if (own and cell.whole_words) or wrong_operator:
        from engine.errors import InvalidInputError

        if wrong_operator:
            raise InvalidInputError(f"{', '.join(wrong_operator)} cannot remove by {cell.removal!r}: use --operator "
                                    f"mask")
        raise InvalidInputError(f"{', '.join(f.id for f in own)} score(s) tokens, not whole words: drop --whole-words")
    with shared_lock(f"masf-{cell.model}-{cell.dataset}"):  # cells of one checkpoint at once fit it once
        masf = load_or_fit_masf(classifier, cell.dataset)
    # The metrics' classifier: the model itself, or a twin whose removals are filled in (retrieval / MLM infill,
    # engine/faithfulness/infill.py); the measure explains the model itself either way.
    removal, scored = cell.removal, classifier
    if cell.removal in INFILL_OPERATORS:
        from engine.faithfulness.infill import infill_operator

        removal, scored = "mask", infill_operator(classifier, cell.removal, seed=cell.seed)
    options = dict(cell.options)
    explainer = get_explainer(cell.measure, classifier, memo=False,
                              **seed_options(cell.measure, cell.seed), **options)
    order = np.argsort([len(e.primary) + len(e.auxiliary or "") for e in examples], kind="stable")
    parts = []
    metrics_s = 0.0
    meter = CostMeter(classifier.counted_module)
    explain = meter.wrap(explainer.attribute)
    metric_rows = RowCounter()
    lengths = []
    for start in range(0, len(examples), batch_size):
        chunk = [examples[i] for i in order[start:start + batch_size]]
        batch = classifier.batch_of(chunk)
        word_ids = word_ids_of(batch, [e.primary for e in chunk]) if cell.whole_words else None
        lengths += batch.attention_mask.sum(1).tolist()
        importance = explain(batch, batch.target, should_stop=should_stop)
        with counting_rows(classifier.counted_module) as rows:
            t = time.perf_counter()
            parts.append(erasure_metrics(scored, batch, importance.scores, target=batch.target,
                                         metrics=erasure_families, masf=masf, removal=removal,
                                         soft_draws=cell.soft_draws, seed=cell.seed, should_stop=should_stop,
                                         word_ids=word_ids, word_aggregation=getattr(explainer, "word_aggregation", "sum")))
            if cell.naopc:
                from engine.faithfulness.naopc import add_naopc

                add_naopc(parts[-1], classifier, batch, importance.scores, target=batch.target, should_stop=should_stop)
            if ffid:
                from engine.faithfulness.ffidelity import add_ffidelity

                add_ffidelity(parts[-1], classifier, batch, importance.scores, target=batch.target, masf=masf,
                              should_stop=should_stop, **dict(cell.ffidelity))
            for family in own:
                rerun = {"explain": lambda b, t: explainer.attribute(b, t, should_stop=should_stop).scores} \
                    if "measure" in family.needs else {}
                family.load()(scored, batch, importance.scores, target=batch.target, masf=masf,
                              removal=removal, seed=cell.seed, should_stop=should_stop,
                              **rerun).add_to(parts[-1])
            metrics_s += time.perf_counter() - t
        metric_rows.forward += rows.forward
        if progress is not None:
            progress(min(start + batch_size, len(examples)), len(examples))
    cost = meter.summary()
    n = len(examples)
    rows_out = []
    for step, name in enumerate(parts[0].values):
        values = np.concatenate([p.values[name] for p in parts])
        n_pert = np.concatenate([p.n_perturbed[name] for p in parts])
        n_ood = np.concatenate([p.n_ood[name] for p in parts])
        p_values = np.concatenate([p.p_values[name] for p in parts])
        base, _, level = name.partition("@")
        rows_out.append({
            "model": cell.model, "seed": cell.seed, "dataset": cell.dataset, "split": cell.split,
            "measure": cell.measure, "strategy": meta.strategy, "base_model": meta.base_model,
            "method": ERASURE, "removal": cell.removal_label, "step": step, "metric": base,
            "level": float(level) if level else float("nan"), "ratio": float(level) if level else float("nan"),
            "value": float(np.nanmean(values)), "value_sd": float(np.nanstd(values)),
            "n_undefined": int(np.isnan(values).sum()), "better": better(base),
            "p_below_005": float(n_ood.sum() / n_pert.sum()) if n_pert.sum() else float("nan"),
            "p_value": MaSF.dataset_pvalue(p_values) if p_values.size else float("nan"),
            "n_perturbed": int(n_pert.sum()), "n_examples": n,
            "seconds_per_explanation": cost["seconds_per_explanation"],
            "explanation_forward_rows": cost["forward_rows_per_explanation"],
            "explanation_backward_rows": cost["backward_rows_per_explanation"],
            "metric_seconds_per_input": metrics_s / n, "metric_forward_rows": metric_rows.forward / n,
        })
    tidy = pd.DataFrame(rows_out)
    record = provenance(command, started, classifier, masf=masf, n_examples=n, target="gold label", **{
        "measure_options": {**explainer.options}, "removal": cell.removal, "metrics": list(cell.metrics),
        "soft_draws": cell.soft_draws, "soft_seed": cell.seed, "bins": parts[0].options["bins"],
        "curve_ratios": parts[0].options["ratios"],
        **({"naopc": [p.options["naopc"] for p in parts]} if cell.naopc else {}),
        **({"ffidelity": parts[0].options["ffidelity"]} if ffid else {}),
        "cost": {**cost, "metric_seconds": round(metrics_s, 2),
                 "metric_forward_rows": metric_rows.forward, "mean_tokens": float(np.mean(lengths)),
                 "max_tokens": int(np.max(lengths))},
    })
    return CellResult(tidy, record)


def run_evaluation_cell(cell: EvaluationCell, results_dir: str | os.PathLike | None = None, run: str = "default",
                        command: str = "engine.faithfulness.evaluation.run_evaluation_cell", batch_size: int = 32,
                        progress: Callable[[int, int], None] | None = None,
                        should_stop: Callable[[], bool] | None = None) -> dict:
    """Compute one erasure cell in this process and write it to the evaluation store; returns the cell key.
    progress(done, total): examples finished in this cell."""
    return _write(cell, compute_evaluation_cell(cell, CellContext(command, progress, should_stop), batch_size),
                  results_dir, run)


def _write(cell, result: CellResult, results_dir, run: str) -> dict:
    evaluation_store(results_dir).write_cell(run, cell.key(), result.rows, result.provenance)
    return cell.key()


def compute_sanity_cell(cell: SanityCell, context: CellContext) -> CellResult:
    """Compute one sanity cell (one measure, one check) on the first `limit` examples of the split (gold labels
    explained).

    Args:
        cell: the SanityCell.
        context: command, progress(done, total) (stages done, model check), should_stop.

    Returns:
        CellResult: one row per randomisation stage (mean Spearman with its CI) and the provenance.
    """
    command = context.command or "engine.faithfulness.evaluation.run_sanity_cell"
    progress, should_stop = context.progress, context.should_stop
    from engine.sanity import cascading_randomisation, sanity_summary
    from engine.sanity.labels import label_randomisation, train_label_randomised

    started = time.time()
    classifier, examples = _cell_inputs(cell)
    batch = classifier.batch_of(examples)
    options = {cell.measure: dict(cell.options)} if cell.options else {}
    extra = {}
    if cell.check == "model":
        rows = cascading_randomisation(classifier, [cell.measure], batch, target=batch.target, seed=cell.seed,
                                       options=options, progress=progress, should_stop=should_stop)
    elif cell.check == "logit":
        from engine.sanity.random_logit import random_logit

        rows = random_logit(classifier, [cell.measure], batch, target=batch.target, seed=cell.seed, options=options)
    else:
        twin = train_label_randomised(classifier, permutation_seed=cell.seed, should_stop=should_stop)
        extra = {"label_randomised_model": twin.id, "label_randomised_sha256": twin.weights_sha256,
                 "label_randomised_test": twin.meta.test}
        rows = label_randomisation(classifier, twin, [cell.measure], batch, target=batch.target, options=options)
    summary = sanity_summary(rows, seed=cell.seed)
    meta = classifier.meta
    tidy = summary.assign(model=cell.model, seed=cell.seed, dataset=cell.dataset, split=cell.split,
                          strategy=meta.strategy, base_model=meta.base_model,
                          method=SANITY_CHECKS[cell.check], step=summary["stage_index"],
                          ratio=summary["stage_index"] / max(1, summary["stage_index"].max()), metric="spearman",
                          value=summary["spearman"], p_value=float("nan"), n_examples=len(examples), better="lower")
    record = provenance(command, started, classifier, n_examples=len(examples), target="gold label", **{
        "check": cell.check, "measure_options": dict(cell.options), "pass_rule":
        "upper end of the 95% BCa CI of the mean Spearman after full randomisation below 0.5 (ours)", **extra})
    return CellResult(tidy, record)


def run_sanity_cell(cell: SanityCell, results_dir: str | os.PathLike | None = None, run: str = "default",
                    command: str = "engine.faithfulness.evaluation.run_sanity_cell",
                    progress: Callable[[int, int], None] | None = None,
                    should_stop: Callable[[], bool] | None = None) -> dict:
    """Compute one sanity cell in this process and write it to the evaluation store; returns the cell key."""
    return _write(cell, compute_sanity_cell(cell, CellContext(command, progress, should_stop)), results_dir, run)


def compute_suite_cell(cell, context: CellContext, batch_size: int = 32) -> CellResult:
    """The compute function of the evaluation suite: an EvaluationCell, SanityCell or AgreementCell.

    Args:
        cell: the cell.
        context: as the executor gives it.
        batch_size: inputs explained per batch (erasure and agreement cells).

    Returns:
        The cell's CellResult.
    """
    if isinstance(cell, EvaluationCell):
        return compute_evaluation_cell(cell, context, batch_size)
    if isinstance(cell, AgreementCell):
        return compute_agreement_cell(cell, context, batch_size)
    if isinstance(cell, SanityCell):
        return compute_sanity_cell(cell, context)
    from engine.errors import InvalidInputError

    raise InvalidInputError(f"not a cell of the evaluation suite: {type(cell).__name__} (EvaluationCell, SanityCell "
                            f"or AgreementCell)")


def run_suite(cells: Sequence, run: str = "default",
              results_dir: str | os.PathLike | None = None, command: str = "engine.faithfulness.evaluation.run_suite",
              progress: Callable[[int, int, dict], None] | None = None,
              cell_progress: Callable[[object, int, int], None] | None = None,
              should_stop: Callable[[], bool] | None = None, backend: Backend | None = None,
              batch_size: int = 32, started: Callable[[dict, str], None] | None = None) -> SweepReport:
    """Run every cell not yet in the evaluation store (engine.sweeps.run_cells with `compute_suite_cell`): an
    interrupted sweep resumes where it stopped, a failed cell is reported and the others go on. Cells of a run
    must come from the same weights as the run's earlier cells of the same checkpoint (checked before any work).

    Args:
        cells: EvaluationCell, SanityCell and AgreementCell objects.
        run: the run folder in the evaluation store.
        results_dir: the evaluation store's root (default: <results>/evaluation).
        command: the command line recorded in provenance.
        progress: progress(i, total, key) after each cell.
        cell_progress: cell_progress(cell, done, total) within a cell (in this process only).
        should_stop: returns True to cancel (in this process only: raises Cancelled).
        backend: an engine.sweeps.Backend (default: this process).
        batch_size: inputs explained per batch.
        started: started(key, where) when a cell is sent to a worker.

    Returns:
        The SweepReport.
    """
    compute = compute_suite_cell if batch_size == 32 else partial(compute_suite_cell, batch_size=batch_size)
    return run_cells(cells, compute, evaluation_store(results_dir), run, backend=backend, command=command,
                     progress=progress, cell_progress=cell_progress, started=started, should_stop=should_stop)


def evaluation_table(df: pd.DataFrame, level_cis: bool = True) -> pd.DataFrame:
    """Erasure rows of the store -> one row per (dataset, split, base model, strategy, removal, measure, metric,
    level): mean over seeds with a BCa bootstrap CI, every seed's value, the mean MaSF share (p < 0.05) and the
    direction that is more faithful; cost per explanation where the cells recorded it.

    level_cis=False: the rows of one masking level (level not NaN) get no CI (NaN bounds; ci "not computed" where
    there are several values), for a reader that shows only the aggregates over levels: the per-level rows are three
    quarters of the bootstrap CIs, the table's main cost (`report`'s evaluation tables)."""
    from engine.stats import bootstrap_ci

    df = df[df["method"] == ERASURE] if "method" in df.columns else df.iloc[0:0]
    if df.empty:
        return pd.DataFrame()
    keys = ["dataset", "split", "base_model", "strategy", "removal", "n_examples", "measure", "metric", "level"]
    # Each group's rows as positions into arrays of the whole frame (a frame per group, and reading its columns, were
    # most of the table's time after the bootstrap): the groups in the order iterating the groupby gives them (its
    # aggregations' index; ngroup numbers the rows' groups in that order), each group's rows in the frame's order.
    grouped = df.groupby(keys, dropna=False)
    groups = grouped.size().index
    number = grouped.ngroup().to_numpy()
    rows_of = np.split(np.argsort(number, kind="stable"), np.cumsum(np.bincount(number, minlength=len(groups)))[:-1])
    seed, value, better = df["seed"].to_numpy(), df["value"].to_numpy(), df["better"].to_numpy()
    p_below = df["p_below_005"].to_numpy()
    seconds = df["seconds_per_explanation"].to_numpy() if "seconds_per_explanation" in df.columns else None
    out = []
    for group, at in zip(groups, rows_of):
        at = at[np.argsort(seed[at], kind="quicksort")]  # in seed order, as part.sort_values("seed") ordered them
        values = value[at]
        row = dict(zip(keys, group))
        mean, low, high, how = bootstrap_ci(values.astype(float), with_method=True,
                                            interval=level_cis or pd.isna(row["level"]))
        row.update({"value": mean, "ci_low": low, "ci_high": high, "ci": how, "seeds": seed[at].tolist(),
                    "per_seed": values.round(4).tolist(), "better": better[at[0]],
                    # pandas' mean (NaN skipped) of the values in seed order, as before
                    "p_below_005": float(pd.Series(p_below[at]).mean()),
                    "seconds_per_explanation": float(pd.Series(seconds[at]).mean()) if seconds is not None
                    else float("nan")})
        out.append(row)
    return pd.DataFrame(out)


#: the metrics with one value per input and dataset (the registry's aggregates, read when this module is imported; the
#: Benchmarks page reads the registry itself)
AGGREGATES = tuple(aggregates())


def agreement_with_racu(table: pd.DataFrame, racu: pd.DataFrame, racu_column: str = "racu_pct") -> pd.DataFrame:
    """Do the erasure metrics rank the measures as recursive masking does? Per (strategy, removal, metric):
    Spearman's rho across measures between the metric, oriented so that larger = more faithful (metrics where
    lower is better are negated), and RACU (`racu`: one row per measure, e.g. `area_metrics_table` of a
    benchmark run of the same checkpoints), over the measures both have; with the mean MaSF share of the metric."""
    from scipy import stats

    racu = racu.set_index("measure")[racu_column]
    rows = []
    part = table[table["metric"].isin(AGGREGATES) & table["level"].isna()]
    for (strategy, removal, metric), group in part.groupby(["strategy", "removal", "metric"], dropna=False):
        g = group.set_index("measure")
        common = sorted(set(g.index) & set(racu.dropna().index))
        if len(common) < 3:
            continue
        sign = 1.0 if g["better"].iloc[0] == "higher" else -1.0
        x = sign * g.loc[common, "value"].to_numpy(float)
        rho = stats.spearmanr(x, racu.loc[common].to_numpy(float)).statistic if np.ptp(x) > 0 else float("nan")
        rows.append({"strategy": strategy, "removal": removal, "metric": metric, "better": g["better"].iloc[0],
                     "spearman_with_racu": float(rho), "n_measures": len(common),
                     "mean_p_below_005": float(g.loc[common, "p_below_005"].mean())})
    return pd.DataFrame(rows)


AGREEMENT = "agreement between measures"


@dataclass(frozen=True)
class AgreementCell:
    """Krishna et al.'s agreement of every pair of `measures` on one checkpoint's split (gold label explained)."""

    model: str
    dataset: str
    measures: tuple[str, ...]
    seed: int
    split: str = "test"
    limit: int | None = None
    top_fraction: float = 0.2

    @property
    def measure(self) -> str:
        return "+".join(self.measures)

    def key(self) -> dict:
        d = asdict(self)
        d["measures"] = list(self.measures)
        d["kind"] = AGREEMENT
        return d


def compute_agreement_cell(cell: AgreementCell, context: CellContext, batch_size: int = 32) -> CellResult:
    """The dataset-level agreement table (measure_agreement.agreement_matrix) as one cell.

    Args:
        cell: the AgreementCell.
        context: command, progress(done, total) (examples explained), should_stop.
        batch_size: inputs explained per batch.

    Returns:
        CellResult: one row per pair of measures and agreement statistic, and the provenance.
    """
    command = context.command or "engine.faithfulness.evaluation.run_agreement_cell"
    progress, should_stop = context.progress, context.should_stop
    from engine.faithfulness.measure_agreement import agreement_matrix
    from engine.importance import get_explainer, seed_options

    started = time.time()
    classifier, examples = _cell_inputs(cell)
    explainers = {m: get_explainer(m, classifier, **seed_options(m, cell.seed))
                  for m in cell.measures}
    scores: dict[str, list[np.ndarray]] = {m: [] for m in cell.measures}
    for start in range(0, len(examples), batch_size):
        batch = classifier.batch_of(examples[start:start + batch_size])
        for m, explainer in explainers.items():
            imp = explainer.attribute(batch, batch.target, should_stop=should_stop)
            scores[m] += [imp.token_scores(i).double().numpy() for i in range(len(imp))]
        if progress is not None:
            progress(min(start + batch_size, len(examples)), len(examples))
    table = agreement_matrix(scores, top_fraction=cell.top_fraction)
    meta = classifier.meta
    tidy = table.assign(model=cell.model, seed=cell.seed, dataset=cell.dataset, split=cell.split,
                        strategy=meta.strategy, base_model=meta.base_model, method=AGREEMENT,
                        measure=table["measure_a"] + " ~ " + table["measure_b"], step=0, ratio=float("nan"),
                        value=table["mean"], p_value=float("nan"), n_examples=len(examples))
    record = provenance(command, started, classifier, n_examples=len(examples), target="gold label",
                        top_fraction=cell.top_fraction, top_k_by="magnitude (Krishna et al.)")
    return CellResult(tidy, record)


def run_agreement_cell(cell: AgreementCell, results_dir: str | os.PathLike | None = None, run: str = "default",
                       command: str = "engine.faithfulness.evaluation.run_agreement_cell", batch_size: int = 32,
                       progress: Callable[[int, int], None] | None = None,
                       should_stop: Callable[[], bool] | None = None) -> dict:
    """The agreement cell computed in this process and written to the evaluation store; returns the cell key."""
    return _write(cell, compute_agreement_cell(cell, CellContext(command, progress, should_stop), batch_size),
                  results_dir, run)
