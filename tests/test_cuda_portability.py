"""What the first CUDA run (issue 36, an H200) found, checked on the CPU: the engine uses no kernel that CUDA
lacks, and runs the same wherever its inputs' tensors live."""
from __future__ import annotations

import math

import pytest
import torch

TEXT = "an unredeemable, overwrought mess with a wonderful cast"

# The reducing scatters CUDA implements for numbers only: on a bool tensor they raise
# `"cuda_scatter_gather_base_kernel_func" not implemented for 'Bool'` there, while the CPU computes them.
# (Plain gather and scatter without a reduction do have a bool kernel on CUDA.)
_REDUCING_SCATTERS = ("scatter_reduce", "scatter_reduce_", "scatter_add", "scatter_add_", "index_add", "index_add_")


@pytest.fixture
def cuda_like_bool_scatters(monkeypatch):
    """Make every reducing scatter on a bool tensor raise as it does on CUDA."""
    def refusing(name, original):
        def method(self, *args, **kwargs):
            if self.dtype == torch.bool:
                raise NotImplementedError(f'"cuda_scatter_gather_base_kernel_func" not implemented for \'Bool\' ({name})')
            return original(self, *args, **kwargs)
        return method

    for name in _REDUCING_SCATTERS:
        monkeypatch.setattr(torch.Tensor, name, refusing(name, getattr(torch.Tensor, name)))
        if hasattr(torch, name):
            monkeypatch.setattr(torch, name, refusing(name, getattr(torch, name)))


def test_the_stand_in_refuses_what_cuda_refuses(cuda_like_bool_scatters):
    """The fixture is a faithful stand-in: a bool amax scatter raises, the same scatter in uint8 runs."""
    index = torch.tensor([[0, 0, 1]])
    with pytest.raises(NotImplementedError, match="Bool"):
        torch.zeros(1, 2, dtype=torch.bool).scatter_reduce(1, index, torch.tensor([[True, False, True]]), "amax")
    out = torch.zeros(1, 2, dtype=torch.uint8).scatter_reduce(1, index, torch.tensor([[1, 0, 1]], dtype=torch.uint8), "amax")
    assert out.tolist() == [[1, 1]]


def test_whole_word_recursive_masking_uses_no_bool_scatter(toy_classifier, cuda_like_bool_scatters):
    """Whole-word recursive masking (the measure and its random baseline) runs without a bool reducing scatter,
    and still masks whole words, as many as the schedule says."""
    from engine.faithfulness.single import mask_single_input

    result = mask_single_input(toy_classifier, TEXT, "loo-sign", random_seeds=[0], whole_words=True)
    words = result.units("word")
    assert len(words) < len(result.tokens), "the text has words of several pieces"
    for run in [result.measure, *result.random]:
        for step in run.steps:
            flags = (step.input_ids[0][result.maskable] == toy_classifier.mask_token_id).tolist()
            per_word = [{flags[i] for i in w.tokens} for w in words]
            assert all(len(s) == 1 for s in per_word), "no word is half masked"
            assert sum(s == {True} for s in per_word) == math.floor(len(words) * step.ratio + 1e-9)


def test_erasure_ranking_by_whole_words_uses_no_bool_scatter(toy_classifier, cuda_like_bool_scatters):
    """The erasure metrics by whole words run without a bool reducing scatter; pieces of a word share a rank and
    the unit count is the number of words."""
    from engine.faithfulness.erasure import erasure_metrics, word_ranking_positions
    from engine.importance import get_explainer
    from engine.importance.levels import word_ids_of

    batch = toy_classifier.batch([TEXT])
    word_ids = word_ids_of(batch, [TEXT])
    scores = get_explainer("loo-sign", toy_classifier).attribute(batch).scores
    rank, n_words = word_ranking_positions(scores, batch.maskable.cpu(), word_ids.cpu())
    assert n_words == [int(word_ids.max()) + 1]
    for w in range(n_words[0]):
        assert len(set(rank[0][word_ids[0].cpu() == w].tolist())) == 1, "the pieces of a word share one rank"
    result = erasure_metrics(toy_classifier, batch, scores, metrics=["decision-flip"], word_ids=word_ids)
    flip = float(result.values["flip-fraction"][0])
    assert math.isclose(flip * n_words[0], round(flip * n_words[0]), abs_tol=1e-9)
