"""The report card: a sweep (engine.sweeps) that scores every importance measure, faithfulness metric and masking
operator against the truth of a planted model (docs/ground-truth.md).

Cells (in `<results>/groundtruth/<run>/cells/`, the ResultsStore format):

    TruthCell(model, seed, min_deciding)        the intervention truth (engine.groundtruth.truth): one row per
                                                rate (flip rates, accuracies) with its Wilson CI
    ReportCardCell(model, operator, explanation, limit, ...)
                                                on the first `limit` deciding inputs: per input, the metrics of one
                                                explanation (a measure id, or 'explanation:<kind>' for the true and
                                                hard wrong explanations of engine.groundtruth.explanations) under
                                                one masking operator, and for a measure its recovery of the planted
                                                word(s)
    SelfExplanationCell(model, kind, limit, ...) (prompted LMs; engine.groundtruth.selfexplain_card)
                                                on the same deciding inputs: the model's own counterfactual /
                                                attribution / redaction explanation, whether it names the planted
                                                word, the test's verdicts and whether they agree with the truth

    InteractionCell(model, limit, budget, ...)  (opt-in, AND / OR / threshold models; engine.groundtruth.interactions)
                                                on the same deciding inputs: whether shapley-interactions' top pair is
                                                the planted pair and the sign of its interaction against theory's
                                                (rows: kind 'interaction', method 'interaction-recovery')

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
Recovery (measures only; operator-independent, repeated in each operator's cell):
    planted-rank (worst rank of the decisive words, 1 = top; lower better), top-hit (all decisive words in the
    top |P|), reciprocal-rank (1 / planted-rank), mass-share (their share of the absolute attribution mass),
    rank-first / rank-second (and, or), decoy-rank / decoy-top1 / decoy-mass-share (decoy: lower better),
    inert-rank / inert-top1 / inert-mass-share (none: lower better).
Separation (the set mechanisms, `set_recovery`, at the word level; best possible value 1, SEPARATION_BEST):
    order-spearman / order-kendall (graded-set: the planted words' scores against the truth's order),
    set-top-share / set-mass-share (graded-set, redundant, threshold: the set's share of the top |set| words and of
    the absolute mass), sign-target-word / sign-other-word / signs-both (cancellation: each word scored toward its
    own class).
"""
from __future__ import annotations

import copy
import hashlib
import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import torch

import engine.settings as settings
from engine.errors import InvalidInputError, NotApplicableError
from engine.faithfulness.randomisation import randomisation_test
from engine.faithfulness.registry import (
    FAMILIES,
    INFILL_OPERATORS,
    better,
    card_families,
    default_card_families,
    family_of,
    function_families,
    judges,
    kernel_families,
)
from engine.groundtruth.explanations import PREFIX, constructed_scores, explanations_for
from engine.groundtruth.interactions import (
    DEFAULT_INTERACTION_BUDGET,
    INTERACTION_BETTER,
    INTERACTION_MECHANISMS,
    interaction_recovery,
    value_direction,
)
from engine.groundtruth.mechanisms import other_index, word_token_id
from engine.groundtruth.selfexplain_card import (
    DEFAULT_MAX_NEW_TOKENS,
    SelfExplanationCell,
    compute_self_explanation_cell,
    self_explanation_kinds,
)
from engine.groundtruth.truth import MIN_DECIDING
from engine.sweeps import Backend, CellContext, CellResult, SweepReport, provenance, run_cells

CARD = "report-card"
TRUTH = "truth by intervention"
INTERACTION_CARD = "interaction-recovery"
OPERATORS = ("mask", "delete", "unk", "pad", "redacted", *INFILL_OPERATORS)
#: the measures scored by default: cheap to moderately costly, every family the project has
DEFAULT_MEASURES = ("random", "attention-mean", "grad-l2", "x-grad-sign", "x-grad-abs", "ig-sign", "deeplift",
                    "loo-sign", "loo-abs", "occlusion", "shapley-sampling")
DEFAULT_OPERATORS = ("mask", "delete", "unk")
#: the card's default metric families (engine/faithfulness/registry.py; their order is part of the cells' keys)
DEFAULT_METRIC_FAMILIES = tuple(default_card_families())
RECOVERY_BETTER = {"planted-rank": "lower", "top-hit": "higher", "reciprocal-rank": "higher", "mass-share": "higher",
                   "rank-first": "lower", "rank-second": "lower", "decoy-rank": "higher", "decoy-top1": "lower",
                   "decoy-mass-share": "lower", "inert-rank": "higher", "inert-top1": "lower", "inert-mass-share": "lower",
                   "order-spearman": "higher", "order-kendall": "higher", "set-top-share": "higher",
                   "set-mass-share": "higher", "sign-target-word": "higher", "sign-other-word": "higher",
                   "signs-both": "higher"}


def card_store(results_dir: str | os.PathLike | None = None):
    """The ResultsStore of report cards: `<results>/groundtruth`."""
    from engine.results import ResultsStore

    return ResultsStore(Path(results_dir) if results_dir is not None else settings.results_dir() / "groundtruth")


def _with_min_deciding(key: dict) -> dict:
    """A cell's key without `min_deciding` at its default, so the cells stored before it existed keep their keys
    (and a run resumes); a lowered threshold is part of the key, so its cells are never mixed up with the default's."""
    if key.get("min_deciding") == MIN_DECIDING:
        del key["min_deciding"]
    return key


@dataclass(frozen=True)
class TruthCell:
    """The intervention truth of one planted model (flip rates and accuracies with Wilson CIs); min_deciding: the
    fewest deciding inputs a learned mechanism needs (engine.groundtruth.truth.establish_truth)."""

    model: str
    seed: int = 0
    min_deciding: int = MIN_DECIDING

    def key(self) -> dict:
        return _with_min_deciding({**asdict(self), "kind": TRUTH})


@dataclass(frozen=True)
class ReportCardCell:
    """One explanation (a measure id or 'explanation:<kind>') under one masking operator on a planted model's
    first `limit` deciding inputs.

    Attributes:
        model: planted checkpoint id; operator: one of OPERATORS; explanation: measure id or 'explanation:<kind>'.
        limit: deciding inputs scored; seed: seeds the truth's insertions, `random`, soft draws, F-Fid draws and
        the randomisation test; metrics: families (the registry's card_families()); ffid_draws: F-Fidelity draws per level;
        random_sets: random k-sets of the randomisation test; naopc_beam: NAOPC bounds' beam beyond 12 tokens;
        min_deciding: the fewest deciding inputs a learned mechanism needs (below it the cell is refused);
        measure_options: (key, value) options of the cell's measure (e.g. (("max_steps", "20"),) for ig-sign), as
        `explain --option` takes them; empty: the measure's defaults.
    """

    model: str
    operator: str
    explanation: str
    limit: int = 200
    seed: int = 0
    metrics: tuple[str, ...] = DEFAULT_METRIC_FAMILIES
    ffid_draws: int = 10
    random_sets: int = 20
    naopc_beam: int = 5
    min_deciding: int = MIN_DECIDING
    measure_options: tuple[tuple[str, str], ...] = ()

    @property
    def measure(self) -> str:
        return self.explanation

    def key(self) -> dict:
        d = asdict(self)
        d["metrics"] = list(self.metrics)
        d["kind"] = CARD
        if self.measure_options:
            d["measure_options"] = [list(kv) for kv in self.measure_options]
        else:  # the defaults: the key of the cells stored before options existed
            del d["measure_options"]
        return _with_min_deciding(d)


@dataclass(frozen=True)
class InteractionCell:
    """Interaction recovery (engine.groundtruth.interactions) on a planted AND / OR / threshold model's first `limit`
    deciding inputs: shapley-interactions over words with `budget` evaluations per input, index `index` (k-SII or
    FSII), seeded by `seed`. Opt-in (`card_cells(interactions=True)`, report-card --interactions): the default cells'
    keys are unchanged."""

    model: str
    limit: int = 200
    seed: int = 0
    budget: int = DEFAULT_INTERACTION_BUDGET
    index: str = "k-SII"
    min_deciding: int = MIN_DECIDING

    def key(self) -> dict:
        return _with_min_deciding({**asdict(self), "kind": INTERACTION_CARD})


# -- per-process caches (a cell's inputs, the truth, reference scores and NAOPC bounds are shared by the cells of
#    one model that run in the same process; every cache entry is a pure function of its key) -------------------
_CACHE: dict = {}


def _cached(key, make: Callable):
    if key not in _CACHE:
        if len(_CACHE) > 256:
            _CACHE.clear()
        _CACHE[key] = make()
    return _CACHE[key]


def _classifier(model: str):
    from engine.models import load_classifier

    return _cached(("classifier", model), lambda: load_classifier(model))


def truth_of(model: str, seed: int = 0, min_deciding: int = MIN_DECIDING):
    """The Truth of checkpoint `model` (engine.groundtruth.truth.establish_truth), cached in this process and stored
    beside the checkpoint for the next (engine.groundtruth.truth_store)."""
    from engine.groundtruth.truth_store import load_or_establish_truth

    return _cached(("truth", model, seed, min_deciding),
                   lambda: load_or_establish_truth(_classifier(model), seed=seed, min_deciding=min_deciding))


def operator_classifier(classifier, operator: str):
    """(classifier whose replacement token is the operator's, removal 'mask' or 'delete') for `operator`.

    mask: the model's own replacement ([MASK]); unk / pad: the tokenizer's unk / pad token; delete: the token is
    dropped (ERASER's removal); retrieval / mlm: filled in by a token of the model's data or by the packaged tiny
    MLM's guess (ICE's infill operators; the MLM needs the model's vocabulary); redacted: a prompted LM's '[REDACTED]' replacement, offered when its prompt spec
    replaces by redaction (then it is the model's own replacement, the same as mask: the classifier itself).
    The copy shares the model's weights.

    Raises:
        NotApplicableError: an operator the model does not support (lists those it does).
    """
    if operator not in OPERATORS:
        raise InvalidInputError(f"unknown masking operator {operator!r}; use one of {', '.join(OPERATORS)}")
    if operator == "mask":
        return classifier, "mask"
    if operator == "delete":
        return classifier, "delete"
    if operator in INFILL_OPERATORS:  # retrieval / MLM infill (engine/faithfulness/infill.py): a twin, the length kept
        from engine.faithfulness.infill import infill_operator

        return infill_operator(classifier, operator), "mask"
    if operator == "redacted":
        if _redacts(classifier):  # the model's own replacement is [REDACTED]: the same as its "mask"
            return classifier, "mask"
        raise NotApplicableError(f"model {classifier.id!r}: the [REDACTED] operator needs a prompted LM whose prompt "
                                 f"spec replaces by redaction; supported here: {', '.join(supported_operators(classifier))}")
    token = getattr(classifier.tokenizer, f"{operator}_token_id", None)
    if token is None:
        raise NotApplicableError(f"model {classifier.id!r} has no {operator} token; supported operators: "
                                 f"{', '.join(supported_operators(classifier))}")
    twin = copy.copy(classifier)
    twin.metadata = {**classifier.metadata, "replacement_token_id": int(token), "replacement_token": operator}
    return twin, "mask"


def supported_operators(classifier) -> list[str]:
    """The operators `operator_classifier` accepts for this model."""
    out = ["mask", "delete"]
    out += [op for op in ("unk", "pad") if getattr(classifier.tokenizer, f"{op}_token_id", None) is not None]
    if (getattr(classifier, "metadata", None) or {}).get("dataset"):
        out.append("retrieval")
    from engine.faithfulness.infill import mlm_compatible

    if mlm_compatible(classifier):
        out.append("mlm")
    if _redacts(classifier):
        out.append("redacted")
    return out


def _redacts(classifier) -> bool:
    """Whether the model is a prompted LM whose own replacement is redaction (its prompt spec's `replacement`)."""
    spec = getattr(classifier, "spec", None)
    return getattr(spec, "replacement", None) == "redacted"


def _card_inputs(cell: ReportCardCell | SelfExplanationCell | InteractionCell):
    """(classifier, truth, examples): the first `limit` deciding inputs as Examples whose label is the class the
    model predicts on them (the explained class). Every cell of a card (any kind) scores these same inputs."""
    from engine.data.types import Example

    classifier = _classifier(cell.model)
    truth = truth_of(cell.model, cell.seed, cell.min_deciding)
    truth.require_learned()
    rows = truth.deciding.head(cell.limit)
    examples = [Example(primary=r.planted, label=int(r.pred_planted), uid=str(r.uid)) for r in rows.itertuples()]
    if not examples:
        raise NotApplicableError(f"model {cell.model!r}: no deciding input to score ({truth.reason})")
    return classifier, truth, examples


def _batches(examples: list, size: int = 32) -> list[list]:
    order = np.argsort([len(e.primary) for e in examples], kind="stable")
    return [[examples[i] for i in order[s:s + size]] for s in range(0, len(examples), size)]


def planted_positions(classifier, batch, spec) -> tuple[torch.Tensor, torch.Tensor]:
    """[B, T] bool masks of the decisive and of the inert planted words' token positions (maskable only). A word is
    found as its one running-text token (its leading space included) anywhere, and, where a byte-level BPE spells it
    otherwise at the start of the text (SmolLM2: "vessel" is two pieces there, " vessel" one), as that spelling at
    the input's first maskable position: a planted word inserted first in the text was not found before."""
    maskable = batch.maskable.cpu()
    decisive = torch.zeros_like(maskable)
    inert = torch.zeros_like(maskable)
    for w in spec.decisive_words:
        decisive |= word_mask(classifier, batch, w)
    for w in spec.inert_words:
        inert |= word_mask(classifier, batch, w)
    return decisive, inert


def word_positions(classifier, batch, spec) -> list[torch.Tensor]:
    """One [B, T] bool mask per planted word, in the spec's order (graded-set: strongest first; cancellation: the
    target's word, then the other class's), each as `planted_positions` finds it (all its pieces)."""
    return [word_mask(classifier, batch, w) for w in spec.words]


def word_mask(classifier, batch, word: str) -> torch.Tensor:
    """[B, T] bool: the maskable positions of `word` (planted_positions' rule)."""
    ids, maskable = batch.input_ids.cpu(), batch.maskable.cpu()
    return _found(classifier, ids, maskable, word)


def _found(classifier, ids: torch.Tensor, maskable: torch.Tensor, word: str) -> torch.Tensor:
    one = word_token_id(classifier.tokenizer, word)
    out = (ids == one) & maskable
    bare = [int(t) for t in classifier.tokenizer(word, add_special_tokens=False)["input_ids"]]
    if bare == [one]:
        return out
    n, T = len(bare), ids.shape[1]
    for b in torch.nonzero(maskable.any(1)).flatten().tolist():
        s = int(maskable[b].int().argmax())
        if s + n > T or ids[b, s:s + n].tolist() != bare or not bool(maskable[b, s:s + n].all()):
            continue
        # the word must end there ("vessels" starts with the same pieces): the next token starts a new word
        after = classifier.tokenizer.decode(ids[b, s:s + n + 1].tolist()) if s + n < T else word
        if after.startswith(word) and not after[len(word):len(word) + 1].isalnum():
            out[b, s:s + n] = True
    return out


#: the mechanisms of several words, whose card has the separation statistics (`set_recovery`)
SET_LIKE = ("graded-set", "redundant", "threshold", "cancellation")
#: each separation statistic's best possible value (the tables state it beside the value)
SEPARATION_BEST = {"order-spearman": 1.0, "order-kendall": 1.0, "set-top-share": 1.0, "set-mass-share": 1.0,
                   "sign-target-word": 1.0, "sign-other-word": 1.0, "signs-both": 1.0}


def set_recovery(scores: torch.Tensor, maskable: torch.Tensor, ordered: list[torch.Tensor], spec,
                 explained: torch.Tensor | None = None, target: int | None = None, other: int | None = None,
                 word_ids: torch.Tensor | None = None) -> dict[str, np.ndarray]:
    """Per input [B]: the separation statistics of a measure's scores on an input carrying several planted words,
    at the word level (a word of several pieces is one word: its pieces' scores summed; word_ids [B, T], -1 off
    the words, groups the other tokens into their words; None: each other token is a word of its own).

        order-spearman / order-kendall  (graded-set) Spearman's rho / Kendall's tau between the planted words'
                         scores and the truth's order (strongest first); 0 where the scores of the planted words
                         are all equal (no order given); best 1
        set-top-share    the share of the planted words among the top |set| words by signed score; best 1
        set-mass-share   the planted words' share of the absolute mass over words; best 1
        sign-target-word / sign-other-word / signs-both  (cancellation, `explained` [B] the explained class, the
                         words' classes `target` and `other`) whether each word is scored toward its own class
                         (positive where it is the explained class, negative where it opposes it; 0 is no sign);
                         both; best 1

    An input on which a planted word is not found gets NaN (its batch's other inputs keep their values)."""
    from scipy import stats

    scores = torch.nan_to_num(scores.detach().double().cpu(), nan=0.0)
    maskable = maskable.cpu()
    B, k = scores.shape[0], len(ordered)
    out: dict[str, list] = {}

    def add(name, value):
        out.setdefault(name, []).append(float(value))

    names = (["order-spearman", "order-kendall"] if spec.mechanism == "graded-set" else []) + \
            (["sign-target-word", "sign-other-word", "signs-both"] if spec.mechanism == "cancellation" else
             ["set-top-share", "set-mass-share"])
    for b in range(B):
        masks = [m[b].cpu() & maskable[b] for m in ordered]
        if not all(bool(m.any()) for m in masks):
            for name in names:
                add(name, float("nan"))
            continue
        planted = torch.zeros_like(maskable[b])
        for m in masks:
            planted |= m
        word_scores = [float(scores[b][m].sum()) for m in masks]
        # the other words: grouped by word_ids where known, else one token each
        rest = (maskable[b] & ~planted).nonzero().flatten().tolist()
        groups: dict = {}
        for t in rest:
            key = int(word_ids[b, t]) if word_ids is not None and int(word_ids[b, t]) >= 0 else ("t", t)
            groups.setdefault(key, []).append(t)
        other_scores = [float(scores[b, ts].sum()) for ts in groups.values()]
        if spec.mechanism == "graded-set":
            truth = np.arange(k, 0, -1, dtype=float)  # strongest first
            if np.ptp(word_scores) == 0:
                add("order-spearman", 0.0)
                add("order-kendall", 0.0)
            else:
                add("order-spearman", float(stats.spearmanr(word_scores, truth).statistic))
                add("order-kendall", float(stats.kendalltau(word_scores, truth).statistic))
        if spec.mechanism == "cancellation":
            c = int(explained[b])
            right = [(word_scores[0] > 0) if c == target else (word_scores[0] < 0),
                     (word_scores[1] > 0) if c == other else (word_scores[1] < 0)]
            add("sign-target-word", float(right[0]))
            add("sign-other-word", float(right[1]))
            add("signs-both", float(right[0] and right[1]))
            continue
        # ties with another word count against the planted word (as a position tie-break would, at random)
        units = [(v, 1) for v in word_scores] + [(v, 0) for v in other_scores]
        units.sort(key=lambda u: (-u[0], u[1]))
        add("set-top-share", sum(flag for _, flag in units[:k]) / k)
        mass = sum(abs(v) for v in word_scores) + sum(abs(v) for v in other_scores)
        add("set-mass-share", sum(abs(v) for v in word_scores) / mass if mass > 0 else 0.0)
    return {name: np.asarray(v) for name, v in out.items() if len(v) == B}


def recovery(scores: torch.Tensor, maskable: torch.Tensor, decisive: torch.Tensor, inert: torch.Tensor,
             spec) -> dict[str, np.ndarray]:
    """Per input [B]: how a measure's scores rank the planted words (module docstring's recovery metrics).
    Ranks follow the erasure metrics' ordering (signed scores, highest first, ties by position), 1 = top. An input
    whose planted word is not found among its tokens (a byte-level BPE spells a word at the start of the text
    without its leading space, another token) gets NaN, so the batch's other inputs keep their values."""
    from engine.faithfulness.perturb import ranking_positions

    scores = torch.nan_to_num(scores.detach().double().cpu(), nan=0.0)
    maskable = maskable.cpu()
    rank = ranking_positions(scores, maskable) + 1  # 1-based among maskable tokens
    mass = scores.abs().masked_fill(~maskable, 0.0)
    total = mass.sum(1).clamp_min(1e-300)
    B = scores.shape[0]
    out: dict[str, list] = {}

    def add(name, value):
        out.setdefault(name, []).append(float(value))

    two_words = spec.mechanism in ("and", "or")
    names_d = ["planted-rank", "top-hit", "reciprocal-rank", "mass-share"] + (["rank-first", "rank-second"] if two_words
                                                                             else [])
    inert_name = "decoy" if spec.mechanism == "decoy" else "inert"
    names_i = [f"{inert_name}-rank", f"{inert_name}-top1", f"{inert_name}-mass-share"]
    any_d, any_i = bool(decisive.any()), bool(inert.any())
    for b in range(B):
        d = torch.nonzero(decisive[b]).flatten()
        i = torch.nonzero(inert[b]).flatten()
        if any_d and not len(d):
            for name in names_d:
                add(name, float("nan"))
        if any_i and not len(i):
            for name in names_i:
                add(name, float("nan"))
        if len(d):
            r = rank[b, d]
            worst = int(r.max())
            add("planted-rank", worst)
            add("top-hit", float(worst <= len(d)))
            add("reciprocal-rank", 1.0 / worst)
            add("mass-share", float(mass[b, d].sum() / total[b]))
            if two_words:
                firsts = [int(rank[b, p]) for p in d]
                add("rank-first", firsts[0])
                add("rank-second", firsts[-1])
        if len(i):
            ri = int(rank[b, i].min())
            add(f"{inert_name}-rank", ri)
            add(f"{inert_name}-top1", float(ri == 1))
            add(f"{inert_name}-mass-share", float(mass[b, i].sum() / total[b]))
    return {k: np.asarray(v) for k, v in out.items() if len(v) == B}


def _explanation_scores(cell: ReportCardCell, classifier, batch, target, decisive, inert, spec,
                        should_stop, ordered=None, supports=None) -> tuple[torch.Tensor, dict]:
    """The cell's scores [B, T] and the measure's options (constructed explanations: their reference)."""
    from engine.importance import get_explainer, seed_options

    if cell.explanation.startswith(PREFIX):
        kind = cell.explanation[len(PREFIX):]
        if kind not in explanations_for(spec.mechanism):
            raise InvalidInputError(f"explanation {kind!r} is not judged for mechanism {spec.mechanism!r}; "
                                    f"use one of {', '.join(explanations_for(spec.mechanism))}")
        key = ("reference", cell.model, tuple(int(x) for x in batch.input_ids.flatten()[:64]), batch.input_ids.shape)
        reference = _cached(key, lambda: get_explainer("loo-sign", classifier, memo=False).attribute(
            batch, target, should_stop=should_stop).scores.detach().cpu())
        return (constructed_scores(kind, reference, batch.maskable, decisive, inert, ordered=ordered, supports=supports),
                {"reference": "loo-sign"})
    options = {**dict(cell.measure_options), **seed_options(cell.explanation, cell.seed)}

    def attribute():
        explainer = get_explainer(cell.explanation, classifier, memo=False, **options)
        return explainer.attribute(batch, target, should_stop=should_stop).scores.detach().cpu(), dict(explainer.options)

    # A measure's scores do not depend on the operator (the cell's batch is the model's own): the cells of the other
    # operators in this process reuse them. On a prompted LM, IG alone costs about a minute of CPU per input.
    digest = hashlib.sha256(batch.input_ids.cpu().numpy().tobytes() + torch.as_tensor(target).cpu().numpy().tobytes()
                            + str(tuple(batch.input_ids.shape)).encode()).hexdigest()
    key = ("scores", cell.model, cell.explanation, cell.seed, cell.measure_options, digest)
    return _cached(key, attribute)


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


def _random_curves(model: str, operator: str, op_classifier, batch, target, removal: str, seed: int,
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

    key = ("random-curves", model, operator, seed, tuple(int(x) for x in batch.input_ids.flatten()),
           batch.input_ids.shape)
    return _cached(key, make)


def _naopc_bounds(model: str, operator: str, op_classifier, batch, target, beam: int):
    from engine.faithfulness.erasure import ERASER_BINS
    from engine.faithfulness.naopc import aopc_bounds

    key = ("naopc-bounds", model, operator, beam, tuple(int(x) for x in batch.input_ids.flatten()),
           batch.input_ids.shape)
    return _cached(key, lambda: aopc_bounds(op_classifier, batch, target, curve="eraser", bins=ERASER_BINS,
                                            beam_size=beam))


def compute_card_cell(cell: ReportCardCell, context: CellContext) -> CellResult:
    """Compute one report-card cell (module docstring): per deciding input, the judge metrics of the cell's
    explanation under its operator, and for a measure its recovery of the planted words.

    Raises:
        MechanismNotLearned: the model does not follow its mechanism (the card is refused).
        NotApplicableError: an operator the model does not support.
    """
    from engine.faithfulness.erasure import CURVE_RATIOS, erasure_metrics
    from engine.faithfulness.ffidelity import ffidelity
    from engine.faithfulness.metrics import acu
    from engine.faithfulness.naopc import normalise
    from engine.groundtruth.planting import planted_spec
    from engine.ood import load_or_fit_masf
    from engine.runtime import configure, seed_everything
    from engine.sweeps.cells import shared_lock

    configure()
    seed_everything(cell.seed)
    started = time.time()
    unknown = [m for m in cell.metrics if m not in card_families()]
    if unknown:
        raise InvalidInputError(f"unknown metric families {unknown}; use {', '.join(card_families())}")
    classifier, truth, examples = _card_inputs(cell)
    # the cell's CPU time from here: loading the model and establishing the truth (its own cell's cost) are not this
    # cell's, though the first cell of a process triggers them
    cpu_started = time.process_time()
    spec = planted_spec(classifier)
    op_classifier, removal = operator_classifier(classifier, cell.operator)
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
    n_done = 0
    for chunk in _batches(examples):
        if context.should_stop is not None and context.should_stop():
            from engine.errors import Cancelled

            raise Cancelled("the report card was cancelled")
        batch = classifier.batch_of(chunk)
        target = batch.target
        decisive, inert = planted_positions(classifier, batch, spec)
        ordered = word_positions(classifier, batch, spec) if spec.mechanism in SET_LIKE else None
        supports = _supports(spec, target, truth.target, len(classifier.classes)) if ordered is not None else None
        scores, options = _explanation_scores(cell, classifier, batch, target, decisive, inert, spec, context.should_stop,
                                              ordered=ordered, supports=supports)
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
                base = _random_curves(cell.model, cell.operator, op_classifier, batch, target, removal, cell.seed)
                a = np.array([acu(CURVE_RATIOS, curve[b], base[b]) for b in range(len(chunk))])
                # RACU's denominator: the random curve's area above its last point (the ACU of a flat curve at b_I)
                norm = np.array([acu(CURVE_RATIOS, np.full(len(CURVE_RATIOS), base[b, -1]), base[b])
                                 for b in range(len(chunk))])
                dn = res.n_perturbed["deletion-area"]
                per["acu"] = (a, dn, res.n_ood["deletion-area"], nan)
                per["racu-norm"] = (norm, dn * 0, nan, nan)
            if "naopc" in cell.metrics and masked_like and "aopc-comprehensiveness" in res.values:
                bounds = _naopc_bounds(cell.model, cell.operator, op_classifier, batch, target, cell.naopc_beam)
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
        n_done += len(chunk)
        if context.progress is not None:
            context.progress(n_done, len(examples))
    meta = classifier.meta
    tidy = pd.DataFrame(rows).assign(
        model=cell.model, seed=cell.seed, dataset=dataset, measure=cell.explanation, strategy=meta.strategy,
        base_model=meta.base_model, mechanism=spec.mechanism, operator=cell.operator, method=CARD, split="test",
        step=0, ratio=float("nan"), n_examples=len(examples))
    record = provenance(context.command or "engine.groundtruth.card.compute_card_cell", started, classifier, masf=masf,
                        n_examples=len(examples), target="the predicted class (the mechanism's target on deciding inputs)",
                        planted=spec.to_dict(), truth=truth.summary(), operator=cell.operator, removal=removal,
                        measure_options=options, cpu_seconds=round(time.process_time() - cpu_started, 1),
                        judge_definitions={k: {"label": v[0], "better": v[1]} for k, v in judges().items()},
                        notes="RACU on the fixed ranking (not re-explained per step); NAOPC and F-Fidelity only for "
                              "replacement operators (their bounds and draws replace tokens)")
    return CellResult(tidy, record)


def compute_truth_cell(cell: TruthCell, context: CellContext) -> CellResult:
    """The truth of one planted model as rows: metric = rate name, value = rate, ci_low / ci_high (Wilson 95%),
    k, n; plus n_deciding and learned (1/0). The per-input table goes into the provenance's counts only."""
    started, cpu_started = time.time(), time.process_time()
    classifier = _classifier(cell.model)
    before_truth = time.process_time()
    truth = truth_of(cell.model, cell.seed, cell.min_deciding)
    # the truth's cost is what establishing it took (recorded with it, also when it was read back from its store or
    # established earlier in this process), counted once: the time spent in truth_of here is left out
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
    record = provenance(context.command or "engine.groundtruth.card.compute_truth_cell", started, classifier,
                        n_examples=len(truth.inputs), planted=spec.to_dict(), truth=truth.summary(),
                        options=truth.options, checkpoint_test=meta.test,
                        cpu_seconds=round(time.process_time() - cpu_started - truth_cpu
                                          + truth.options.get("cpu_seconds", 0), 1))
    return CellResult(tidy, record)


def compute_interaction_cell(cell: InteractionCell, context: CellContext) -> CellResult:
    """Per deciding input of a planted AND / OR / threshold model: whether the top pair of shapley-interactions is the
    planted pair, the sign of its interaction against theory's, its value and rank (engine.groundtruth.interactions).
    Rows: kind 'interaction', metric pair-top / pair-sign / pair-value / pair-rank, method INTERACTION_CARD.

    Raises:
        NotApplicableError: a model of another mechanism (no pair of known interaction).
    """
    from engine.groundtruth.planting import planted_spec
    from engine.runtime import configure, seed_everything

    configure()
    seed_everything(cell.seed)
    started = time.time()
    classifier, truth, examples = _card_inputs(cell)
    cpu_started = time.process_time()
    spec = planted_spec(classifier)
    if spec.mechanism not in INTERACTION_MECHANISMS:
        raise NotApplicableError(f"model {cell.model!r} plants {spec.mechanism!r}: interaction recovery needs "
                                 f"{', '.join(INTERACTION_MECHANISMS)} (pairs whose interaction theory knows)")
    better_of = {**INTERACTION_BETTER, "pair-value": value_direction(spec)}
    rows: list[dict] = []
    options: dict = {}
    n_done = 0
    for chunk in _batches(examples):
        if context.should_stop is not None and context.should_stop():
            from engine.errors import Cancelled

            raise Cancelled("the report card was cancelled")
        batch = classifier.batch_of(chunk)
        found, options = interaction_recovery(classifier, batch, batch.target, word_positions(classifier, batch, spec),
                                              spec, cell.budget, cell.index, cell.seed, context.should_stop)
        for name, values in found.items():
            for e, v in zip(chunk, values):
                rows.append({"uid": e.uid, "kind": "interaction", "metric": name, "value": float(v),
                             "better": better_of[name], "n_perturbed": np.nan, "n_ood": np.nan, "p_value": np.nan})
        n_done += len(chunk)
        if context.progress is not None:
            context.progress(n_done, len(examples))
    meta = classifier.meta
    tidy = pd.DataFrame(rows).assign(
        model=cell.model, seed=cell.seed, dataset=classifier.metadata.get("dataset"), measure="shapley-interactions",
        strategy=meta.strategy, base_model=meta.base_model, mechanism=spec.mechanism, words=" ".join(spec.words),
        m=spec.m, operator="mask", method=INTERACTION_CARD, split="test", step=0, ratio=float("nan"),
        n_examples=len(examples))
    record = provenance(context.command or "engine.groundtruth.card.compute_interaction_cell", started, classifier,
                        n_examples=len(examples), planted=spec.to_dict(), truth=truth.summary(), measure_options=options,
                        target="the predicted class (the mechanism's target on deciding inputs)",
                        cpu_seconds=round(time.process_time() - cpu_started, 1))
    return CellResult(tidy, record)


def compute_cell(cell, context: CellContext) -> CellResult:
    """The sweep's compute function: a TruthCell, a ReportCardCell, a SelfExplanationCell or an InteractionCell."""
    if isinstance(cell, TruthCell):
        return compute_truth_cell(cell, context)
    if isinstance(cell, InteractionCell):
        return compute_interaction_cell(cell, context)
    if isinstance(cell, ReportCardCell):
        return compute_card_cell(cell, context)
    if isinstance(cell, SelfExplanationCell):
        return compute_self_explanation_cell(cell, context, _card_inputs(cell))
    raise InvalidInputError(f"not a report-card cell: {type(cell).__name__} (TruthCell, ReportCardCell, "
                            f"SelfExplanationCell or InteractionCell)")


def card_cells(model: str, measures: Sequence[str] = DEFAULT_MEASURES, operators: Sequence[str] = DEFAULT_OPERATORS,
               metrics: Sequence[str] = DEFAULT_METRIC_FAMILIES, limit: int = 200, seed: int = 0,
               ffid_draws: int = 10, random_sets: int = 20, naopc_beam: int = 5, truth_only: bool = False,
               min_deciding: int = MIN_DECIDING, self_explanations: Sequence[str] | None = None,
               max_new_tokens: int = DEFAULT_MAX_NEW_TOKENS,
               measure_options: Mapping[str, Mapping[str, str]] | None = None, interactions: bool = False,
               interaction_budget: int = DEFAULT_INTERACTION_BUDGET) -> list:
    """Every cell of one planted model's card: its TruthCell, then per operator the constructed explanations and
    the measures (operator-major, so a card's first operator lands whole first), and for a prompted LM one
    SelfExplanationCell per self-explanation kind right after the first operator's cells. truth_only: the TruthCell alone (the flip rates of a model whose
    card is not run; no refusal, since nothing is scored against it). min_deciding: the fewest deciding inputs a
    learned mechanism needs (default MIN_DECIDING, 20; lower it for a small card on small data).
    self_explanations: the kinds (counterfactual, attribution, redaction); None: all three for a prompted LM and
    none for any other model; (): none. max_new_tokens: the longest self-explanation answer.
    measure_options: measure id -> {option: value} (as `explain --option`), e.g. {"ig-sign": {"max_steps": "20"}};
    each must be one of the measure's options. interactions: add an InteractionCell (interaction recovery, with
    `interaction_budget` evaluations per input) after the truth; an AND / OR / threshold model only (others refused).

    Raises:
        MechanismNotLearned: the model did not learn its mechanism (checked here, before any cell runs).
        NotApplicableError: an operator the model does not support, or self-explanations asked of a model that is
            not a prompted LM; InvalidInputError: an unknown measure/metric/self-explanation kind.
    """
    from engine.groundtruth.planting import planted_spec
    from engine.importance import MEASURES

    unknown = [m for m in measures if m not in MEASURES]
    if unknown:
        raise InvalidInputError(f"unknown measure(s) {', '.join(unknown)}; known: {', '.join(MEASURES)}")
    measure_options = dict(measure_options or {})
    for m, opts in measure_options.items():
        if m not in measures:
            raise InvalidInputError(f"options given for {m!r}, which is not among the measures ({', '.join(measures)})")
        wrong = [k for k in opts if k not in MEASURES[m].defaults]
        if wrong:
            raise InvalidInputError(f"{m} has no option {', '.join(wrong)}; its options: "
                                    f"{', '.join(MEASURES[m].defaults) or 'none'}")
    bad = [m for m in metrics if m not in card_families()]
    if bad:
        raise InvalidInputError(f"unknown metric(s) {', '.join(bad)}; use {', '.join(card_families())}")
    classifier = _classifier(model)
    spec = planted_spec(classifier)
    kinds = self_explanation_kinds(classifier, self_explanations)
    if truth_only:
        return [TruthCell(model, seed, min_deciding)]
    for op in operators:
        operator_classifier(classifier, op)
    truth_of(model, seed, min_deciding).require_learned()
    cells: list = [TruthCell(model, seed, min_deciding)]
    if interactions:
        if spec.mechanism not in INTERACTION_MECHANISMS:
            raise NotApplicableError(f"model {model!r} plants {spec.mechanism!r}: --interactions needs "
                                     f"{', '.join(INTERACTION_MECHANISMS)} (pairs whose interaction theory knows)")
        if interaction_budget < 4:
            raise InvalidInputError(f"the interaction budget (evaluations per input) must be at least 4, got "
                                    f"{interaction_budget}")
        cells.append(InteractionCell(model=model, limit=limit, seed=seed, budget=interaction_budget,
                                     min_deciding=min_deciding))
    explanations = [PREFIX + k for k in explanations_for(spec.mechanism)]
    selves = [SelfExplanationCell(model=model, kind=k, limit=limit, seed=seed, min_deciding=min_deciding,
                                  max_new_tokens=max_new_tokens) for k in kinds]
    for n, op in enumerate(operators):
        for e in (*explanations, *measures):
            cells.append(ReportCardCell(model=model, operator=op, explanation=e, limit=limit, seed=seed,
                                        metrics=tuple(metrics), ffid_draws=ffid_draws, random_sets=random_sets,
                                        naopc_beam=naopc_beam, min_deciding=min_deciding,
                                        measure_options=tuple(sorted((str(k), str(v)) for k, v in
                                                                     measure_options.get(e, {}).items()))))
        if n == 0:  # operator-independent, and cheaper than another operator: a card cut short has them
            cells += selves
    return cells if operators else cells + selves


def run_report_card(models: Sequence[str] | str, run: str = "default", measures: Sequence[str] = DEFAULT_MEASURES,
                    operators: Sequence[str] = DEFAULT_OPERATORS, metrics: Sequence[str] = DEFAULT_METRIC_FAMILIES,
                    limit: int = 200, seed: int = 0, ffid_draws: int = 10, random_sets: int = 20, naopc_beam: int = 5,
                    truth_only: bool = False, min_deciding: int = MIN_DECIDING,
                    self_explanations: Sequence[str] | None = None, max_new_tokens: int = DEFAULT_MAX_NEW_TOKENS,
                    measure_options: Mapping[str, Mapping[str, str]] | None = None,
                    interactions: bool = False, interaction_budget: int = DEFAULT_INTERACTION_BUDGET,
                    results_dir: str | os.PathLike | None = None,
                    backend: Backend | None = None,
                    command: str = "engine.groundtruth.run_report_card",
                    progress: Callable[[int, int, dict], None] | None = None,
                    cell_progress: Callable[[object, int, int], None] | None = None,
                    should_stop: Callable[[], bool] | None = None) -> SweepReport:
    """Run the report card of one or more planted models as a resumable sweep into `<results>/groundtruth/<run>`.

    Args:
        models: planted checkpoint id(s); each is checked (learned its mechanism, supports the operators) first.
        run: the run folder; measures, operators, metrics: what to score (DEFAULT_*; the registry's card_families(), OPERATORS).
        limit: deciding inputs per cell; seed, ffid_draws, random_sets, naopc_beam: as ReportCardCell.
        truth_only: only each model's truth cell (its flip rates), nothing scored.
        min_deciding: the fewest deciding inputs a learned mechanism needs (default MIN_DECIDING, 20; lower it for a
            small card on small data: the refusal names it).
        self_explanations: the self-explanation kinds of a prompted LM (SelfExplanationCell); None: all three for
            a prompted LM, none for other models; (): none. max_new_tokens: the longest self-explanation answer.
        measure_options: measure id -> {option: value}, as card_cells.
        interactions, interaction_budget: interaction recovery cells, as card_cells.
        results_dir: the store's root (default `<results>/groundtruth`); backend: engine.sweeps.Backend.
        command, progress, cell_progress, should_stop: as engine.sweeps.run_cells.

    Returns:
        The SweepReport (cells done, skipped, failed).

    Raises:
        MechanismNotLearned: a model did not learn its mechanism (the message gives its flip rate).
    """
    models = [models] if isinstance(models, str) else list(models)
    cells = []
    for m in models:
        cells += card_cells(m, measures, operators, metrics, limit, seed, ffid_draws, random_sets, naopc_beam,
                            truth_only, min_deciding, self_explanations, max_new_tokens, measure_options,
                            interactions, interaction_budget)
    return run_cells(cells, compute_cell, card_store(results_dir), run, backend=backend, command=command,
                     progress=progress, cell_progress=cell_progress, should_stop=should_stop)
