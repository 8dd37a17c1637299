"""The mechanisms of several words (graded-set, redundant, threshold, cancellation): their recipes, the refusals
of bad input with the reason, and the truth established by intervention (engine.groundtruth.truth) on rule models
whose behaviour is exact, so each rate's right value is known: a model that follows the recipe is learned, one that
does not (a swapped order, an ignored word, a threshold of one) is reported with the reason and refused."""
from __future__ import annotations

import hashlib

import numpy as np
import pytest
import torch

from engine.data.types import Dataset, Example
from engine.errors import InvalidInputError
from engine.groundtruth.mechanisms import (
    DEFAULT_STRENGTHS,
    WORD_POOL,
    PlantSpec,
    check_words,
    contains_words,
    default_words,
    planted_dataset,
    remove_words,
)

pytestmark = pytest.mark.usefixtures("one_thread")
SET = WORD_POOL[:4]


def _base(n: int = 4000) -> Dataset:
    rng = np.random.default_rng(0)
    words = ["good", "bad", "film", "plot", "was", "the", "very", "dull", "fine", "acting"]

    def ex(i):
        return Example(primary=" ".join(rng.choice(words, size=8)), label=int(i % 2), uid=f"x{i}")

    splits = {"train": [ex(i) for i in range(n)], "validation": [ex(i) for i in range(n, n + 50)],
              "test": [ex(i) for i in range(n + 50, n + 100)]}
    return Dataset(name="base", classes=("negative", "positive"), metric="accuracy", splits=splits, split_seed=0,
                   max_length=32)


def _held(text: str, words) -> list[str]:
    return [w for w in words if contains_words(text, [w])]


# -- recipes -------------------------------------------------------------------------------------------------------
def test_graded_set_gives_each_word_its_own_share_of_target_labels():
    """Each carrier holds one word; P(target | word i) = q_i (binary: the others get the other class), so the
    shares follow the strengths within 4 binomial standard errors, and q = 0.5 leaves the word uninformative."""
    spec = PlantSpec(base_dataset="base", mechanism="graded-set", words=SET, strengths=DEFAULT_STRENGTHS, rate=0.6)
    train = planted_dataset(spec, _base()).split("train")
    for word, q in zip(SET, DEFAULT_STRENGTHS):
        labels = [e.label for e in train if _held(e.primary, SET) == [word]]
        assert len(labels) > 300
        assert abs(np.mean(labels) - q) < 4 * (q * (1 - q) / len(labels)) ** 0.5 + 0.01, (word, np.mean(labels))
    assert all(len(_held(e.primary, SET)) <= 1 for e in train)


def test_redundant_carriers_hold_one_to_k_words_and_all_get_the_target():
    spec = PlantSpec(base_dataset="base", mechanism="redundant", words=SET[:3], rate=0.5)
    train = planted_dataset(spec, _base()).split("train")
    sizes = [len(_held(e.primary, SET[:3])) for e in train]
    carried = [e for e, n in zip(train, sizes) if n]
    assert all(e.label == 1 for e in carried)
    assert set(sizes) == {0, 1, 2, 3}  # single words and several: removing one of several changes nothing


def test_threshold_sets_the_target_from_m_words_and_keeps_labels_below():
    spec = PlantSpec(base_dataset="base", mechanism="threshold", words=SET, m=2, rate=0.3)
    base = _base()
    train = planted_dataset(spec, base).split("train")
    original = {e.uid: e.label for e in base.split("train")}
    below = [e for e in train if 1 <= len(_held(e.primary, SET)) < 2]
    at = [e for e in train if len(_held(e.primary, SET)) >= 2]
    assert len(below) > 300 and len(at) > 300
    assert all(e.label == 1 for e in at)
    assert all(e.label == original[e.uid] for e in below)


def test_cancellation_sets_each_words_class_alone_and_keeps_the_label_when_both():
    spec = PlantSpec(base_dataset="base", mechanism="cancellation", words=("vessel", "orbit"), rate=0.6)
    base = _base()
    original = {e.uid: e.label for e in base.split("train")}
    train = planted_dataset(spec, base).split("train")
    groups = {key: [e for e in train if tuple(_held(e.primary, spec.words)) == key]
              for key in (("vessel",), ("orbit",), ("vessel", "orbit"))}
    assert all(len(g) > 300 for g in groups.values())
    assert all(e.label == 1 for e in groups[("vessel",)])
    assert all(e.label == 0 for e in groups[("orbit",)])
    assert all(e.label == original[e.uid] for e in groups[("vessel", "orbit")])


def test_older_specs_keep_their_dict_and_name():
    """The new fields are left out at their defaults: a trigger's spec (and so its variant's name and the key of its
    stored truth) is what it was before they existed."""
    assert set(PlantSpec().to_dict()) == {"base_dataset", "mechanism", "words", "rate", "q", "target", "gate", "seed",
                                           "split_seed"}
    spec = PlantSpec(mechanism="threshold", words=SET, m=3)
    assert PlantSpec.from_dict(spec.to_dict()) == spec and "-m3-" in spec.variant_name()
    assert len(PlantSpec(mechanism="redundant", words=WORD_POOL).variant_name()) <= 64


# -- refusals ------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(("kwargs", "says"), [
    ({"mechanism": "graded-set", "words": SET, "strengths": (0.95, 0.8, 0.65, 1.5)}, r"in \(0, 1\]"),
    ({"mechanism": "graded-set", "words": SET, "strengths": (0.95, 0.8, 0.65, 0.0)}, r"in \(0, 1\]"),
    ({"mechanism": "graded-set", "words": SET, "strengths": (0.95, 0.8)}, "one strength per word"),
    ({"mechanism": "graded-set", "words": SET, "strengths": (0.8, 0.95, 0.65, 0.5)}, "decrease strictly"),
    ({"mechanism": "redundant", "words": SET[:2]}, "k >= 3"),
    ({"mechanism": "threshold", "words": SET, "m": 5}, "2 <= m <= k"),
    ({"mechanism": "threshold", "words": SET, "m": 1}, "m = 1 is the redundant mechanism"),
    ({"mechanism": "cancellation", "words": SET[:3]}, r"plants 2 word\(s\)"),
    ({"mechanism": "redundant", "words": SET[:3], "strengths": (0.9, 0.8, 0.7)}, "graded-set mechanism only"),
    ({"mechanism": "trigger", "words": ("vessel",), "m": 2}, "threshold mechanism only"),
])
def test_bad_set_specs_are_refused_with_the_reason(kwargs, says):
    with pytest.raises(InvalidInputError, match=says):
        PlantSpec(**kwargs)


def test_k_larger_than_the_default_vocabulary_is_refused_and_says_to_give_the_words():
    with pytest.raises(InvalidInputError, match=r"k = 9 is larger than the default vocabulary.*give the 9 words"):
        default_words("redundant", 9)
    assert default_words("redundant", 5) == WORD_POOL[:5]


def test_a_set_word_of_several_pieces_is_refused_saying_how_it_tokenises():
    from transformers import AutoTokenizer

    from engine.models.encoders import resolve_encoder

    tokenizer = AutoTokenizer.from_pretrained(resolve_encoder("tiny"))
    check_words(PlantSpec(mechanism="graded-set", words=SET, strengths=DEFAULT_STRENGTHS), tokenizer)
    spec = PlantSpec(mechanism="redundant", words=("vessel", "orbitxq", "lantern"))
    with pytest.raises(InvalidInputError, match=r"'orbitxq' is not one piece.*\['orbit', '##x', '##q'\]"):
        check_words(spec, tokenizer)


@pytest.mark.parametrize(("argv", "says"), [
    (["--mechanism", "redundant", "--k", "9"], "larger than the default vocabulary"),
    (["--mechanism", "graded-set", "--strengths", "0.9", "1.2"], r"in \(0, 1\]"),
    (["--mechanism", "redundant", "--words", "vessel", "orbitxq", "lantern"], "is not one piece"),
    (["--mechanism", "trigger", "--k", "3"], "--k applies to graded-set"),
    (["--mechanism", "threshold", "--k", "3", "--m", "4"], "2 <= m <= k"),
])
def test_the_plant_command_refuses_bad_set_options_before_training(argv, says, models_cache, capsys):
    from engine.cli import main

    assert main(["plant", "--model", "tiny", "--dataset", "toy", *argv]) == 2
    import re

    assert re.search(says, capsys.readouterr().err), says
    assert not models_cache.exists() or not any(models_cache.iterdir())


def test_the_plant_command_fills_the_set_defaults():
    import argparse

    from engine.cli import plant

    parser = argparse.ArgumentParser()
    plant.configure(parser)
    words, strengths, m = plant._set_options(parser.parse_args(["--mechanism", "graded-set"]))
    assert (words, strengths, m) == (WORD_POOL[:4], DEFAULT_STRENGTHS, 0)
    words, strengths, m = plant._set_options(parser.parse_args(["--mechanism", "graded-set", "--k", "3"]))
    assert len(words) == 3 and strengths == (0.95, 0.725, 0.5)
    assert plant._set_options(parser.parse_args(["--mechanism", "threshold"]))[2] == 2
    assert plant._set_options(parser.parse_args(["--mechanism", "cancellation"]))[0] == ("vessel", "orbit")


# -- the truth by intervention on rule models ------------------------------------------------------------------------
class Rule:
    """A classifier whose class-1 logit is an exact rule of the planted words present, plus a clean part c(x) that
    depends only on the text without them (so inserting a word moves only the rule): c uniform in [low, high)."""

    def __init__(self, spec: PlantSpec, rule, low: float = -4.0, high: float = 0.0):
        self.spec, self.rule, self.low, self.high = spec, rule, low, high
        self.id = "rule"
        self.metadata = {"planted": spec.to_dict()}

    def batch_of(self, examples):
        return [e.primary for e in examples]

    def logits(self, texts):
        out = []
        for text in texts:
            clean = remove_words(text, self.spec.words)
            u = int(hashlib.sha256(clean.encode()).hexdigest()[:8], 16) / 16 ** 8
            present = [contains_words(text, [w]) for w in self.spec.words]
            out.append([0.0, self.low + (self.high - self.low) * u + self.rule(present)])
        return torch.tensor(out)


def _truth(spec, rule, **kw):
    from engine.groundtruth.truth import establish_truth

    return establish_truth(Rule(spec, rule, **kw), spec, limit=400)


GRADED = PlantSpec(base_dataset="rt", mechanism="graded-set", words=SET, strengths=DEFAULT_STRENGTHS)


def test_graded_set_truth_confirms_the_recipes_order_by_each_words_insertion_flip():
    """Word i alone flips an input iff c > -s_i, with c uniform in [-4, 0): rates s_i / 4 = 0.875, 0.625, 0.375, 0,
    each Wilson CI (n about 400) far from the next: the order check passes and the model is learned."""
    strengths = (3.5, 2.5, 1.5, 0.0)
    truth = _truth(GRADED, lambda p: sum(s for s, on in zip(strengths, p) if on))
    rates = [truth.rates[f"word_insertion_flip_{i}"]["rate"] for i in (1, 2, 3, 4)]
    assert rates == pytest.approx([0.875, 0.625, 0.375, 0.0], abs=0.08)
    check = truth.options["order_check"]
    assert check["in_order"] and check["apart"] and check["broken"] is None
    rise = check["mean_p_rise"]  # the probability's rise, reported beside the rates, falls in the same order
    assert all(a > b for a, b in zip(rise, rise[1:])) and rise[-1] == pytest.approx(0.0, abs=1e-9)
    assert truth.learned, truth.reason
    assert len(truth.deciding) > 350  # all four together: 7.5 > 4, every input flips


def test_a_model_whose_learned_order_differs_is_reported_and_not_used():
    from engine.groundtruth.truth import MechanismNotLearned

    strengths = (2.5, 3.5, 1.5, 0.0)  # the second word learned stronger than the first
    truth = _truth(GRADED, lambda p: sum(s for s, on in zip(strengths, p) if on))
    check = truth.options["order_check"]
    assert not check["in_order"] and check["broken"] == ["vessel", "orbit"]
    assert not truth.learned and "learned order differs" in truth.reason
    with pytest.raises(MechanismNotLearned, match="learned order differs"):
        truth.require_learned()


def test_saturated_flips_are_ordered_by_the_rise_of_the_targets_probability():
    """Two strong words that both always flip (c in [-4, 0) plus 9 or 6: every input) tie at 100%, so the flip rates
    cannot order them; the rise of P(target) each causes, paired per input, still follows the recipe's order with
    every adjacent difference's CI above 0: the model is learned, and the reason says the flips saturate (on tiny
    the planted graded set failed the order check for this reason alone). With the rises reversed it is refused."""
    strengths = (9.0, 6.0, 1.5, 0.0)
    truth = _truth(GRADED, lambda p: sum(s for s, on in zip(strengths, p) if on))
    check = truth.options["order_check"]
    assert check["rates"][:2] == [1.0, 1.0] and not check["apart"]
    assert check["rise_apart"] and check["rise_broken"] is None and all(g > 0 for g in check["rise_gap_low"])
    assert truth.learned and "saturate" in truth.reason, truth.reason
    reversed_ = _truth(GRADED, lambda p: sum(s for s, on in zip((6.0, 9.0, 1.5, 0.0), p) if on))
    assert not reversed_.learned and reversed_.options["order_check"]["rise_broken"] == ["vessel", "orbit"]


def test_redundant_truth_each_word_alone_decides_and_removing_one_changes_nothing():
    spec = PlantSpec(base_dataset="rt", mechanism="redundant", words=SET[:3])
    truth = _truth(spec, lambda p: 6.0 * min(1, sum(p)))
    for i in (1, 2, 3):
        assert truth.rates[f"single_insertion_flip_{i}"]["rate"] == 1.0
        assert truth.rates[f"single_removal_flip_{i}"]["rate"] == 0.0
    assert truth.learned, truth.reason
    ignored = _truth(spec, lambda p: 6.0 * min(1, p[0] + p[1]))  # the third word does nothing
    assert not ignored.learned and "lantern 0%" in ignored.reason


def test_threshold_truth_separates_below_from_at_the_threshold():
    spec = PlantSpec(base_dataset="rt", mechanism="threshold", words=SET, m=2)
    truth = _truth(spec, lambda p: 6.0 * (sum(p) >= 2))
    assert truth.rates["below_threshold_insertion_flip"]["rate"] == 0.0
    assert truth.rates["at_threshold_insertion_flip"]["rate"] == 1.0
    assert truth.rates["single_removal_flip_1"]["rate"] == 0.0  # 4 present, 3 left: still above
    assert truth.learned, truth.reason
    one = _truth(spec, lambda p: 6.0 * (sum(p) >= 1))  # a threshold of one is not the planted one
    assert not one.learned and "threshold of 2 is not learned" in one.reason


def test_cancellation_truth_each_word_sets_its_class_alone_and_both_offset():
    spec = PlantSpec(base_dataset="rt", mechanism="cancellation", words=("vessel", "orbit"))
    truth = _truth(spec, lambda p: 6.0 * p[0] - 6.0 * p[1], low=-2.0, high=2.0)
    assert truth.rates["insertion_flip"]["rate"] == 1.0 and truth.rates["other_insertion_flip"]["rate"] == 1.0
    assert truth.rates["both_change"]["rate"] == 0.0
    assert truth.learned and len(truth.deciding) == len(truth.inputs), truth.reason
    lopsided = _truth(spec, lambda p: 6.0 * p[0] - 6.0 * p[1] + 6.0 * (p[0] and p[1]), low=-2.0, high=2.0)
    assert lopsided.rates["both_change"]["rate"] > 0.3  # both together act as the target's word: no offset
    assert len(lopsided.deciding) < len(lopsided.inputs) / 2


@pytest.mark.parametrize("option", ["--k", "--strengths", "--m", "--quiet"])
def test_every_new_plant_option_is_taught_by_help_with_an_example_the_parser_accepts(option):
    """Each new option has its own help text and at least one epilog example that uses it; that example parses
    and gives the option the value written (--help must teach a command that runs, not one the parser refuses)."""
    import shlex

    from engine.cli import build_parser

    parser = build_parser(["plant"])
    sub = parser._subparsers._group_actions[0].choices["plant"]
    action = next(a for a in sub._actions if option in a.option_strings)
    assert action.help and len(action.help) > 20
    examples = [line.strip().split("#")[0] for line in sub.epilog.splitlines()
                if line.strip().startswith("python -m engine") and option in shlex.split(line.split("#")[0])]
    assert examples, f"no --help example uses {option}"
    for example in examples:
        argv = shlex.split(example)[3:]
        args = parser.parse_args(argv)
        given = argv[argv.index(option) + 1] if option != "--quiet" else None
        value = getattr(args, action.dest)
        if option == "--strengths":
            assert value[0] == float(given)
        elif option == "--quiet":
            assert value is True
        else:
            assert value == int(given)
