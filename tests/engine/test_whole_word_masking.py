"""Whole-word recursive masking: a word is masked all at once or not at all, the schedule counts words, every
step keeps its MaSF p-value, and the random baseline picks words uniformly whatever their length."""
from __future__ import annotations

import math

import pytest
import torch

from engine.faithfulness.recursive import mask_top, mask_top_words, masking_order_keys
from engine.faithfulness.single import mask_single_input

pytestmark = pytest.mark.device  # depends on the torch device: a lent GPU runs it (-m device, docs/gpu.md)

TEXT = "an unredeemable, overwrought mess with a wonderful cast"


def test_whole_words_are_masked_together_and_counted_as_words(toy_classifier):
    from engine.ood import fit_masf

    masf = fit_masf(toy_classifier)
    result = mask_single_input(toy_classifier, TEXT, "loo-sign", random_seeds=[0, 1], masf=masf, whole_words=True)
    words = result.units("word")
    assert len(words) < len(result.tokens), "the text has words of several pieces"
    for run in [result.measure, *result.random]:
        for step in run.steps:
            ids = step.input_ids[0][result.maskable]
            flags = (ids == toy_classifier.mask_token_id).tolist()
            per_word = [{flags[i] for i in w.tokens} for w in words]
            assert all(len(s) == 1 for s in per_word), "no word is half masked"
            n_words = sum(s == {True} for s in per_word)
            assert n_words == math.floor(len(words) * step.ratio + 1e-9)
            assert step.p_value is not None and 0 <= float(step.p_value[0]) <= 1, "each step has its MaSF p-value"
    assert set(result.curve_table()["masking_unit"]) == {"word"}


def test_token_masking_is_unchanged_without_word_ids():
    ids = torch.arange(6)[None] + 10
    maskable = torch.tensor([[False, True, True, True, True, False]])
    keys = masking_order_keys(torch.tensor([[0.0, 0.1, 0.9, 0.5, 0.2, 0.0]]), maskable, torch.zeros_like(maskable))
    words = torch.tensor([[-1, 0, 0, 1, 2, -1]])
    by_piece = mask_top(ids, keys, torch.tensor([1]), 0)
    by_word = mask_top_words(ids, keys, words, torch.tensor([1]), 0)
    assert by_piece.tolist() == [[10, 11, 0, 13, 14, 15]], "the top piece alone"
    assert by_word.tolist() == [[10, 0, 0, 13, 14, 15]], "the top word (sum 1.0), both pieces"


def test_random_word_order_is_uniform_over_words_not_biased_to_long_ones():
    """With one draw per word ('first'), a 4-piece word is masked first in ~1/4 of draws among 4 words; summing
    its pieces' draws would pick it far more often."""
    words = torch.tensor([[-1, 0, 0, 0, 0, 1, 2, 3, -1]])
    maskable = words >= 0
    ids = torch.arange(9)[None] + 10
    g = torch.Generator().manual_seed(0)
    first_hits = sum_hits = 0
    trials = 2000
    for _ in range(trials):
        keys = masking_order_keys(torch.rand(1, 9, generator=g), maskable, torch.zeros_like(maskable))
        first_hits += int(mask_top_words(ids, keys, words, torch.tensor([1]), 0, "first")[0, 1] == 0)
        sum_hits += int(mask_top_words(ids, keys, words, torch.tensor([1]), 0, "sum")[0, 1] == 0)
    assert abs(first_hits / trials - 0.25) < 0.04
    assert sum_hits / trials > 0.6


def test_erasure_word_ranking_gives_every_piece_its_words_rank():
    """Whole-word erasure units: the pieces of a word share one rank, words rank by the sum of their pieces'
    scores (by the first piece's for 'first'), ties in text order, and the unit count is the number of words."""
    from engine.faithfulness.perturb import word_ranking_positions

    maskable = torch.tensor([[False, True, True, True, True, False]])
    words = torch.tensor([[-1, 0, 0, 1, 2, -1]])
    scores = torch.tensor([[0.0, 0.3, 0.3, 0.5, 0.1, 0.0]])  # word 0 sums to 0.6 > word 1's 0.5 > word 2's 0.1
    rank, n_words = word_ranking_positions(scores, maskable, words)
    assert n_words == [3]
    assert rank[0, 1:5].tolist() == [0, 0, 1, 2]
    assert (rank[0, [0, 5]] >= 6).all(), "special tokens are never removed"
    first, _ = word_ranking_positions(scores, maskable, words, "first")
    assert first[0, 1:5].tolist() == [1, 1, 0, 2], "by its first piece, word 0 (0.3) ranks below word 1 (0.5)"


def test_erasure_metrics_by_whole_words_count_words_and_never_split_one(toy_classifier):
    """With word units, the flip fraction is a multiple of 1 / (number of words), deletion at 100% is the
    same fully masked input as by tokens, and the comprehensiveness bins differ from the token-level ones
    only through whole words (a 1-word bin removes every piece of the top word)."""
    from engine.faithfulness.erasure import erasure_metrics
    from engine.importance import get_explainer
    from engine.importance.levels import word_ids_of

    batch = toy_classifier.batch([TEXT])
    word_ids = word_ids_of(batch, [TEXT])
    n_words = int(word_ids.max()) + 1
    assert n_words < int(batch.maskable.sum()), "the text has words of several pieces"
    scores = get_explainer("loo-sign", toy_classifier).attribute(batch).scores
    by_word = erasure_metrics(toy_classifier, batch, scores, metrics=["deletion", "decision-flip"], word_ids=word_ids)
    by_token = erasure_metrics(toy_classifier, batch, scores, metrics=["deletion", "decision-flip"])
    assert math.isclose(float(by_word.values["deletion@1"][0]), float(by_token.values["deletion@1"][0]), abs_tol=1e-6)
    flip = float(by_word.values["flip-fraction"][0])
    assert math.isclose(flip * n_words, round(flip * n_words), abs_tol=1e-9)


def test_a_whole_word_benchmark_cell_is_its_own_schedule_and_keeps_old_keys(toy_classifier, models_cache, tmp_path):
    """A sweep cell with whole words stores the schedule 'ratio, whole words' (never pooled with token curves)
    and a key of its own; a token-level cell's key is what it was before whole words existed."""
    from engine.faithfulness.benchmark import Cell, run_cell
    from engine.models import save_classifier
    from engine.results import ResultsStore

    save_classifier(toy_classifier, "toy-words")
    assert "whole_words" not in Cell(model="toy-words", dataset="toy", measure="random", seed=0).key()
    cell = Cell(model="toy-words", dataset="toy", measure="loo-sign", seed=0, limit=4, whole_words=True)
    assert cell.key()["whole_words"] is True
    run_cell(cell, str(tmp_path), "words")
    rows = ResultsStore(str(tmp_path)).load("words")
    assert set(rows["schedule"]) == {"ratio, whole words"}


def test_a_whole_word_evaluation_cell_labels_its_removal(toy_classifier, models_cache, tmp_path):
    """Erasure cells with whole-word units carry 'mask, whole words' in their removal column (so the tables never
    pool them with token-level values) and a key of their own; token-level keys are unchanged."""
    from engine.faithfulness.evaluation import EvaluationCell, evaluation_store, run_evaluation_cell
    from engine.models import save_classifier

    save_classifier(toy_classifier, "toy-words-eval")
    assert "whole_words" not in EvaluationCell(model="toy-words-eval", dataset="toy", measure="random", seed=0).key()
    cell = EvaluationCell(model="toy-words-eval", dataset="toy", measure="grad-l2", seed=0, limit=4,
                          metrics=("deletion",), whole_words=True)
    run_evaluation_cell(cell, str(tmp_path), "words")
    rows = evaluation_store(str(tmp_path)).load("words")
    assert set(rows["removal"]) == {"mask, whole words"}
