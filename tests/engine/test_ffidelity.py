"""F-Fidelity (engine/faithfulness/ffidelity.py): stochastic removal from the top / bottom of a ranking on the
masked-fine-tuned model, each draw with its MaSF p-value."""
from __future__ import annotations

import argparse

import numpy as np
import pytest
import torch

pytestmark = pytest.mark.device  # depends on the torch device: a lent GPU runs it (-m device, docs/gpu.md)


def test_ffidelity_ranks_an_explainer_above_copies_degraded_by_increasing_noise(toy_classifier):
    """loo-sign with Gaussian noise of 0 .. 8 score standard deviations added: FFid+ falls and FFid- rises with the
    noise (Spearman between noise and FFid+ - FFid- <= -0.9), on the toy masked-fine-tuned model."""
    from scipy.stats import spearmanr

    from engine.data import get_dataset
    from engine.faithfulness.ffidelity import ffidelity
    from engine.importance import get_explainer

    examples = get_dataset("toy", 0).split("test")[:24]
    batch = toy_classifier.batch_of(examples)
    imp = get_explainer("loo-sign", toy_classifier).attribute(batch, batch.target)
    sd = float(imp.scores[imp.maskable].std())
    eps = torch.randn(imp.scores.shape, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    noise = [0, 0.5, 1, 2, 4, 8]
    plus, minus = [], []
    for k in noise:
        r = ffidelity(toy_classifier, batch, imp.scores.double() + k * sd * eps, target=batch.target, draws=16)
        plus.append(r.values["ffid-plus"].mean())
        minus.append(r.values["ffid-minus"].mean())
    gap = np.array(plus) - np.array(minus)
    assert spearmanr(noise, gap).statistic <= -0.9, (plus, minus)
    assert spearmanr(noise, plus).statistic <= -0.9 and spearmanr(noise, minus).statistic >= 0.9, (plus, minus)


def test_with_alpha_and_beta_one_ffid_is_comprehensiveness_of_the_whole_set_in_closed_form(known_classifier):
    """alpha = beta = 1: every token of S_s is removed (rho = 1), so ffid-plus@s = p_1(x) - p_1(x without the top
    ceil(sN) tokens) and ffid-minus@s the same for the bottom tokens: sigmoids of sums of weights."""
    from engine.faithfulness.ffidelity import ffidelity

    w = [2.0, -1.0, 0.5, 1.5, -0.25, 0.75, 1.0]  # ids 4..10
    classifier, batch_of = known_classifier(w)
    batch = batch_of([[4, 5, 6, 7, 8, 9, 10]])
    scores = torch.zeros(batch.input_ids.shape, dtype=torch.float64)
    scores[0, 1:8] = torch.tensor(w, dtype=torch.float64)  # rank by weight: ids 4, 7, 10, 9, 6, 8, 5
    levels = (0.1, 0.3, 0.5, 1.0)
    r = ffidelity(classifier, batch, scores, target=[1], alpha=1.0, beta=1.0, draws=3, levels=levels)

    def sigmoid(x):
        return 1 / (1 + np.exp(-x))

    order = sorted(w, reverse=True)
    total = sum(w)
    for s in levels:
        k = int(np.ceil(s * 7))
        assert r.values[f"ffid-plus@{s:g}"][0] == pytest.approx(sigmoid(total) - sigmoid(total - sum(order[:k])), abs=1e-12)
        assert r.values[f"ffid-minus@{s:g}"][0] == pytest.approx(sigmoid(total) - sigmoid(total - sum(order[-k:])), abs=1e-12)
    assert r.values["ffid-plus"][0] == pytest.approx(np.mean([r.values[f"ffid-plus@{s:g}"][0] for s in levels]))
    assert r.values["ffid-plus-acc"][0] in (0.0, 0.25, 0.5, 0.75, 1.0)


def test_removals_are_binomial_with_the_capped_probability_and_reproducible():
    """Each token of S_s is removed with rho = min(alpha, beta N / |S_s|): the mean number removed is rho |S_s|, and
    the sets are the top / bottom ceil(sN) ranks; the same seed gives the same masks."""
    from engine.faithfulness.ffidelity import draw_removals

    n, draws = 20, 4000
    rank = torch.cat([torch.tensor([30]), torch.randperm(n, generator=torch.Generator().manual_seed(1)),
                      torch.tensor([40, 41, 42])])
    levels = (0.05, 0.5, 1.0)
    masks, rho = draw_removals(rank, n, levels, alpha=0.5, beta=0.1, draws=draws,
                               generator=torch.Generator().manual_seed(0))
    np.testing.assert_allclose(rho, [0.5, 0.2, 0.1])  # min(0.5, 0.1 * 20 / |S|) for |S| = 1, 10, 20
    for li, k in enumerate((1, 10, 20)):
        for side, chosen in ((0, rank < k), (1, (rank >= n - k) & (rank < n))):
            m = masks[li, side]
            assert not m[:, ~chosen].any()
            assert m.sum(1).double().mean().item() == pytest.approx(rho[li] * k, rel=0.05)
    again, _ = draw_removals(rank, n, levels, 0.5, 0.1, draws, torch.Generator().manual_seed(0))
    assert torch.equal(masks, again)


def test_an_input_gets_the_same_ffidelity_alone_or_in_a_batch(toy_classifier):
    """Draws are seeded per input, so batch composition does not change an input's values."""
    from engine.data import get_dataset
    from engine.faithfulness.ffidelity import ffidelity
    from engine.importance import get_explainer

    examples = get_dataset("toy", 0).split("test")[:4]
    batch = toy_classifier.batch_of(examples)
    scores = get_explainer("loo-sign", toy_classifier).attribute(batch, batch.target).scores
    both = ffidelity(toy_classifier, batch, scores, target=batch.target, draws=5, seed=3)
    one = ffidelity(toy_classifier, batch.select([2]), scores[2:3], target=batch.target[2:3], draws=5, seed=3)
    # The same draws give the same value up to how the forward rounds: on the CPU a row's float32 probabilities do
    # not depend on the batch (1e-9); on a GPU the matmul kernels chosen for 1 and for 4 rows differ in the last
    # bits (measured on an H200: 8e-9 apart), so allow ten float32 ulps of a probability near 1 (1e-6). Another
    # draw would move this mean of probability drops by far more.
    tolerance = 1e-9 if toy_classifier.device.type == "cpu" else 1e-6
    assert one.values["ffid-plus"][0] == pytest.approx(both.values["ffid-plus"][2], abs=tolerance)


def test_evaluate_f_fidelity_stores_values_with_their_masf_shares(toy_classifier, models_cache, tmp_path, monkeypatch):
    """`evaluate --metrics f-fidelity` stores ffid-plus / ffid-minus per level and their means, each resting on
    draws x levels perturbed inputs per example with a MaSF share in [0, 1], and records its settings."""
    from engine.cli import metrics as metrics_command
    from engine.faithfulness.evaluation import evaluation_store
    from engine.models import save_classifier

    monkeypatch.setenv("ENGINE_RESULTS_DIR", str(tmp_path / "results"))
    save_classifier(toy_classifier, "toy-masked-s0", overwrite=True)
    parser = argparse.ArgumentParser()
    metrics_command.configure(parser)
    args = parser.parse_args(["--model", "toy-masked-s0", "--dataset", "toy", "--measures", "loo-sign", "--limit", "5",
                              "--metrics", "comprehensiveness", "f-fidelity", "--ffid-draws", "4", "--run", "ff"])
    args.command_line = "python -m engine metrics ..."
    assert metrics_command.run(args) == 0
    data = evaluation_store().load("ff")
    means = data[data.level.isna()].set_index("metric")
    assert {"ffid-plus", "ffid-minus", "ffid-plus-acc", "ffid-minus-acc", "aopc-comprehensiveness"} <= set(means.index)
    assert means.loc["ffid-plus", "better"] == "higher" and means.loc["ffid-minus", "better"] == "lower"
    assert means.loc["ffid-plus", "n_perturbed"] == 5 * 4 * 5  # examples x draws x levels
    assert 0 <= means.loc["ffid-plus", "p_below_005"] <= 1
    assert means.loc["ffid-plus", "value"] > means.loc["ffid-minus", "value"]
    prov = evaluation_store().provenance("ff")[0]["provenance"]
    assert prov["ffidelity"]["draws"] == 4 and prov["ffidelity"]["beta"] == 1.0


def test_f_fidelity_is_refused_before_any_work_off_its_regime(toy_classifier, models_cache, tmp_path, monkeypatch):
    """F-Fidelity needs [MASK] removal of single tokens on a masked-fine-tuned model: --removal delete and a model whose
    strategy is not 'masked' are refused before any cell is computed."""
    import json
    import shutil

    from engine.cli import metrics as metrics_command
    from engine.errors import InvalidInputError
    from engine.models import save_classifier

    monkeypatch.setenv("ENGINE_RESULTS_DIR", str(tmp_path / "results"))
    save_classifier(toy_classifier, "toy-masked-s0", overwrite=True)
    plain = models_cache / "toy-plain-s0"
    shutil.copytree(models_cache / "toy-masked-s0", plain)
    meta = json.loads((plain / "metadata.json").read_text())
    meta["strategy"] = "plain"
    (plain / "metadata.json").write_text(json.dumps(meta))
    for model, extra, why in (("toy-masked-s0", ["--removal", "delete"], "drop --operator delete"),
                              ("toy-plain-s0", [], "has strategy 'plain'")):
        parser = argparse.ArgumentParser()
        metrics_command.configure(parser)
        args = parser.parse_args(["--model", model, "--dataset", "toy", "--measures", "random", "--limit", "2",
                                  "--metrics", "f-fidelity", "--run", "no", *extra])
        with pytest.raises(InvalidInputError, match=why):
            metrics_command.run(args)
    assert not (tmp_path / "results" / "evaluation" / "no").exists()
