"""Measures declare how they are seeded and what they cost (engine/importance/explainer.py `seeding`, `cost_tier`):
no caller special-cases a measure by name to decide which seed it takes or where it streams."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

from engine.importance import MEASURES, cost_tier, seed_options

ROOT = Path(__file__).resolve().parents[2]


def test_every_measure_declares_its_seeding_and_a_cost_tier_in_range():
    for name, cls in MEASURES.items():
        assert cls.seeding in ("none", "option", "cell"), name
        assert 0 <= cls.cost_tier <= 5, name
        # a measure seeded by an option has one (the option the sweeps leave at its default)
        assert (cls.seeding == "none") or "seed" in cls.defaults, name
    assert [n for n, c in MEASURES.items() if c.seeding == "cell"] == ["random"]
    assert {n for n, c in MEASURES.items() if c.seeding == "option"} == {"kernel-shap", "lime", "shapley-sampling",
                                                                         "gradient-shap", "smoothgrad", "squaregrad",
                                                                         "vargrad", "shapley-interactions"}


def test_seed_options_give_the_cells_seed_only_to_a_measure_seeded_by_the_cell():
    assert seed_options("random", 3) == {"seed": 3}
    assert seed_options("kernel-shap", 3) == {} and seed_options("loo-sign", 3) == {}
    assert seed_options("no-such-measure", 3) == {}


def test_the_streaming_order_is_the_declared_cost():
    from engine.explain import by_cost

    assert by_cost(["kernel-shap", "loo-sign", "ig-sign", "grad-l2", "attention"]) == [
        "attention", "grad-l2", "ig-sign", "loo-sign", "kernel-shap"]
    assert cost_tier("no-such-measure") == 4


@pytest.mark.parametrize("folder", ["engine", "app", "pages"])
def test_no_caller_picks_a_seed_by_the_measures_name(folder):
    """The seed-by-name special case (`{"seed": seed} if measure == "random" else {}`) was written in 8 places;
    `seed_options` reads the measure's declaration instead. Checked in the source: no dict literal with a 'seed'
    key is chosen by comparing a name with "random"."""
    offenders = []
    for path in (ROOT / folder).rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.IfExp) and isinstance(node.test, ast.Compare) and any(
                    isinstance(c, ast.Constant) and c.value == "random" for c in node.test.comparators):
                for branch in (node.body, node.orelse):
                    if isinstance(branch, ast.Dict) and any(isinstance(k, ast.Constant) and k.value == "seed"
                                                            for k in branch.keys):
                        offenders.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert offenders == []
