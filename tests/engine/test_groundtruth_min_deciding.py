"""`min_deciding`: the fewest deciding inputs a planted model needs before its report card is scored (default
MIN_DECIDING = 20). A small card on small data lowers it; the default still refuses, naming the parameter.

The planted model is hand-built (tests/handbuilt_models.py, the `or` head with k = 5): the word "trig" adds 5 to
class 1's logit, "bad" -2, "good" +1. On a test split of 12 texts with "bad" (predicted class 0) and 18 with "good"
(class 1 already), inserting "trig" turns exactly the 12 "bad" ones to class 1: an insertion flip of 12 / 12
(Wilson lower bound 0.76, above LEARNED_LOWER_BOUND) but only 12 deciding inputs, fewer than 20."""
from __future__ import annotations

import numpy as np
import pytest
from card_stubs import card_stubs  # noqa: F401 (a fixture)
from handbuilt_models import batch_of, handbuilt

from engine.data.types import Dataset, Example
from engine.errors import InvalidInputError
from engine.groundtruth import MechanismNotLearned, PlantSpec, establish_truth
from engine.groundtruth.truth import MIN_DECIDING

pytestmark = pytest.mark.usefixtures("one_thread")
MODEL = "handbuilt-planted-trig"
SPEC = PlantSpec(base_dataset="handbuilt-words", mechanism="trigger", words=("trig",), rate=0.5, seed=0)
N_DECIDING = 12


def _words_dataset() -> Dataset:
    """Texts of the hand-built vocabulary: test = 12 'bad' (class 0) and 18 'good' (class 1) texts."""
    rng = np.random.default_rng(0)
    filler = ["the", "film", "plot", "was"]

    def ex(uid: str, word: str) -> Example:
        words = [*rng.choice(filler, size=4), word]
        rng.shuffle(words)
        return Example(primary=" ".join(words), label=int(word == "good"), uid=uid)

    def split(name: str, n_bad: int, n_good: int) -> list[Example]:
        return [ex(f"{name}{i}", "bad" if i < n_bad else "good") for i in range(n_bad + n_good)]

    return Dataset(name="handbuilt-words", classes=("neg", "pos"), metric="accuracy", split_seed=0, max_length=16,
                   splits={"train": split("train", 10, 10), "validation": split("val", 5, 5),
                           "test": split("test", N_DECIDING, 18)})


@pytest.fixture()
def planted(monkeypatch, card_stubs):  # noqa: F811
    """The hand-built planted classifier, its data served as the base dataset, and the card loading it for MODEL
    (tests/card_stubs.py)."""
    import engine.data

    classifier = handbuilt("or", k=5.0)
    classifier.metadata.update({"id": MODEL, "planted": SPEC.to_dict()})
    classifier.batch_of = lambda examples: batch_of([e.primary for e in examples])  # its own whitespace tokenizer
    data = _words_dataset()
    monkeypatch.setattr(engine.data, "get_dataset", lambda name, split_seed=0: data)
    card_stubs.classifiers[MODEL] = classifier
    return classifier


def test_the_toy_mechanism_is_learned_but_decides_fewer_inputs_than_the_default(planted):
    truth = establish_truth(planted, SPEC)
    assert int(truth.inputs["decides"].sum()) == N_DECIDING < MIN_DECIDING
    assert truth.rates["insertion_flip"]["k"] == truth.rates["insertion_flip"]["n"] == N_DECIDING
    assert not truth.learned and truth.options["min_deciding"] == MIN_DECIDING
    with pytest.raises(MechanismNotLearned, match=r"12 inputs are decided.*>= 20 deciding inputs \(min_deciding\).*"
                                                  r"lower min_deciding \(report-card --min-deciding, now 20\)"):
        truth.require_learned()


def test_a_lower_min_deciding_accepts_it_and_is_recorded(planted):
    truth = establish_truth(planted, SPEC, min_deciding=N_DECIDING)
    assert truth.learned and truth.options["min_deciding"] == N_DECIDING
    truth.require_learned()
    assert not establish_truth(planted, SPEC, min_deciding=N_DECIDING + 1).learned  # the bound is inclusive


def test_a_refusal_for_a_weak_flip_rate_does_not_point_at_min_deciding(planted, monkeypatch):
    """With enough deciding inputs, lowering min_deciding would not help: the message does not suggest it."""
    import engine.groundtruth.truth as truth_module

    monkeypatch.setattr(truth_module, "LEARNED_LOWER_BOUND", 0.9)  # 12 / 12 has a Wilson lower bound of 0.76
    truth = establish_truth(planted, SPEC, min_deciding=5)
    with pytest.raises(MechanismNotLearned) as refused:
        truth.require_learned()
    assert "CI's lower end >= 90%" in str(refused.value) and "min-deciding" not in str(refused.value)


def test_card_cells_refuse_by_default_and_carry_a_lower_min_deciding_into_every_cell(planted):
    from engine.groundtruth.card_cells import TruthCell, card_cells

    options = dict(measures=("random",), operators=("mask",), metrics=("comprehensiveness",), limit=5)
    with pytest.raises(MechanismNotLearned, match="--min-deciding"):
        card_cells(MODEL, **options)
    cells = card_cells(MODEL, **options, min_deciding=10)
    assert isinstance(cells[0], TruthCell) and len(cells) > 1
    assert {c.min_deciding for c in cells} == {10}
    assert all(c.key()["min_deciding"] == 10 for c in cells)
    # at the default the key is what it was before the parameter existed, so stored runs still resume
    assert TruthCell(MODEL).key() == {"model": MODEL, "seed": 0, "kind": "truth by intervention"}


@pytest.mark.parametrize("bad", [0, -3, 2.5, True])
def test_min_deciding_below_one_or_not_whole_is_refused(planted, bad):
    with pytest.raises(InvalidInputError, match="min_deciding must be a whole number >= 1"):
        establish_truth(planted, SPEC, min_deciding=bad)


def test_the_cli_passes_min_deciding_to_the_card(monkeypatch):
    """`report-card --min-deciding 5` reaches the card's plan (which checks the models before any work)."""
    import argparse

    import engine.groundtruth.card_plan as card
    from engine.cli import report_card

    parser = argparse.ArgumentParser()
    report_card.configure(parser)
    assert parser.parse_args(["--model", "m"]).min_deciding == MIN_DECIDING
    args = parser.parse_args(["--model", "m", "--min-deciding", "5", "--limit", "5"])
    seen = {}

    class Stop(Exception):
        pass

    def fake_plan_card(model, config):
        seen.update(vars(config))
        raise Stop

    monkeypatch.setattr(card, "plan_card", fake_plan_card)
    with pytest.raises(Stop):
        report_card.run(args)
    assert seen["min_deciding"] == 5
