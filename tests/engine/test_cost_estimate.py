"""Before a slow run the tool says what each measure will cost (engine.explain.estimate_seconds): each measure's
planned passes (`Explainer.passes`) at this machine's measured speed for the input."""
from __future__ import annotations

import pytest

from engine.explain import CostEstimate, estimate_seconds
from engine.importance import MEASURES, get_explainer


def test_the_plans_follow_each_measures_options(toy_classifier):
    n = 12
    assert get_explainer("loo-sign", toy_classifier).passes(n).forward == n + 1
    assert get_explainer("kernel-shap", toy_classifier, n_samples=50).passes(n).forward == 51
    assert get_explainer("shapley-sampling", toy_classifier, n_samples=3).passes(n).forward == 3 * n + 1
    ig = get_explainer("ig-sign", toy_classifier, steps=20).passes(n)
    assert (ig.forward, ig.backward, ig.up_to_forward) == (20, 20, 20 + 60 + 180)  # each escalation stage reruns
    assert get_explainer("ig-sign", toy_classifier, steps=20, max_steps=20).passes(n).up_to_forward == 20
    assert get_explainer("grad-l2", toy_classifier).passes(n).backward == 1
    assert get_explainer("beam", toy_classifier).passes(n) is None  # a search: no plan


def test_every_measure_has_a_plan_or_says_it_has_none():
    planned = {n for n, c in MEASURES.items() if c.passes is not MEASURES["beam"].passes}
    assert {"grad-l2", "ig-sign", "loo-sign", "kernel-shap", "deeplift", "attention", "random"} <= planned


def test_estimates_scale_with_the_plan_and_read_in_words(toy_classifier):
    est = estimate_seconds(toy_classifier, ["grad-l2", "loo-sign", "kernel-shap", "ig-sign", "beam"],
                           "a gripping , funny and moving film")
    assert all(est[m].seconds > 0 for m in ("grad-l2", "loo-sign", "kernel-shap", "ig-sign"))
    assert est["kernel-shap"].seconds > est["loo-sign"].seconds  # 201 forwards against N + 1
    assert est["ig-sign"].up_to_seconds == pytest.approx(est["ig-sign"].seconds * 13, rel=1e-9)
    assert est["beam"].seconds is None and "unknown" in est["beam"].words()
    assert CostEstimate("x", 0.2, None, 1, 0).words() == "under a second"
    assert CostEstimate("x", 4.0, 40.0, 20, 20).words() == "about 4 s (up to 40 s if it escalates)"
    assert CostEstimate("x", 300.0, None, 1, 0).words() == "about 5 min"
    assert CostEstimate("x", 0.1, 0.9, 20, 20).words() == "under a second"  # no "up to under a second"
