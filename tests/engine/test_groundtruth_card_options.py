"""The report card's measure options (`report-card --option MEASURE:KEY=VALUE`) and its per-process reuse of a
measure's scores across operators within the card's plan (a measure's scores do not depend on the masking operator)."""
from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from engine.errors import InvalidInputError
from engine.groundtruth import card_compute as card
from engine.groundtruth.card_cells import ReportCardCell, card_cells
from engine.groundtruth.mechanisms import PlantSpec


class _CountingExplainer:
    calls: list[dict] = []

    def __init__(self, options):
        self.options = options

    def attribute(self, batch, target, should_stop=None):
        _CountingExplainer.calls.append(self.options)
        return SimpleNamespace(scores=batch.input_ids.float() * 0.5)


MEMO: dict = {}


@pytest.fixture()
def counting(monkeypatch):
    import engine.importance

    _CountingExplainer.calls = []
    monkeypatch.setattr(engine.importance, "get_explainer",
                        lambda name, classifier, memo=True, **options: _CountingExplainer(options))
    MEMO.clear()  # a plan's shared work (CardPlan.memo)
    yield _CountingExplainer.calls
    MEMO.clear()


def _scores(cell, ids):
    batch = SimpleNamespace(input_ids=torch.tensor(ids), maskable=torch.ones(len(ids), len(ids[0]), dtype=torch.bool))
    spec = PlantSpec(base_dataset="rt", mechanism="trigger", words=("vessel",))
    zeros = torch.zeros_like(batch.maskable)
    return card._explanation_scores(cell, None, batch, torch.tensor([1] * len(ids)), zeros, zeros, spec, None, memo=MEMO)


def test_a_measures_scores_are_computed_once_for_every_operator_of_a_process(counting):
    ids = [[5, 6, 7], [8, 9, 10]]
    redacted = ReportCardCell(model="m", operator="redacted", explanation="ig-sign", limit=2)
    delete = ReportCardCell(model="m", operator="delete", explanation="ig-sign", limit=2)
    first, _ = _scores(redacted, ids)
    second, _ = _scores(delete, ids)
    assert len(counting) == 1 and torch.equal(first, second)
    _scores(delete, [[5, 6, 7], [8, 9, 11]])  # other inputs: computed again
    _scores(ReportCardCell(model="m", operator="delete", explanation="grad-l2", limit=2), ids)  # another measure
    _scores(ReportCardCell(model="m", operator="delete", explanation="ig-sign", limit=2,
                           measure_options=(("max_steps", "20"),)), ids)  # other options
    assert len(counting) == 4


def test_measure_options_reach_the_explainer_and_enter_the_key_only_when_given(counting):
    plain = ReportCardCell(model="m", operator="mask", explanation="ig-sign")
    assert "measure_options" not in plain.key()  # the cells stored before options existed keep their keys
    tuned = ReportCardCell(model="m", operator="mask", explanation="ig-sign", measure_options=(("max_steps", "20"),))
    assert tuned.key()["measure_options"] == [["max_steps", "20"]] and tuned.key() != plain.key()
    _scores(tuned, [[1, 2]])
    assert counting == [{"max_steps": "20"}]


@pytest.mark.parametrize("options, says", [
    ({"ig-sign": {"bogus": "1"}}, "ig-sign has no option bogus"),
    ({"loo-sign": {"max_steps": "20"}}, "not among the measures"),
])
def test_card_cells_refuse_an_option_the_measure_lacks_before_loading_anything(options, says):
    with pytest.raises(InvalidInputError, match=says):
        card_cells("no-such-model", measures=["ig-sign"], measure_options=options)


def test_the_option_flag_parses_measure_key_value_and_refuses_other_shapes():
    from engine.cli.report_card import parse_measure_options

    assert parse_measure_options(["ig-sign:max-steps=20", "ig-sign:steps=10", "random:seed=3"]) == {
        "ig-sign": {"max_steps": "20", "steps": "10"}, "random": {"seed": "3"}}
    for bad in ("ig-sign", "ig-sign:max_steps", ":max_steps=2", "ig-sign:=2"):
        with pytest.raises(InvalidInputError, match="MEASURE:KEY=VALUE"):
            parse_measure_options([bad])
