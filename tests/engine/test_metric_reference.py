"""The project's faithfulness correlation, Sensitivity-n, sparseness and complexity equal Quantus 0.6's on the same
inputs, explanations and perturbed subsets (tests/data/quantus_reference.json, made by scripts/tools/reference_quantus.py in
a virtualenv of its own: its command is in the file). The model is the tests' `known_classifier` (p_1 = sigmoid of the
sum of the tokens' weights; [MASK] weighs 0), which the script's numpy model copies; the subsets Quantus drew are fed
to the project's metric in place of its own draw. Tolerances: 1e-9 for the correlations and complexity (float64 both
sides), 1e-6 for sparseness (Quantus adds 1e-7 to every attribution before its Gini index)."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

REFERENCE = json.loads((Path(__file__).resolve().parents[1] / "data" / "quantus_reference.json").read_text())
CASES = REFERENCE["cases"]


def _case(known_classifier, case):
    classifier, batch_of = known_classifier(REFERENCE["weights"])
    batch = batch_of([case["tokens"]])
    scores = torch.zeros(batch.input_ids.shape, dtype=torch.float64)
    scores[0, 1:1 + len(case["tokens"])] = torch.tensor(case["scores"], dtype=torch.float64)  # after [CLS]
    return classifier, batch, scores, torch.ones(1, dtype=torch.long)


def _feeding(monkeypatch, module, in_call_order: list[list[list[int]]]):
    """Replace `module`'s subset draws, one call after another, by the subsets Quantus drew (feature i = the token
    after [CLS], at position i + 1); each call's size is checked against the recorded subsets'."""
    calls = iter(in_call_order)

    def recorded(batch, b, n_subsets, size, seed):
        drawn = next(calls)
        assert len(drawn) == n_subsets and all(len(s) == size for s in drawn)
        out = torch.zeros(n_subsets, batch.input_ids.shape[1], dtype=torch.bool)
        for s, subset in enumerate(drawn):
            out[s, [i + 1 for i in subset]] = True
        return out

    monkeypatch.setattr(module, "fixed_size_subsets", recorded)


@pytest.mark.parametrize("case", CASES, ids=[f"row{c['row']}-{c['explanation']}" for c in CASES])
def test_faithfulness_correlation_equals_quantus_on_the_same_subsets(known_classifier, monkeypatch, case):
    import engine.faithfulness.correlation as correlation

    classifier, batch, scores, target = _case(known_classifier, case)
    size = max(1, round(0.2 * len(case["tokens"])))
    assert all(len(s) == size for s in case["faithfulness_correlation_subsets"])
    _feeding(monkeypatch, correlation, [case["faithfulness_correlation_subsets"]])
    ours = correlation.faithfulness_correlation(classifier, batch, scores, target, subsets=REFERENCE["subsets"])
    assert ours.values["faithfulness-correlation"][0] == pytest.approx(case["faithfulness_correlation"], abs=1e-9)


@pytest.mark.parametrize("case", CASES, ids=[f"row{c['row']}-{c['explanation']}" for c in CASES])
def test_sensitivity_n_equals_quantus_faithfulness_correlation_at_subset_size_n(known_classifier, monkeypatch, case):
    """Per input and n, Ancona et al.'s Sensitivity-n is Quantus's FaithfulnessCorrelation(subset_size=n)."""
    import engine.faithfulness.sensitivity_n as sensitivity_n

    classifier, batch, scores, target = _case(known_classifier, case)
    levels = tuple(float(x) for x in case["sensitivity_n"])
    _feeding(monkeypatch, sensitivity_n, [v["subsets"] for v in case["sensitivity_n"].values()])  # levels in order
    ours = sensitivity_n.sensitivity_n(classifier, batch, scores, target, levels=levels, subsets=REFERENCE["subsets"])
    for level, ref in case["sensitivity_n"].items():
        assert ours.values[f"sensitivity-n@{level}"][0] == pytest.approx(ref["value"], abs=1e-9), level


@pytest.mark.parametrize("case", CASES, ids=[f"row{c['row']}-{c['explanation']}" for c in CASES])
def test_sparseness_and_complexity_equal_quantus(known_classifier, case):
    from engine.faithfulness.properties import explanation_properties

    classifier, batch, scores, target = _case(known_classifier, case)
    ours = explanation_properties(classifier, batch, scores, target)
    assert ours.values["sparseness"][0] == pytest.approx(case["sparseness"], abs=1e-6)
    assert ours.values["complexity"][0] == pytest.approx(case["complexity"], abs=1e-9)


def test_the_reference_file_names_its_versions_and_command():
    assert REFERENCE["quantus"].startswith("0.6") and "reference_quantus.py" in REFERENCE["command"]
    assert len(CASES) == 9 and np.isfinite([c["faithfulness_correlation"] for c in CASES]).all()
