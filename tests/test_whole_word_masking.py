"""Whole-word recursive masking: a word is masked all at once or not at all, the schedule counts words, every
step keeps its MaSF p-value, and the random baseline picks words uniformly whatever their length."""
from __future__ import annotations

import math

import torch

from engine.faithfulness.recursive import mask_top, mask_top_words, masking_order_keys
from engine.faithfulness.single import mask_single_input

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
