"""What the first CUDA run (on an H200) found, checked on the CPU: the engine uses no kernel that CUDA
lacks, and runs the same wherever its inputs' tensors live."""
from __future__ import annotations

import math

import pytest
import torch

TEXT = "an unredeemable, overwrought mess with a wonderful cast"

# The reducing scatters CUDA implements for numbers only (ScatterGatherKernel.cu dispatches them for all types but
# bool): on a bool tensor they raise `"cuda_scatter_gather_base_kernel_func" not implemented for 'Bool'` there, while
# the CPU computes them. Plain gather and scatter without a reduction do have a bool kernel on CUDA.
_REDUCING_SCATTERS = ("scatter_reduce", "scatter_reduce_", "scatter_add", "scatter_add_")


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
    from engine.faithfulness.erasure import erasure_metrics
    from engine.faithfulness.perturb import word_ranking_positions
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


# -- where tensors live ------------------------------------------------------------------------------------------
# The 'meta' device stands in for a GPU: a CPU test cannot hold CUDA tensors, but mixing a meta tensor with a CPU
# one raises just as mixing CUDA and CPU does, and a meta model cannot be copied to the CPU.
def test_a_classifier_built_without_a_device_stays_where_its_model_is(toy_classifier):
    """Classifier(model, ...) without `device` keeps the model where its parameters are (on CUDA, copying it back
    to the CPU left the caller's CUDA batches on another device than the model); a CPU model stays on the CPU;
    a device given still moves it."""
    import copy

    from engine.models import Classifier

    args = (toy_classifier.tokenizer, toy_classifier.classes, toy_classifier.max_length)
    elsewhere = Classifier(copy.deepcopy(toy_classifier.model).to("meta"), *args)
    assert elsewhere.device.type == "meta"
    assert {p.device.type for p in elsewhere.model.parameters()} == {"meta"}
    here = Classifier(copy.deepcopy(toy_classifier.model).cpu(), *args)
    assert here.device == torch.device("cpu")
    moved = Classifier(copy.deepcopy(toy_classifier.model).cpu(), *args, device="meta")
    assert moved.device.type == "meta" and next(moved.model.parameters()).device.type == "meta"


def test_a_prompted_classifier_built_without_a_device_stays_where_its_model_is():
    """The same for a prompted causal LM."""
    import transformers
    from transformers import AutoTokenizer

    from engine.models.encoders import resolve_encoder
    from engine.models.prompt_spec import PromptSpec
    from engine.models.prompted import PromptedClassifier

    tokenizer = AutoTokenizer.from_pretrained(resolve_encoder("tiny"))
    config = transformers.LlamaConfig(vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                                      num_attention_heads=4, num_key_value_heads=2, pad_token_id=tokenizer.pad_token_id)
    model = transformers.AutoModelForCausalLM.from_config(config, attn_implementation="eager").to("meta")
    spec = PromptSpec.from_dict({"instruction": "is the review positive or negative ?", "input_format": "review : {input}",
                                 "template": "plain", "answer_prefix": "answer :", "examples": [],
                                 "verbalizer": {"negative": ["bad"], "positive": ["good"]}, "replacement": "unk"})
    clf = PromptedClassifier(model, tokenizer, spec, max_length=64)
    assert clf.device.type == "meta" and next(clf.model.parameters()).device.type == "meta"


def test_rankings_follow_the_batch_device_whatever_device_the_scores_are_on():
    """An `Importance` keeps its scores on the CPU (engine/importance/types.py); the ranking helpers the metrics
    share take them with a batch's mask on the model's device and compute there (on CUDA: masked_fill refused a
    CPU tensor with a CUDA mask, the first GPU run of an imported measure)."""
    from engine.faithfulness.erasure import soft_keep_probability
    from engine.faithfulness.perturb import ranking_positions
    from engine.faithfulness.recursive import masking_order_keys

    scores = torch.tensor([[0.0, 0.2, 0.9, 0.5, 0.0]])
    maskable = torch.tensor([[False, True, True, True, False]])
    expected = ranking_positions(scores, maskable)
    assert expected[0, 1:4].tolist() == [2, 0, 1]
    on_device = maskable.to("meta")
    assert ranking_positions(scores, on_device).device.type == "meta"
    assert masking_order_keys(scores, on_device, torch.zeros_like(on_device)).device.type == "meta"
    assert soft_keep_probability(scores, on_device).device.type == "meta"
