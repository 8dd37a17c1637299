"""How each cell of a report card is computed (the cells: engine.groundtruth.card_cells), from the card's plan
(engine.groundtruth.card_plan): the model, its spec, truth and operators resolved once and handed to every cell.

Row schema of a ReportCardCell (one row per input and metric; columns beyond the store's TIDY_COLUMNS):
    model, seed, dataset (the planted variant), measure (the explanation id), strategy, base_model, mechanism,
    operator, kind ('metric' or 'recovery'), uid (the input), metric, value, better ('higher'/'lower'),
    n_perturbed, n_ood (MaSF p < 0.05 among them; NaN where no MaSF), p_value (the randomisation test's p-value
    on its rows, else NaN), method ('report-card'), split, step (0), ratio (NaN), n_examples.
Metrics (per input; direction in `better`):
    acu (RACU's numerator: area between the random and this ranking's deletion curve at 0..100%, fixed ranking),
    racu-norm (RACU's denominator, the random curve's own area; dataset RACU = mean acu / mean racu-norm),
    comprehensiveness@0.1, sufficiency@0.1, aopc-comprehensiveness, aopc-sufficiency, naopc-comprehensiveness,
    ffid-plus, ffid-minus, soft-comprehensiveness, soft-sufficiency, deletion-area, insertion-area, top1-flip,
    randomisation-win-rate (top-k set vs random k-sets of the input; p_value = permutation p-value).
Recovery and separation rows (measures only): engine.groundtruth.recovery.
"""
from __future__ import annotations

import hashlib
import time

import numpy as np
import pandas as pd
import torch

from engine.errors import Cancelled, InvalidInputError, NotApplicableError
from engine.faithfulness.randomisation import randomisation_test
from engine.faithfulness.registry import (
    FAMILIES,
    better,
    card_families,
    family_of,
    function_families,
    judges,
    kernel_families,
)
from engine.groundtruth.card_cells import CARD, INTERACTION_CARD, TRUTH, InteractionCell, ReportCardCell, TruthCell
from engine.groundtruth.card_plan import CardPlan, plan_of
from engine.groundtruth.explanations import PREFIX, constructed_scores, explanations_for
from engine.groundtruth.interactions import (
    INTERACTION_BETTER,
    INTERACTION_MECHANISMS,
    interaction_recovery,
    value_direction,
)
from engine.groundtruth.mechanisms import other_index
from engine.groundtruth.recovery import (
    RECOVERY_BETTER,
    SET_LIKE,
    planted_positions,
    recovery,
    set_recovery,
    word_positions,
)
from engine.groundtruth.selfexplain_card import SelfExplanationCell, compute_self_explanation_cell
from engine.sweeps import CellContext, CellResult, provenance


def _batches(examples: list, size: int = 32) -> list[list]:
    order = np.argsort([len(e.primary) for e in examples], kind="stable")
    return [[examples[i] for i in order[s:s + size]] for s in range(0, len(examples), size)]


def _cancellable_batches(classifier, examples: list, context: CellContext):
    """(inputs, their Batch) of every batch of `_batches(examples)`: before each batch Cancelled when the cell is
    stopped (`context.should_stop`), after each one the progress (inputs done, all inputs) to `context.progress`."""
    n_done = 0
    for chunk in _batches(examples):
        if context.should_stop is not None and context.should_stop():
            raise Cancelled("the report card was cancelled")
        yield chunk, classifier.batch_of(chunk)
        n_done += len(chunk)
        if context.progress is not None:
            context.progress(n_done, len(examples))


def _explanation_scores(cell: ReportCardCell, classifier, batch, target, decisive, inert, spec,
                        should_stop, ordered=None, supports=None, *, memo: dict) -> tuple[torch.Tensor, dict]:
    """The cell's scores [B, T] and the measure's options (constructed explanations: their reference). memo: the
    plan's shared work (CardPlan.memo), where the other operators' cells of the same inputs find them."""
    from engine.importance import get_explainer, seed_options

    if cell.explanation.startswith(PREFIX):
        kind = cell.explanation[len(PREFIX):]
        if kind not in explanations_for(spec.mechanism):
            raise InvalidInputError(f"explanation {kind!r} is not judged for mechanism {spec.mechanism!r}; "
                                    f"use one of {', '.join(explanations_for(spec.mechanism))}")
        key = ("reference", tuple(int(x) for x in batch.input_ids.flatten()[:64]), batch.input_ids.shape)
        reference = _memoised(memo, key, lambda: get_explainer("loo-sign", classifier, memo=False).attribute(
            batch, target, should_stop=should_stop).scores.detach().cpu())
        return (constructed_scores(kind, reference, batch.maskable, decisive, inert, ordered=ordered, supports=supports),
                {"reference": "loo-sign"})
    options = {**dict(cell.measure_options), **seed_options(cell.explanation, cell.seed)}

    def attribute():
        explainer = get_explainer(cell.explanation, classifier, memo=False, **options)
        return explainer.attribute(batch, target, should_stop=should_stop).scores.detach().cpu(), dict(explainer.options)

    # A measure's scores do not depend on the operator (the cell's batch is the model's own): the cells of the other
    # operators of the plan reuse them. On a prompted LM, IG alone costs about a minute of CPU per input.
    digest = hashlib.sha256(batch.input_ids.cpu().numpy().tobytes() + torch.as_tensor(target).cpu().numpy().tobytes()
                            + str(tuple(batch.input_ids.shape)).encode()).hexdigest()
    key = ("scores", cell.explanation, cell.seed, cell.measure_options, digest)
    return _memoised(memo, key, attribute)


def _memoised(memo: dict, key, make):
    """memo[key], made by make() the first time."""
    if key not in memo:
        memo[key] = make()
    return memo[key]


def _supports(spec, explained, target: int, n_classes: int) -> torch.Tensor | None:
    """cancellation: [B, 2] +1 / -1, whether the target's word and the other class's word push toward the explained
    class of each input; None for the other mechanisms (their planted words all push toward the target)."""
    if spec.mechanism != "cancellation":
        return None
    other = other_index(spec, tuple(range(n_classes)))
    c = torch.as_tensor(explained).cpu().long().reshape(-1)
    return torch.stack([torch.where(c == target, 1, -1), torch.where(c == other, 1, -1)], 1)


def _word_ids(batch, chunk) -> torch.Tensor | None:
    """[B, T] the word of each maskable token (engine.importance.levels.word_ids_of), None where the offsets do not
    give words (then each token is a word of its own)."""
    from engine.importance.levels import word_ids_of

    try:
        return word_ids_of(batch, [e.primary for e in chunk])
    except Exception:  # a model whose offsets do not point into the primary text: token level
        return None


def _random_curves(memo: dict, operator: str, op_classifier, batch, target, removal: str, seed: int,
                   n_seeds: int = 5) -> np.ndarray:
    """[B, R] the mean deletion curve of `random` (n_seeds seeds) at the curve ratios: RACU's baseline."""
    from engine.faithfulness.erasure import CURVE_RATIOS, erasure_metrics

    def make():
        curves = []
        for s in range(n_seeds):
            g = torch.Generator().manual_seed(seed * 1000 + s)
            scores = torch.rand(batch.input_ids.shape, generator=g, dtype=torch.float64)
            res = erasure_metrics(op_classifier, batch, scores, target=target, metrics=["deletion"], removal=removal)
            curves.append(np.stack([res.values[f"deletion@{r:g}"] for r in CURVE_RATIOS], 1))
        return np.mean(curves, 0)

    key = ("random-curves", operator, seed, tuple(int(x) for x in batch.input_ids.flatten()), batch.input_ids.shape)
    return _memoised(memo, key, make)


def _naopc_bounds(memo: dict, operator: str, op_classifier, batch, target, beam: int):
    from engine.faithfulness.erasure import ERASER_BINS
    from engine.faithfulness.naopc import aopc_bounds

    key = ("naopc-bounds", operator, beam, tuple(int(x) for x in batch.input_ids.flatten()), batch.input_ids.shape)
    return _memoised(memo, key, lambda: aopc_bounds(op_classifier, batch, target, curve="eraser", bins=ERASER_BINS,
                                            beam_size=beam))


def compute_card_cell(cell: ReportCardCell, context: CellContext, plan: CardPlan | None = None) -> CellResult:
    """Compute one report-card cell (module docstring): per deciding input, the judge metrics of the cell's
    explanation under its operator, and for a measure its recovery of the planted words. plan: the card's plan
    (default: this process's plan of the cell's model, `plan_of`).

    Raises:
        MechanismNotLearned: the model does not follow its mechanism (the card is refused).
        NotApplicableError: an operator the model does not support.
    """
    from engine.faithfulness.erasure import CURVE_RATIOS, erasure_metrics
    from engine.faithfulness.ffidelity import ffidelity
    from engine.faithfulness.metrics import acu
    from engine.faithfulness.naopc import normalise
    from engine.ood import load_or_fit_masf
    from engine.runtime import configure, seed_everything
    from engine.sweeps.cells import shared_lock

    configure()
    seed_everything(cell.seed)
    started = time.time()
    unknown = [m for m in cell.metrics if m not in card_families()]
    if unknown:
        raise InvalidInputError(f"unknown metric families {unknown}; use {', '.join(card_families())}")
    plan = plan or plan_of(cell)
    examples = plan.inputs(cell.limit)
    classifier, truth, spec = plan.classifier, plan.truth, plan.spec
    # the cell's CPU time from here: loading the model and establishing the truth (its own cell's cost) are not this
    # cell's, though the first cell of a process triggers them
    cpu_started = time.process_time()
    op_classifier, removal = plan.operator(cell.operator)
    dataset = classifier.metadata.get("dataset")
    with shared_lock(f"masf-{cell.model}-{dataset}"):
        masf = load_or_fit_masf(classifier, dataset)
    families = [f for f in kernel_families() if f in cell.metrics or (f == "deletion" and "racu" in cell.metrics)]
    # the judged metrics the erasure kernel computes, and the families computed by a function of their own
    kernel_judges = [j for j in judges() if family_of(j) in kernel_families()]
    own = [FAMILIES[f] for f in cell.metrics if f in function_families()]
    masked_like = removal == "mask"
    is_measure = not cell.explanation.startswith(PREFIX)
    rows: list[dict] = []
    options: dict = {}
    for chunk, batch in _cancellable_batches(classifier, examples, context):
        target = batch.target
        decisive, inert = planted_positions(classifier, batch, spec)
        ordered = word_positions(classifier, batch, spec) if spec.mechanism in SET_LIKE else None
        supports = _supports(spec, target, truth.target, len(classifier.classes)) if ordered is not None else None
        scores, options = _explanation_scores(cell, classifier, batch, target, decisive, inert, spec, context.should_stop,
                                              ordered=ordered, supports=supports, memo=plan.memo)
        per: dict[str, tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = {}  # name -> value, n_pert, n_ood, p
        nan = np.full(len(chunk), np.nan)
        if families:
            res = erasure_metrics(op_classifier, batch, scores, target=target, metrics=families, masf=masf,
                                  removal=removal, soft_draws=5, seed=cell.seed)
            for name in kernel_judges:
                if name in res.values and (name.split("@")[0] in cell.metrics or family_of(name) in cell.metrics):
                    per[name] = (res.values[name], res.n_perturbed[name], res.n_ood[name], nan)
            if "racu" in cell.metrics:
                curve = np.stack([res.values[f"deletion@{r:g}"] for r in CURVE_RATIOS], 1)
                base = _random_curves(plan.memo, cell.operator, op_classifier, batch, target, removal, cell.seed)
                a = np.array([acu(CURVE_RATIOS, curve[b], base[b]) for b in range(len(chunk))])
                # RACU's denominator: the random curve's area above its last point (the ACU of a flat curve at b_I)
                norm = np.array([acu(CURVE_RATIOS, np.full(len(CURVE_RATIOS), base[b, -1]), base[b])
                                 for b in range(len(chunk))])
                dn = res.n_perturbed["deletion-area"]
                per["acu"] = (a, dn, res.n_ood["deletion-area"], nan)
                per["racu-norm"] = (norm, dn * 0, nan, nan)
            if "naopc" in cell.metrics and masked_like and "aopc-comprehensiveness" in res.values:
                bounds = _naopc_bounds(plan.memo, cell.operator, op_classifier, batch, target, cell.naopc_beam)
                per["naopc-comprehensiveness"] = (normalise(res.values["aopc-comprehensiveness"], bounds.lower,
                                                            bounds.upper),
                                                  res.n_perturbed["aopc-comprehensiveness"],
                                                  res.n_ood["aopc-comprehensiveness"], nan)
        if "f-fidelity" in cell.metrics and masked_like:
            ff = ffidelity(op_classifier, batch, scores, target=target, masf=masf, alpha=0.5, beta=1.0,
                           draws=cell.ffid_draws, seed=cell.seed)
            for name in ("ffid-plus", "ffid-minus"):
                per[name] = (ff.values[name], ff.n_perturbed[name], ff.n_ood[name], nan)
        if "randomisation" in cell.metrics:
            k = decisive.sum(1).clamp_min(1) if spec.decisive_words else inert.sum(1).clamp_min(1)
            win, p = randomisation_test(op_classifier, batch, scores, k, target, removal, cell.random_sets, cell.seed)
            per["randomisation-win-rate"] = (win, np.full(len(chunk), cell.random_sets), nan, p)
        for family in own:
            values = family.load()(op_classifier, batch, scores, target=target, masf=masf, removal=removal,
                                   seed=cell.seed, should_stop=context.should_stop)
            for name, v in values.values.items():
                per[name] = (v, values.n_perturbed[name], values.n_ood[name], nan)
        uids = [e.uid for e in chunk]
        for name, (v, n_pert, n_ood, p) in per.items():
            direction = better(name)
            for b, uid in enumerate(uids):
                rows.append({"uid": uid, "kind": "metric", "metric": name, "value": float(v[b]), "better": direction,
                             "n_perturbed": float(n_pert[b]), "n_ood": float(n_ood[b]), "p_value": float(p[b])})
        if is_measure:
            found = recovery(scores, batch.maskable, decisive, inert, spec)
            if ordered is not None:
                other = other_index(spec, tuple(classifier.classes)) if spec.mechanism == "cancellation" else None
                found.update(set_recovery(scores, batch.maskable, ordered, spec, explained=torch.as_tensor(target),
                                          target=truth.target, other=other, word_ids=_word_ids(batch, chunk)))
            for name, v in found.items():
                for b, uid in enumerate(uids):
                    rows.append({"uid": uid, "kind": "recovery", "metric": name, "value": float(v[b]),
                                 "better": RECOVERY_BETTER[name], "n_perturbed": np.nan, "n_ood": np.nan,
                                 "p_value": np.nan})
    meta = classifier.meta
    tidy = pd.DataFrame(rows).assign(
        model=cell.model, seed=cell.seed, dataset=dataset, measure=cell.explanation, strategy=meta.strategy,
        base_model=meta.base_model, mechanism=spec.mechanism, operator=cell.operator, method=CARD, split="test",
        step=0, ratio=float("nan"), n_examples=len(examples))
    record = provenance(context.command or "engine.groundtruth.card_compute.compute_card_cell", started, classifier, masf=masf,
                        checkpoint_sha256=plan.weights_sha256,
                        n_examples=len(examples), target="the predicted class (the mechanism's target on deciding inputs)",
                        planted=spec.to_dict(), truth=truth.summary(), operator=cell.operator, removal=removal,
                        measure_options=options, cpu_seconds=round(time.process_time() - cpu_started, 1),
                        judge_definitions={k: {"label": v[0], "better": v[1]} for k, v in judges().items()},
                        notes="RACU on the fixed ranking (not re-explained per step); NAOPC and F-Fidelity only for "
                              "replacement operators (their bounds and draws replace tokens)")
    return CellResult(tidy, record)


def compute_truth_cell(cell: TruthCell, context: CellContext, plan: CardPlan | None = None) -> CellResult:
    """The truth of one planted model as rows: metric = rate name, value = rate, ci_low / ci_high (Wilson 95%),
    k, n; plus n_deciding and learned (1/0). The per-input table goes into the provenance's counts only."""
    started, cpu_started = time.time(), time.process_time()
    plan = plan or plan_of(cell)
    classifier = plan.classifier
    before_truth = time.process_time()
    truth = plan.truth
    # the truth's cost is what establishing it took (recorded with it, also when it was read back from its store or
    # established earlier for the plan), counted once: the time spent establishing it here is left out
    truth_cpu = time.process_time() - before_truth
    meta = classifier.meta
    rows = [{"metric": name, "value": r["rate"], "ci_low": r["low"], "ci_high": r["high"], "k": r["k"], "n": r["n"]}
            for name, r in truth.rates.items()]
    rows.append({"metric": "n-deciding", "value": float(len(truth.deciding)), "ci_low": np.nan, "ci_high": np.nan,
                 "k": len(truth.deciding), "n": len(truth.inputs)})
    rows.append({"metric": "learned", "value": float(truth.learned), "ci_low": np.nan, "ci_high": np.nan,
                 "k": int(truth.learned), "n": 1})
    check = truth.options.get("order_check")
    if check:  # graded-set: the learned order against the recipe's (1 = flip rates in order with adjacent CIs apart,
        # or, where the flips saturate, the rises of P(target) in order with adjacent paired CIs above 0)
        ordered = (check["apart"] and check["in_order"]) or bool(check.get("rise_apart"))
        rows.append({"metric": "order-check", "value": float(ordered), "ci_low": np.nan,
                     "ci_high": np.nan, "k": int(check["in_order"]), "n": 1})
    spec = truth.spec
    tidy = pd.DataFrame(rows).assign(
        model=cell.model, seed=cell.seed, dataset=classifier.metadata.get("dataset"), measure="", strategy=meta.strategy,
        base_model=meta.base_model, mechanism=spec.mechanism, words=" ".join(spec.words), q=spec.q, rate=spec.rate,
        method=TRUTH, split="test", step=0, ratio=float("nan"), p_value=float("nan"), n_examples=len(truth.inputs),
        control=truth.control)
    record = provenance(context.command or "engine.groundtruth.card_compute.compute_truth_cell", started, classifier,
                        checkpoint_sha256=plan.weights_sha256, n_examples=len(truth.inputs), planted=spec.to_dict(), truth=truth.summary(),
                        options=truth.options, checkpoint_test=meta.test,
                        cpu_seconds=round(time.process_time() - cpu_started - truth_cpu
                                          + truth.options.get("cpu_seconds", 0), 1))
    return CellResult(tidy, record)


def compute_interaction_cell(cell: InteractionCell, context: CellContext, plan: CardPlan | None = None) -> CellResult:
    """Per deciding input of a planted AND / OR / threshold model: whether the top pair of shapley-interactions is the
    planted pair, the sign of its interaction against theory's, its value and rank (engine.groundtruth.interactions).
    Rows: kind 'interaction', metric pair-top / pair-sign / pair-value / pair-rank, method INTERACTION_CARD.

    Raises:
        NotApplicableError: a model of another mechanism (no pair of known interaction).
    """
    from engine.runtime import configure, seed_everything

    configure()
    seed_everything(cell.seed)
    started = time.time()
    plan = plan or plan_of(cell)
    examples = plan.inputs(cell.limit)
    classifier, truth, spec = plan.classifier, plan.truth, plan.spec
    cpu_started = time.process_time()
    if spec.mechanism not in INTERACTION_MECHANISMS:
        raise NotApplicableError(f"model {cell.model!r} plants {spec.mechanism!r}: interaction recovery needs "
                                 f"{', '.join(INTERACTION_MECHANISMS)} (pairs whose interaction theory knows)")
    better_of = {**INTERACTION_BETTER, "pair-value": value_direction(spec)}
    rows: list[dict] = []
    options: dict = {}
    for chunk, batch in _cancellable_batches(classifier, examples, context):
        found, options = interaction_recovery(classifier, batch, batch.target, word_positions(classifier, batch, spec),
                                              spec, cell.budget, cell.index, cell.seed, context.should_stop)
        for name, values in found.items():
            for e, v in zip(chunk, values):
                rows.append({"uid": e.uid, "kind": "interaction", "metric": name, "value": float(v),
                             "better": better_of[name], "n_perturbed": np.nan, "n_ood": np.nan, "p_value": np.nan})
    meta = classifier.meta
    tidy = pd.DataFrame(rows).assign(
        model=cell.model, seed=cell.seed, dataset=classifier.metadata.get("dataset"), measure="shapley-interactions",
        strategy=meta.strategy, base_model=meta.base_model, mechanism=spec.mechanism, words=" ".join(spec.words),
        m=spec.m, operator="mask", method=INTERACTION_CARD, split="test", step=0, ratio=float("nan"),
        n_examples=len(examples))
    record = provenance(context.command or "engine.groundtruth.card_compute.compute_interaction_cell", started, classifier,
                        checkpoint_sha256=plan.weights_sha256, n_examples=len(examples), planted=spec.to_dict(), truth=truth.summary(), measure_options=options,
                        target="the predicted class (the mechanism's target on deciding inputs)",
                        cpu_seconds=round(time.process_time() - cpu_started, 1))
    return CellResult(tidy, record)


def compute_cell(cell, context: CellContext, plans: dict | None = None) -> CellResult:
    """The sweep's compute function: a TruthCell, a ReportCardCell, a SelfExplanationCell or an InteractionCell, with
    the plan of its model from `plans` (model id -> CardPlan: the driver's, when the cells run in its process), else
    this process's (`plan_of`: a worker builds it once)."""
    plan = (plans or {}).get(cell.model)
    if isinstance(cell, TruthCell):
        return compute_truth_cell(cell, context, plan)
    if isinstance(cell, InteractionCell):
        return compute_interaction_cell(cell, context, plan)
    if isinstance(cell, ReportCardCell):
        return compute_card_cell(cell, context, plan)
    if isinstance(cell, SelfExplanationCell):
        return compute_self_explanation_cell(cell, context, plan or plan_of(cell))
    raise InvalidInputError(f"not a report-card cell: {type(cell).__name__} (TruthCell, ReportCardCell, "
                            f"SelfExplanationCell or InteractionCell)")


