"""Recursive masking (FMM Alg. 3): what is masked at each step, and what is recorded."""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
import torch

from engine.data import get_dataset
from engine.faithfulness.recursive import dataset_masking_curve, recursive_masking
from engine.models import mask_all_primary

pytestmark = pytest.mark.device  # depends on the torch device: a lent GPU runs it (-m device, docs/gpu.md)


class PositionExplainer:
    """Scores = position index, so the expected masking order is known: last tokens first. Made on the batch's
    device (the model's), as the mask they are combined with."""

    name = "position"
    options = {}

    def __init__(self):
        self.calls = 0

    def attribute(self, batch, target=None):
        self.calls += 1
        scores = torch.arange(batch.input_ids.shape[1], dtype=torch.float32,
                              device=batch.input_ids.device).expand_as(batch.input_ids).clone()
        return SimpleNamespace(scores=torch.where(batch.maskable, scores, torch.zeros_like(scores)), maskable=batch.maskable)


class SeededRandomExplainer:
    name = "random"
    options = {}

    def __init__(self, seed):
        self.seed = seed
        self.generator = torch.Generator().manual_seed(seed)

    def attribute(self, batch, target=None):
        return SimpleNamespace(scores=torch.rand(batch.input_ids.shape, generator=self.generator), maskable=batch.maskable)


def test_each_step_masks_the_top_tokens_cumulatively_and_never_specials(toy_classifier):
    c = toy_classifier
    batch = c.batch(["the movie was really good and fun", "this film was dull"])
    res = recursive_masking(c, PositionExplainer(), batch)
    maskable = batch.maskable.cpu()  # a step's input_ids are on the CPU, whatever the model's device
    n = maskable.sum(1).numpy()
    assert [s.ratio for s in res.steps] == pytest.approx([i / 10 for i in range(11)])
    previous = torch.zeros_like(maskable)
    for step in res.steps:
        masked = step.input_ids == c.mask_token_id
        assert not (masked & ~maskable).any(), "special tokens are never masked"
        assert np.array_equal(masked.sum(1).cpu().numpy(), np.floor(n * step.ratio + 1e-9)), "floor(r * N) tokens in total"
        assert (masked | ~previous).all(), "tokens masked before stay masked"
        previous = masked
        # the masked ones are the highest-scoring (here: last) maskable positions
        for b in range(2):
            positions = torch.nonzero(maskable[b]).flatten()
            k = int(masked[b].sum())
            assert set(torch.nonzero(masked[b]).flatten().tolist()) == set(positions[len(positions) - k:].tolist())
    assert res.steps[0].scores is None and res.steps[-1].scores is None, "0% and 100% compute nothing"
    with torch.no_grad():
        direct = torch.softmax(c.logits(batch.with_ids(res.steps[5].input_ids.to(batch.device))), -1)
    assert np.allclose(res.steps[5].probability, direct[torch.arange(2), torch.as_tensor(res.target)].cpu().numpy(), atol=1e-6)
    assert res.target_source == "predicted"


def test_count_mode_caps_at_the_input_length(toy_classifier):
    batch = toy_classifier.batch(["this film was dull"])
    res = recursive_masking(toy_classifier, PositionExplainer(), batch, counts=range(0, 8))
    assert [int(s.n_masked[0]) for s in res.steps] == [0, 1, 2, 3, 4, 4, 4, 4]


def test_measure_computed_once_is_not_recomputed(toy_classifier):
    explainer = PositionExplainer()
    explainer.computed_once = True
    recursive_masking(toy_classifier, explainer, toy_classifier.batch(["the movie was good"]))
    assert explainer.calls == 1


def test_auxiliary_sequence_is_never_masked(babi_classifier):
    e = get_dataset("babi-1").split("test")[0]
    batch = babi_classifier.batch([e.primary], [e.auxiliary])
    res = recursive_masking(babi_classifier, SeededRandomExplainer(0), batch)
    aux = (batch.segments == 2).cpu()  # a step's input_ids are on the CPU, whatever the model's device
    assert aux.any()
    for step in res.steps:
        assert torch.equal(step.input_ids[aux], batch.input_ids.cpu()[aux])


def test_curves_reproduce_exactly_from_the_stored_seed(toy_classifier):
    batch = toy_classifier.batch(["the movie was really good and fun and lovely"])
    a = recursive_masking(toy_classifier, SeededRandomExplainer(7), batch)
    b = recursive_masking(toy_classifier, SeededRandomExplainer(a.seed), batch)
    assert all(torch.equal(x.input_ids, y.input_ids) for x, y in zip(a.steps, b.steps))
    assert [float(s.probability[0]) for s in a.steps] == [float(s.probability[0]) for s in b.steps]


def test_dataset_curve_ends_match_unmasked_and_fully_masked_evaluation(toy_classifier):
    dataset = get_dataset("toy")
    rows = dataset_masking_curve(toy_classifier, SeededRandomExplainer(0), dataset, ratios=[0, 0.5, 1.0])
    assert rows[0]["value"] == pytest.approx(toy_classifier.evaluate(dataset)["value"])
    assert rows[-1]["value"] == pytest.approx(toy_classifier.evaluate(dataset, mask_all=True)["value"])


def test_bad_schedules_are_refused(toy_classifier):
    batch = toy_classifier.batch(["the movie was good"])
    with pytest.raises(ValueError, match="start at 0"):
        recursive_masking(toy_classifier, PositionExplainer(), batch, ratios=[0.1, 0.5])
    with pytest.raises(ValueError, match="not both"):
        recursive_masking(toy_classifier, PositionExplainer(), batch, ratios=[0, 1], counts=[0, 1])
    with pytest.raises(ValueError, match="out of range"):
        recursive_masking(toy_classifier, PositionExplainer(), batch, target=[5])
    full = mask_all_primary(batch, toy_classifier.mask_token_id)
    res = recursive_masking(toy_classifier, PositionExplainer(), full, target=[0])
    assert all(int(s.n_masked[0]) == 4 for s in res.steps), "an already fully masked input stays fully masked"


def test_the_engines_random_baseline_reproduces_from_the_seed_it_records(toy_classifier):
    """The step-by-step page's random band: each curve records its seed, and recomputing `random` with that seed
    gives the same masked ids and probabilities at every step; another seed masks in another order."""
    from engine.faithfulness.single import mask_single_input
    from engine.importance import get_explainer

    text = "the movie was really good and fun and lovely but far too long"
    shown = mask_single_input(toy_classifier, text, "grad-l2", random_seeds=[3, 11])
    batch = toy_classifier.batch([text])
    target = [int(shown.measure.target[0])]
    for curve in shown.random:
        again = recursive_masking(toy_classifier, get_explainer("random", toy_classifier, seed=curve.seed, memo=False),
                                  batch, target=target)
        assert all(torch.equal(x.input_ids, y.input_ids) for x, y in zip(curve.steps, again.steps))
        assert [float(s.probability[0]) for s in curve.steps] == [float(s.probability[0]) for s in again.steps]
    first, second = shown.random
    assert any(not torch.equal(x.input_ids, y.input_ids) for x, y in zip(first.steps, second.steps))


def test_a_stored_benchmark_cell_reproduces_bit_for_bit(toy_classifier, models_cache, tmp_path):
    """A cell of the results store is recomputed from its key alone (checkpoint, measure, seed, examples): the
    same curve, MaSF p-values and mean probabilities, to the last bit."""
    from engine.faithfulness.benchmark import Cell, run_cell
    from engine.models import save_classifier
    from engine.results import ResultsStore

    save_classifier(toy_classifier, "repro-s0")
    cell = Cell(model="repro-s0", dataset="toy", measure="random", seed=5, limit=10, ratios=(0.0, 0.3, 0.6, 1.0))
    run_cell(cell, str(tmp_path / "a"), "r")
    recorded = ResultsStore(tmp_path / "a").provenance("r")[0]["cell"]
    again = Cell(**{k: tuple(v) if isinstance(v, list) else v for k, v in recorded.items() if k != "options"})
    run_cell(again, str(tmp_path / "b"), "r")
    columns = ["step", "ratio", "value", "p_value", "p_below_005", "mean_probability"]
    a = ResultsStore(tmp_path / "a").load("r")[columns]
    b = ResultsStore(tmp_path / "b").load("r")[columns]
    assert a.equals(b)
