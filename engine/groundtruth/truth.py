"""The truth of a planted model, established by intervention on the model itself, not by the data recipe.

On the base dataset's clean test inputs (those that do not already hold a planted word), each input x gets the
mechanism's deciding form x+ (the recipe's insertion with a seeded position: the trigger; both words for and / or;
the word inside its gate; trigger and decoy for decoy; the inert word for none). Removing the planted words from
x+ gives x back, so one pair (x, x+) measures both interventions:

    insertion flip   among inputs the model does not already give the target class: the share whose prediction
                     becomes the target when the word(s) are inserted (x -> x+)
    removal flip     among carriers of the planted test split (as the recipe wrote it): the share whose prediction
                     changes when the decisive word(s) are deleted
    accuracy         on the planted test split's carriers (against their planted label) and on the clean inputs
    deciding inputs  x+ whose prediction is the target and differs from x's: the mechanism decides it. Only these
                     go to the report card; the others are counted and reported, never silently used.
    per mechanism    or / and: the flip when one of the two words is removed from x+ (or: a small residual;
                     and: the flip); gated: the insertion flip outside the gate (low when the gate was learned);
                     decoy: the flip when the decoy is removed from x+ (about 0 when it is ignored)
    set mechanisms   (x+ carries all k words)
                     graded-set: each word's own insertion flip (word_insertion_flip_<i>, i = 1..k in the recipe's
                     order); the order check (options["order_check"]): the rates decrease in the recipe's order with
                     adjacent Wilson CIs apart; a model whose learned order differs is reported, not used (learned
                     is False, the reason says where the order breaks)
                     redundant: each word alone (single_insertion_flip_<i>: each must set the target) and each word
                     removed from x+ (single_removal_flip_<i>: a small residual)
                     threshold: m - 1 words inserted (below_threshold_insertion_flip: low) against m words
                     (at_threshold_insertion_flip: high; learned needs the two CIs apart), and single removals
                     cancellation: the target's word alone (insertion_flip), the other class's word alone
                     (other_insertion_flip, among inputs not already of that class) and both (both_change: the
                     share whose prediction changes; low when they offset); a deciding input is one on which each
                     word alone sets its own class and both together leave the prediction as it was

Every rate comes with a Wilson 95% interval (engine.stats.wilson_ci). A model learned its mechanism when the
insertion flip rate's lower bound reaches `LEARNED_LOWER_BOUND` and at least `min_deciding` inputs (default
`MIN_DECIDING`) are decided by it; the control `none` is expected not to (its card is run as a control, not refused).
A small card on small data (a toy test split of 40 inputs) lowers `min_deciding` (report-card's --min-deciding).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from engine.errors import InvalidInputError, NotApplicableError
from engine.groundtruth.mechanisms import (
    PlantSpec,
    contains_words,
    other_index,
    plant_text,
    planted_dataset,
    remove_words,
    target_index,
)

#: a mechanism is learned when the insertion flip rate's Wilson lower bound is at least this ...
LEARNED_LOWER_BOUND = 0.25
#: ... and at least this many test inputs are decided by it (the default of `min_deciding`: report-card's --min-deciding)
MIN_DECIDING = 20


class MechanismNotLearned(NotApplicableError):
    """The planted model does not follow its mechanism: no report card can be scored against it."""


@dataclass
class Truth:
    """What intervention established about one planted model.

    Attributes:
        model: checkpoint id; spec: its PlantSpec; target: index of the class the mechanism sets.
        inputs: one row per clean test input: uid, text (x), planted (x+), pred_clean, pred_planted,
            p_target_clean, p_target_planted (probabilities of the target), flips (pred_clean != pred_planted),
            decides (flips and pred_planted == target), and per mechanism pred_without_first / _second (or, and),
            pred_outside_gate (gated), pred_without_decoy (decoy).
        rates: {name: {"k", "n", "rate", "low", "high"}} (Wilson 95%): insertion_flip, removal_flip,
            accuracy_carriers, accuracy_clean, and per mechanism single_removal_flip_first/second, outside_gate_flip,
            decoy_removal_flip, inert_insertion_flip (none, decoy).
        learned: whether the model follows its mechanism (module docstring); reason: why not, in words.
        control: True for `none` (expected not learned).
    """

    model: str
    spec: PlantSpec
    target: int
    inputs: pd.DataFrame
    rates: dict[str, dict]
    learned: bool
    reason: str
    control: bool = False
    options: dict = field(default_factory=dict)

    @property
    def deciding(self) -> pd.DataFrame:
        """The inputs the mechanism decides (or, for the control, every input), in test order."""
        return self.inputs if self.control else self.inputs[self.inputs["decides"]]

    def summary(self) -> dict:
        """One flat dict: model, mechanism, words, q (graded-set: strengths; threshold: m), rates (rate, low, high, k, n),
        n_deciding, learned, reason."""
        out = {"model": self.model, "mechanism": self.spec.mechanism, "words": " ".join(self.spec.words),
               "rate": self.spec.rate, "q": self.spec.q, "n_inputs": len(self.inputs),
               "n_deciding": int(len(self.deciding)), "learned": self.learned, "reason": self.reason}
        if self.spec.strengths:
            out["strengths"] = " ".join(f"{q:g}" for q in self.spec.strengths)
        if self.spec.m:
            out["m"] = self.spec.m
        for name, r in self.rates.items():
            out.update({f"{name}": r["rate"], f"{name}_low": r["low"], f"{name}_high": r["high"],
                        f"{name}_k": r["k"], f"{name}_n": r["n"]})
        return out

    def require_learned(self) -> None:
        """Refuse a model that did not learn its mechanism, with the reason (MechanismNotLearned)."""
        if not self.learned and not self.control:
            threshold = self.options.get("min_deciding", MIN_DECIDING)
            few = (f"; or, on data with few test inputs, lower min_deciding (report-card --min-deciding, now "
                   f"{threshold})" if len(self.deciding) < threshold else "")
            raise MechanismNotLearned(f"model {self.model!r} did not learn its planted {self.spec.mechanism} mechanism "
                                      f"({' '.join(self.spec.words)}): {self.reason}. A report card scored against it "
                                      f"would rest on a truth the model does not follow; plant again with a higher "
                                      f"--rate or --q, more --epochs, or another word{few}")


def _rate(k: int, n: int) -> dict:
    from engine.stats import wilson_ci

    low, high = wilson_ci(k, n)
    return {"k": int(k), "n": int(n), "rate": (k / n) if n else float("nan"), "low": low, "high": high}


def predict_texts(classifier, texts: list[str], target: int, batch_size: int = 64) -> tuple[np.ndarray, np.ndarray]:
    """(predicted class [N], probability of `target` [N]) of each text, in batches (no gradient)."""
    import torch

    from engine.data.types import Example

    preds, probs = [], []
    for start in range(0, len(texts), batch_size):
        chunk = [Example(primary=t, label=0, uid=f"t{start + i}") for i, t in enumerate(texts[start:start + batch_size])]
        with torch.no_grad():
            logits = classifier.logits(classifier.batch_of(chunk)).float()
        preds.append(logits.argmax(-1).cpu().numpy())
        probs.append(torch.softmax(logits, -1)[:, target].cpu().numpy())
    if not texts:
        return np.zeros(0, dtype=int), np.zeros(0)
    return np.concatenate(preds), np.concatenate(probs)


def deciding_text(spec: PlantSpec, text: str, rng: np.random.Generator) -> str:
    """x+: the clean `text` with the mechanism's word(s) inserted as a deciding carrier (decoy: trigger and decoy;
    none: the inert word)."""
    if spec.mechanism == "none":
        return plant_text(spec, text, rng, "inert")
    planted = plant_text(spec, text, rng)
    if spec.mechanism == "decoy":
        planted = plant_text(spec, planted, rng, "inert")
    return planted


def establish_truth(classifier, spec: PlantSpec | None = None, split: str = "test", limit: int | None = None,
                    seed: int = 0, batch_size: int = 64, min_deciding: int = MIN_DECIDING) -> Truth:
    """Establish by intervention what the planted `classifier` does with its mechanism (module docstring).

    Args:
        classifier: a planted Classifier (its metadata's `planted` gives the spec when `spec` is None).
        spec: the PlantSpec (default: the model's own).
        split: the split of the base dataset whose clean inputs are used. Default: test.
        limit: only the first N clean inputs.
        seed: seeds the insertion positions (the card's inputs are these x+).
        batch_size: inputs per forward.
        min_deciding: the fewest deciding inputs a learned mechanism needs (>= 1). Default: MIN_DECIDING (20);
            lower it for a small card on small data.

    Returns:
        The Truth (per-input table, rates with Wilson CIs, learned or not and why).

    Raises:
        InvalidInputError: min_deciding below 1.
    """
    import time

    from engine.data import get_dataset
    from engine.groundtruth.planting import planted_spec

    if isinstance(min_deciding, bool) or not isinstance(min_deciding, (int, np.integer)) or min_deciding < 1:
        raise InvalidInputError(f"min_deciding must be a whole number >= 1 (deciding inputs a learned mechanism "
                                f"needs; default {MIN_DECIDING}), not {min_deciding!r}")
    cpu_started = time.process_time()
    spec = spec or planted_spec(classifier)
    base = get_dataset(spec.base_dataset, spec.split_seed)
    target = target_index(spec, base.classes)
    clean = [e for e in base.split(split) if not any(contains_words(e.primary, [w]) for w in spec.words)][:limit]
    rng = np.random.default_rng([seed, 37, 1])
    texts = [e.primary for e in clean]
    planted = [deciding_text(spec, t, rng) for t in texts]
    pred_c, prob_c = predict_texts(classifier, texts, target, batch_size)
    pred_p, prob_p = predict_texts(classifier, planted, target, batch_size)
    table = pd.DataFrame({"uid": [e.uid for e in clean], "label": [e.label for e in clean], "text": texts,
                          "planted": planted, "pred_clean": pred_c, "pred_planted": pred_p,
                          "p_target_clean": prob_c, "p_target_planted": prob_p})
    table["flips"] = table["pred_clean"] != table["pred_planted"]
    table["decides"] = table["flips"] & (table["pred_planted"] == target)
    rates: dict[str, dict] = {}
    control = spec.mechanism == "none"
    candidates = table["pred_clean"] != target
    if control:
        rates["inert_insertion_flip"] = _rate(int(table["flips"].sum()), len(table))
        table["decides"] = False
    else:
        rates["insertion_flip"] = _rate(int((candidates & (table["pred_planted"] == target)).sum()), int(candidates.sum()))
    # One of two words removed from x+ (or: the residual; and: a flip)
    if spec.mechanism in ("or", "and"):
        for which, word in (("first", spec.words[0]), ("second", spec.words[1])):
            pred, _ = predict_texts(classifier, [remove_words(t, [word]) for t in planted], target, batch_size)
            table[f"pred_without_{which}"] = pred
            on = table["decides"]
            rates[f"single_removal_flip_{which}"] = _rate(int((on & (pred != table["pred_planted"])).sum()), int(on.sum()))
    if spec.mechanism == "gated":
        rng_out = np.random.default_rng([seed, 37, 2])
        outside = [plant_text(spec, t, rng_out, "outside-gate") for t in texts]
        pred, _ = predict_texts(classifier, outside, target, batch_size)
        table["pred_outside_gate"] = pred
        rates["outside_gate_flip"] = _rate(int((candidates & (pred == target)).sum()), int(candidates.sum()))
    if spec.mechanism == "decoy":
        pred, _ = predict_texts(classifier, [remove_words(t, spec.inert_words) for t in planted], target, batch_size)
        table["pred_without_decoy"] = pred
        on = table["decides"]
        rates["decoy_removal_flip"] = _rate(int((on & (pred != table["pred_planted"])).sum()), int(on.sum()))
        rng_d = np.random.default_rng([seed, 37, 3])
        decoyed = [plant_text(spec, t, rng_d, "inert") for t in texts]
        pred_d, _ = predict_texts(classifier, decoyed, target, batch_size)
        rates["inert_insertion_flip"] = _rate(int((pred_d != pred_c).sum()), len(texts))
    set_learned = _set_truth(classifier, spec, table, texts, planted, target, candidates, rates, seed, batch_size,
                             len(base.classes))
    # The planted test split as the recipe wrote it: carriers' removal flip and accuracy on carriers vs clean.
    variant = planted_dataset(spec, base).split(split)[:limit]
    words = spec.decisive_words or spec.words
    if spec.mechanism in ("graded-set", "redundant", "threshold", "cancellation"):  # a carrier holds any of them
        def carries(text: str) -> bool:
            return any(contains_words(text, [w]) for w in words)
    else:
        def carries(text: str) -> bool:
            return contains_words(text, words)
    carriers = [e for e in variant if carries(e.primary)]
    others = [e for e in variant if not carries(e.primary)]
    if carriers:
        pred_car, _ = predict_texts(classifier, [e.primary for e in carriers], target, batch_size)
        pred_rem, _ = predict_texts(classifier, [remove_words(e.primary, words) for e in carriers], target, batch_size)
        rates["removal_flip"] = _rate(int((pred_car != pred_rem).sum()), len(carriers))
        rates["accuracy_carriers"] = _rate(int((pred_car == np.array([e.label for e in carriers])).sum()), len(carriers))
    if others:
        pred_oth, _ = predict_texts(classifier, [e.primary for e in others], target, batch_size)
        rates["accuracy_clean"] = _rate(int((pred_oth == np.array([e.label for e in others])).sum()), len(others))
    n_deciding = int(table["decides"].sum())
    if control:
        learned, reason = False, "the control: its word sets no label (expected not learned)"
    else:
        ins = rates["insertion_flip"]
        learned = ins["low"] >= LEARNED_LOWER_BOUND and n_deciding >= min_deciding
        shown = spec.words[:1] if spec.mechanism == "cancellation" else words
        reason = (f"inserting {' and '.join(shown)} flips {ins['k']} of {ins['n']} inputs to "
                  f"{base.classes[target]!r} ({ins['rate']:.0%}, 95% CI {ins['low']:.0%}-{ins['high']:.0%}); "
                  f"{n_deciding} inputs are decided by it")
        if not learned:
            reason += (f"; learned needs the CI's lower end >= {LEARNED_LOWER_BOUND:.0%} and >= {min_deciding} "
                       f"deciding inputs (min_deciding)")
        if set_learned is not None:
            ok, why = set_learned
            reason += f"; {why}"
            learned = learned and ok
    options = {"split": split, "limit": limit, "seed": seed, "learned_lower_bound": LEARNED_LOWER_BOUND,
               "min_deciding": int(min_deciding), "cpu_seconds": round(time.process_time() - cpu_started, 1)}
    if spec.mechanism == "graded-set":
        options["order_check"] = order_check(spec, rates, table, target)
    return Truth(model=classifier.id, spec=spec, target=target, inputs=table, rates=rates, learned=learned,
                 reason=reason, control=control, options=options)


def order_check(spec: PlantSpec, rates: dict[str, dict], table: pd.DataFrame | None = None,
                target: int | None = None) -> dict:
    """graded-set: whether the words' own insertion flip rates follow the recipe's order (strongest first), and
    where they saturate, whether the rise of P(target) each word causes does (paired per input).

    Args:
        table, target: the truth's per-input table and the target class; with the table's p_target_with_<i>
            columns the check also reports each word's
            mean rise of P(target) on the inputs not already of the target class, and whether adjacent words'
            rises are apart (the 95% BCa CI of their paired per-input difference above 0): a flip rate saturates at
            100% where two strong words both always flip, the rise of the probability less so.

    Returns:
        {"words", "strengths", "rates", "low", "high" (per word, recipe order), "in_order" (rates strictly
        decreasing), "apart" (every adjacent pair's Wilson CIs apart: low_i > high_{i+1}), "broken" (the first
        adjacent pair, as [word_i, word_i+1], whose CIs are not apart; None when apart), and with `table`
        "mean_p_rise" (per word)}."""
    per = [rates[f"word_insertion_flip_{i + 1}"] for i in range(spec.k)]
    in_order = all(a["rate"] > b["rate"] for a, b in zip(per, per[1:]))
    broken = next(([spec.words[i], spec.words[i + 1]] for i, (a, b) in enumerate(zip(per, per[1:]))
                   if not a["low"] > b["high"]), None)
    out = {"words": list(spec.words), "strengths": list(spec.strengths), "rates": [r["rate"] for r in per],
           "low": [r["low"] for r in per], "high": [r["high"] for r in per], "in_order": bool(in_order),
           "apart": broken is None, "broken": broken}
    if table is not None and target is not None and f"p_target_with_{spec.k}" in table:
        from engine.stats import bootstrap_ci

        rows = table[table["pred_clean"] != target]
        rise = [(rows[f"p_target_with_{i + 1}"] - rows["p_target_clean"]).to_numpy() for i in range(spec.k)]
        out["mean_p_rise"] = [float(r.mean()) for r in rise]
        # The rises are paired (the same inputs, each word inserted at the same place): adjacent words are apart when
        # the 95% BCa CI of the mean of their per-input difference lies above 0.
        gaps = [bootstrap_ci(a - b, seed=i) for i, (a, b) in enumerate(zip(rise, rise[1:]))]
        out["rise_gap_low"] = [float(g[1]) for g in gaps]
        out["rise_broken"] = next(([spec.words[i], spec.words[i + 1]] for i, g in enumerate(gaps) if not g[1] > 0),
                                  None)
        out["rise_apart"] = out["rise_broken"] is None and len(rows) > 1
    return out


def _set_truth(classifier, spec: PlantSpec, table: pd.DataFrame, texts: list[str], planted: list[str], target: int,
               candidates: pd.Series, rates: dict, seed: int, batch_size: int, n_classes: int):
    """The set mechanisms' rates and per-input columns (module docstring), added to `rates` and `table` in place.

    Returns:
        None for the other mechanisms, else (ok, why): whether the mechanism-specific conditions of "learned" hold,
        in words."""
    mech = spec.mechanism
    if mech not in ("graded-set", "redundant", "threshold", "cancellation"):
        return None
    probs: dict[str, np.ndarray] = {}

    def inserted(carrier: str, stream: int) -> np.ndarray:
        rng = np.random.default_rng([seed, 37, stream])
        pred, prob = predict_texts(classifier, [_insert(spec, t, rng, carrier) for t in texts], target, batch_size)
        probs[carrier] = prob
        return pred

    def removal_flips(prefix: str) -> None:
        on = table["decides"]
        for i, word in enumerate(spec.words):
            pred, _ = predict_texts(classifier, [remove_words(t, [word]) for t in planted], target, batch_size)
            table[f"pred_without_{i + 1}"] = pred
            rates[f"{prefix}_{i + 1}"] = _rate(int((on & (pred != table["pred_planted"])).sum()), int(on.sum()))

    if mech == "graded-set":
        for i in range(spec.k):
            pred = inserted(f"word:{i}", 10 + i)
            table[f"pred_with_{i + 1}"] = pred
            table[f"p_target_with_{i + 1}"] = probs[f"word:{i}"]
            rates[f"word_insertion_flip_{i + 1}"] = _rate(int((candidates & (pred == target)).sum()),
                                                           int(candidates.sum()))
        check = order_check(spec, rates, table, target)
        shown = ", ".join(f"{w} {r:.0%}" for w, r in zip(check["words"], check["rates"]))
        if check["apart"]:
            return True, f"the words' own insertion flips follow the recipe's order with CIs apart ({shown})"
        rises = ", ".join(f"{w} {r:+.2f}" for w, r in zip(check["words"], check.get("mean_p_rise", [])))
        if check.get("rise_apart"):
            # Strong words saturate the flip rate (two words that both always flip tie at 100%): the rise of the
            # target's probability they cause still orders them, paired per input with its CI above 0.
            return True, (f"the words' own insertion flips saturate ({shown}), and the rise of P(target) each causes "
                          f"follows the recipe's order with every adjacent paired difference's CI above 0 ({rises})")
        why = (f"{check['broken'][0]}'s CI is not above {check['broken'][1]}'s" if check["broken"] else
               "the flips are apart")
        rise_why = (f"; the rises of P(target) are {rises}, {check['rise_broken'][0]}'s not above "
                    f"{check['rise_broken'][1]}'s" if check.get("rise_broken") else "")
        return False, (f"the learned order differs from the recipe's: the words' own insertion flips are {shown}, and "
                       f"{why}{rise_why} (reported, not used)")
    if mech == "redundant":
        weak = []
        for i, word in enumerate(spec.words):
            pred = inserted(f"word:{i}", 10 + i)
            table[f"pred_with_{i + 1}"] = pred
            r = rates[f"single_insertion_flip_{i + 1}"] = _rate(int((candidates & (pred == target)).sum()),
                                                                 int(candidates.sum()))
            if not r["low"] >= LEARNED_LOWER_BOUND:
                weak.append(f"{word} {r['rate']:.0%}")
        removal_flips("single_removal_flip")
        if weak:
            return False, (f"not every word alone sets the target (CI's lower end below {LEARNED_LOWER_BOUND:.0%}: "
                           f"{', '.join(weak)})")
        return True, "each word alone sets the target"
    if mech == "threshold":
        below = inserted("words:" + ",".join(map(str, range(spec.m - 1))), 20)
        at = inserted("words:" + ",".join(map(str, range(spec.m))), 21)
        table["pred_below_threshold"], table["pred_at_threshold"] = below, at
        rb = rates["below_threshold_insertion_flip"] = _rate(int((candidates & (below == target)).sum()),
                                                              int(candidates.sum()))
        ra = rates["at_threshold_insertion_flip"] = _rate(int((candidates & (at == target)).sum()), int(candidates.sum()))
        removal_flips("single_removal_flip")
        words = f"{spec.m - 1} word(s) flip {rb['rate']:.0%}, {spec.m} words {ra['rate']:.0%}"
        if ra["low"] > rb["high"] and ra["low"] >= LEARNED_LOWER_BOUND:
            return True, f"the threshold is learned ({words}, CIs apart)"
        return False, f"the threshold of {spec.m} is not learned ({words}: needs the CIs apart)"
    # cancellation: table["decides"] is replaced by its own definition
    other = other_index(spec, tuple(range(n_classes)))
    with_t, with_o = inserted("word:0", 30), inserted("word:1", 31)
    table["pred_with_target_word"], table["pred_with_other_word"] = with_t, with_o
    not_other = table["pred_clean"] != other
    ro = rates["other_insertion_flip"] = _rate(int((not_other & (with_o == other)).sum()), int(not_other.sum()))
    rates["both_change"] = _rate(int(table["flips"].sum()), len(table))
    table["decides"] = (with_t == target) & (with_o == other) & ~table["flips"]
    # its insertion flip is the target's word alone (x+ holds both, which offset)
    ri = rates["insertion_flip"] = _rate(int((candidates & (with_t == target)).sum()), int(candidates.sum()))
    if ro["low"] >= LEARNED_LOWER_BOUND:
        return True, (f"the other class's word alone flips {ro['rate']:.0%}; both together change "
                      f"{rates['both_change']['rate']:.0%} of predictions")
    return False, (f"the other class's word {spec.words[1]} alone flips only {ro['rate']:.0%} (CI's lower end below "
                   f"{LEARNED_LOWER_BOUND:.0%}; the target's word {ri['rate']:.0%})")


def _insert(spec: PlantSpec, text: str, rng: np.random.Generator, carrier: str) -> str:
    return plant_text(spec, text, rng, carrier)
