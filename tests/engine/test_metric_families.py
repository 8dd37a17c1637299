"""The metric families beyond erasure, each through the registry (engine/faithfulness/registry.py): faithfulness
correlation (Bhatt et al. 2020), infidelity (Yeh et al. 2019, captum.metrics) with token-subset removal, and the
properties sparseness / complexity (Chalasani et al. 2020; Bhatt et al. 2020). On `known_classifier`, a bag of words
whose class-1 logit is the sum of its tokens' weights ([MASK] weighs 0), the exact attribution of the logit is the
weight vector, so every property below can be derived by hand."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from engine.errors import InvalidInputError
from engine.faithfulness.correlation import faithfulness_correlation
from engine.faithfulness.infidelity import infidelity
from engine.faithfulness.properties import entropy, explanation_properties, gini
from engine.faithfulness.subsets import bernoulli_subsets

WEIGHTS = [1.5, -0.7, 0.3, 2.2, -1.1, 0.8, 0.05, -0.4]
ROWS = [[4, 5, 6, 7, 8, 9, 10, 11], [7, 4, 9, 11, 6]]


def _setup(known_classifier):
    classifier, batch_of = known_classifier(WEIGHTS)
    batch = batch_of(ROWS)
    w = torch.tensor([0.0, 0.0, 0.0, 0.0, *WEIGHTS], dtype=torch.float64)
    exact = torch.where(batch.maskable, w[batch.input_ids], torch.zeros_like(w[batch.input_ids]))
    target = torch.ones(len(ROWS), dtype=torch.long)
    return classifier, batch, exact, target


def test_faithfulness_correlation_is_one_for_the_exact_attribution_of_an_additive_logit(known_classifier):
    """With f the class-1 logit, removing a subset S lowers f by exactly the sum of its weights: the weights
    correlate perfectly with the drops (1), and scores in reversed order do not."""
    classifier, batch, exact, target = _setup(known_classifier)
    res = faithfulness_correlation(classifier, batch, exact, target, output="logit", subsets=12)
    np.testing.assert_allclose(res.values["faithfulness-correlation"], 1.0, atol=1e-9)
    assert res.forward_rows == len(ROWS) * 13 and (res.n_perturbed["faithfulness-correlation"] == 12).all()
    assert np.isnan(res.n_ood["faithfulness-correlation"]).all()  # no MaSF: no share, never a made-up one
    wrong = faithfulness_correlation(classifier, batch, -exact, target, output="logit", subsets=12)
    np.testing.assert_allclose(wrong.values["faithfulness-correlation"], -1.0, atol=1e-9)
    shuffled = exact[:, torch.tensor([0, 3, 1, 5, 2, 8, 4, 9, 6, 7])]
    partial = faithfulness_correlation(classifier, batch, shuffled, target, output="logit", subsets=12)
    assert (partial.values["faithfulness-correlation"] < 0.99).all()


def test_faithfulness_correlation_draws_the_same_subsets_for_an_input_in_any_batch(known_classifier):
    """Subsets are seeded per input (by its token ids), so an input's value does not depend on its batch."""
    classifier, batch_of = known_classifier(WEIGHTS)
    scores = torch.rand(2, 10, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    both = faithfulness_correlation(classifier, batch_of(ROWS), scores, torch.ones(2, dtype=torch.long), seed=3)
    alone = faithfulness_correlation(classifier, batch_of(ROWS[:1]), scores[:1], torch.ones(1, dtype=torch.long),
                                     seed=3)
    assert both.values["faithfulness-correlation"][0] == pytest.approx(alone.values["faithfulness-correlation"][0])
    with pytest.raises(InvalidInputError, match="subset_fraction"):
        faithfulness_correlation(classifier, batch_of(ROWS), scores, subset_fraction=0)


def test_infidelity_is_zero_for_the_exact_attribution_and_equals_its_definition_on_the_same_draws(known_classifier):
    """captum's infidelity with token-subset removal: 0 when f is the additive logit and phi its weights; for other
    scores it equals E[(I . phi - (f(x) - f(x without I)))^2] computed by hand over the same seeded draws."""
    classifier, batch, exact, target = _setup(known_classifier)
    res = infidelity(classifier, batch, exact, target, output="logit", samples=8, seed=1)
    np.testing.assert_allclose(res.values["infidelity"], 0.0, atol=1e-18)
    assert res.forward_rows == len(ROWS) * 9
    scores = torch.rand(exact.shape, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    got = infidelity(classifier, batch, scores, target, output="logit", samples=8, seed=1).values["infidelity"]
    for b in range(len(ROWS)):
        draws = bernoulli_subsets(batch, b, 8, 0.2, 1).double()
        drop = draws @ exact[b]  # the additive logit's drop when those tokens are masked
        assert got[b] == pytest.approx(float(torch.mean((draws @ scores[b] - drop) ** 2)), rel=1e-9)
    assert (got > 0).all()


def test_infidelity_with_masf_gives_every_perturbed_input_a_p_value():
    """With a MaSF the share of perturbed inputs out of distribution is counted over exactly the sampled inputs."""
    from types import SimpleNamespace

    import engine.faithfulness.infidelity as module

    calls = []

    class CountingMasf:
        def pvalues(self, feats):
            calls.append(len(feats))
            return np.linspace(0.0, 1.0, len(feats))

    weights = [1.0, 2.0, 3.0]

    class Bag(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = torch.nn.Embedding(7, 1, _weight=torch.tensor([0, 0, 0, 0, *weights], dtype=torch.float64)[:, None])
            self.config = SimpleNamespace(num_labels=2, hidden_size=1, num_hidden_layers=0)

        def get_input_embeddings(self):
            return self.embed

        def forward(self, input_ids=None, attention_mask=None, token_type_ids=None, output_hidden_states=False):
            e = self.embed(input_ids)
            s = (e[..., 0] * attention_mask).sum(1)
            return SimpleNamespace(logits=torch.stack([torch.zeros_like(s), s], 1),
                                   hidden_states=(e,) if output_hidden_states else None)

    from engine.models import Batch, Classifier

    classifier = Classifier(Bag(), SimpleNamespace(mask_token_id=1, pad_token_id=0), ("neg", "pos"), max_length=8)
    ids = torch.tensor([[2, 4, 5, 6, 3]])
    maskable = ids >= 4
    batch = Batch(input_ids=ids, attention_mask=torch.ones_like(ids), token_type_ids=torch.zeros_like(ids),
                  segments=maskable.long(), maskable=maskable, target=None, truncated=torch.zeros(1, dtype=torch.bool),
                  offsets=[[(0, 0)] * 5])
    res = module.infidelity(classifier, batch, maskable.double(), torch.tensor([1]), masf=CountingMasf(), samples=6)
    assert res.n_perturbed["infidelity"][0] == 6 and len(res.p_values["infidelity"]) == 6
    assert 0 <= res.n_ood["infidelity"][0] <= 6


def test_sparseness_and_complexity_take_their_known_values_at_the_extremes():
    """Gini: 0 for equal scores, (n - 1) / n for one non-zero score, 0.25 for |phi| = 1, 2, 3, 4 (by hand);
    entropy: log n for equal scores, 0 for one non-zero score; signs are ignored, all-zero scores give NaN."""
    assert gini(np.ones(5)) == pytest.approx(0.0) and gini([0, 0, 3.0, 0]) == pytest.approx(0.75)
    assert gini([4.0, -1.0, 3.0, 2.0]) == pytest.approx(0.25)
    assert entropy(np.ones(5)) == pytest.approx(math.log(5)) and entropy([0, -2.0, 0]) == pytest.approx(0.0)
    assert math.isnan(gini(np.zeros(3))) and math.isnan(entropy(np.zeros(3)))


def test_properties_are_computed_over_the_maskable_tokens_only(known_classifier):
    """[CLS]/[SEP] and padding never count: a one-hot explanation of a 5-token input has sparseness 4/5 whatever
    the batch's padding, and complexity 0."""
    classifier, batch, exact, target = _setup(known_classifier)
    scores = torch.zeros_like(exact)
    scores[:, 1] = 1.0
    scores[:, 0] = 9.0  # [CLS]: not maskable, ignored
    res = explanation_properties(classifier, batch, scores)
    np.testing.assert_allclose(res.values["sparseness"], [7 / 8, 4 / 5])
    np.testing.assert_allclose(res.values["complexity"], [0.0, 0.0], atol=1e-12)
    assert (res.n_perturbed["sparseness"] == 0).all()


def test_evaluate_computes_the_new_families_through_the_registry(toy_classifier, models_cache, tmp_path, monkeypatch):
    """`evaluate --metrics properties faithfulness-correlation infidelity sensitivity-n` stores each metric per measure
    with the registry's direction, and the perturbing ones with the MaSF share of their perturbed inputs;
    Sensitivity-n one row per level (its `level`) and its mean."""
    import argparse

    from engine.cli import metrics as metrics_command
    from engine.faithfulness.evaluation import evaluation_store
    from engine.faithfulness.registry import better
    from engine.models import save_classifier

    monkeypatch.setenv("ENGINE_RESULTS_DIR", str(tmp_path / "results"))
    save_classifier(toy_classifier, "toy-masked-s0", overwrite=True)
    parser = argparse.ArgumentParser()
    metrics_command.configure(parser)
    args = parser.parse_args(["--model", "toy-masked-s0", "--dataset", "toy", "--measures", "loo-sign",
                              "--limit", "4", "--metrics", "properties", "faithfulness-correlation", "infidelity",
                              "sensitivity-n", "--run", "new"])
    assert metrics_command.run(args) == 0
    rows = evaluation_store().load("new")
    rows = rows[rows["method"] == "erasure"]
    per_n = rows[rows["metric"] == "sensitivity-n"]
    assert sorted(per_n["level"]) == [0.1, 0.2, 0.3, 0.5] and (per_n["better"] == "higher").all()
    assert (per_n["n_perturbed"] == 4 * 20).all() and per_n["p_below_005"].between(0, 1).all()
    rows = rows[rows["metric"] != "sensitivity-n"].set_index("metric")
    assert rows.loc["sensitivity-n-mean", "n_perturbed"] == 4 * 80
    for name in ("sparseness", "complexity", "faithfulness-correlation", "infidelity"):
        assert rows.loc[name, "better"] == better(name)
        assert np.isfinite(rows.loc[name, "value"]), name
    assert rows.loc["infidelity", "n_perturbed"] == 4 * 20 and 0 <= rows.loc["infidelity", "p_below_005"] <= 1
    assert rows.loc["faithfulness-correlation", "n_perturbed"] == 4 * 20
    assert rows.loc["sparseness", "n_perturbed"] == 0 and np.isnan(rows.loc["sparseness", "p_below_005"])


def test_max_sensitivity_is_zero_for_a_constant_explanation_and_its_definition_for_the_weights(known_classifier):
    """captum's max-sensitivity with one token replaced by [MASK]: a measure that returns the same scores whatever
    the input has sensitivity 0; a measure that returns each token's weight loses exactly the replaced token's
    weight ([MASK] weighs 0), so its sensitivity is the largest |w_i| / ||w|| over the replaced tokens drawn."""
    from engine.faithfulness.sensitivity import max_sensitivity
    from engine.faithfulness.subsets import fixed_size_subsets

    classifier, batch, exact, target = _setup(known_classifier)
    constant = max_sensitivity(classifier, batch, torch.ones_like(exact), target, samples=5,
                               explain=lambda b, t: torch.ones(b.input_ids.shape, dtype=torch.float64))
    np.testing.assert_allclose(constant.values["max-sensitivity"], 0.0, atol=1e-15)
    w = torch.tensor([0.0, 0.0, 0.0, 0.0, *WEIGHTS], dtype=torch.float64)
    res = max_sensitivity(classifier, batch, exact, target, samples=5, seed=4,
                          explain=lambda b, t: torch.where(b.maskable, w[b.input_ids], 0.0))
    for b in range(len(ROWS)):
        gone = fixed_size_subsets(batch, b, 5, 1, 4)
        expected = max(float(exact[b][g].abs().sum()) for g in gone) / float(exact[b].norm())
        assert res.values["max-sensitivity"][b] == pytest.approx(expected, rel=1e-9)
    with pytest.raises(InvalidInputError, match="replaces tokens"):
        max_sensitivity(classifier, batch, exact, target, removal="delete", explain=lambda b, t: exact)


def test_evaluate_computes_max_sensitivity_by_re_running_the_measure(toy_classifier, models_cache, tmp_path,
                                                                     monkeypatch):
    """`evaluate --metrics sensitivity` re-runs the cell's measure on the perturbed inputs; `--operator delete` is
    refused for it before any work."""
    import argparse

    from engine.cli import metrics as metrics_command
    from engine.faithfulness.evaluation import evaluation_store
    from engine.models import save_classifier

    monkeypatch.setenv("ENGINE_RESULTS_DIR", str(tmp_path / "results"))
    save_classifier(toy_classifier, "toy-masked-s0", overwrite=True)
    parser = argparse.ArgumentParser()
    metrics_command.configure(parser)
    base = ["--model", "toy-masked-s0", "--dataset", "toy", "--measures", "x-grad-sign", "--limit", "3",
            "--metrics", "sensitivity"]
    assert metrics_command.run(parser.parse_args([*base, "--run", "sens"])) == 0
    rows = evaluation_store().load("sens").set_index("metric")
    assert rows.loc["max-sensitivity", "better"] == "lower" and np.isfinite(rows.loc["max-sensitivity", "value"])
    assert rows.loc["max-sensitivity", "n_perturbed"] == 3 * 10
    with pytest.raises(InvalidInputError, match="cannot remove by 'delete'"):
        metrics_command.run(parser.parse_args([*base, "--operator", "delete", "--run", "no"]))


def test_avg_sensitivity_is_zero_for_a_constant_explanation_and_the_mean_of_the_replaced_weights(known_classifier):
    """avg-sensitivity (the mean over the neighbours captum's sensitivity_max draws and explains): 0 for a measure
    that returns the same scores whatever the input; for the weight measure the mean of |w_i| / ||w|| over the
    replaced tokens drawn, never above the max-sensitivity captum computes from the same neighbours."""
    from engine.faithfulness.sensitivity import max_sensitivity
    from engine.faithfulness.subsets import fixed_size_subsets

    classifier, batch, exact, target = _setup(known_classifier)
    constant = max_sensitivity(classifier, batch, torch.ones_like(exact), target, samples=5,
                               explain=lambda b, t: torch.ones(b.input_ids.shape, dtype=torch.float64))
    np.testing.assert_allclose(constant.values["avg-sensitivity"], 0.0, atol=1e-15)
    w = torch.tensor([0.0, 0.0, 0.0, 0.0, *WEIGHTS], dtype=torch.float64)
    res = max_sensitivity(classifier, batch, exact, target, samples=6, seed=2,
                          explain=lambda b, t: torch.where(b.maskable, w[b.input_ids], 0.0))
    for b in range(len(ROWS)):
        gone = fixed_size_subsets(batch, b, 6, 1, 2)
        ratios = [float(exact[b][g].abs().sum()) / float(exact[b].norm()) for g in gone]
        assert res.values["avg-sensitivity"][b] == pytest.approx(np.mean(ratios), rel=1e-9)
        assert res.values["max-sensitivity"][b] == pytest.approx(max(ratios), rel=1e-9)
    assert (res.values["avg-sensitivity"] <= res.values["max-sensitivity"] + 1e-12).all()
    assert (res.n_perturbed["avg-sensitivity"] == 6).all()


def test_sensitivity_n_is_one_at_every_n_for_the_exact_attribution_of_an_additive_logit(known_classifier):
    """Ancona et al.'s property: the exact attribution of a model additive in its logit satisfies sensitivity-n for
    every n (attribution sum = output drop on every subset, so each per-level correlation is 1); the negated one gets
    -1; a level whose n is every token is undefined (NaN); the cost is 1 + |levels| subsets rows per input."""
    from engine.faithfulness.sensitivity_n import sensitivity_n

    classifier, batch, exact, target = _setup(known_classifier)
    res = sensitivity_n(classifier, batch, exact, target, output="logit", levels=(0.2, 0.5), subsets=10)
    for name in ("sensitivity-n@0.2", "sensitivity-n@0.5", "sensitivity-n-mean"):
        np.testing.assert_allclose(res.values[name], 1.0, atol=1e-9)
    wrong = sensitivity_n(classifier, batch, -exact, target, output="logit", levels=(0.2, 1.0), subsets=10)
    np.testing.assert_allclose(wrong.values["sensitivity-n@0.2"], -1.0, atol=1e-9)
    assert np.isnan(wrong.values["sensitivity-n@1"]).all()
    np.testing.assert_allclose(wrong.values["sensitivity-n-mean"], -1.0, atol=1e-9)  # the undefined level left out
    assert res.forward_rows == len(ROWS) * (1 + 2 * 10) and (res.n_perturbed["sensitivity-n-mean"] == 20).all()
    with pytest.raises(InvalidInputError, match="levels"):
        sensitivity_n(classifier, batch, exact, target, levels=(0.0,))
