"""A prompted LM's MaSF fit is keyed by its prompt: its fits are kept per model id, and the same id
can come to read another prompt (a built-in whose prompt changed in the code, an id registered again), so a fit made
under one prompt must never be served to another. Encoders' keys are unchanged (no prompt)."""
from __future__ import annotations

import copy

import pytest
import torch

from engine.models.prompt_spec import PromptSpec
from engine.models.prompted import PromptedClassifier
from engine.ood import CalibrationKey, calibration_key

pytestmark = pytest.mark.device  # depends on the torch device: a lent GPU runs it (-m device, docs/gpu.md)


def _prompted(tokenizer, instruction: str) -> PromptedClassifier:
    import transformers

    config = transformers.LlamaConfig(vocab_size=len(tokenizer), hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                                      num_attention_heads=2, num_key_value_heads=1, pad_token_id=tokenizer.pad_token_id)
    torch.manual_seed(0)
    model = transformers.AutoModelForCausalLM.from_config(config, attn_implementation="eager").eval()
    spec = PromptSpec.from_dict({"instruction": instruction, "input_format": "review : {input}", "template": "plain",
                                 "answer_prefix": "answer :", "verbalizer": {"negative": ["bad"], "positive": ["good"]}})
    clf = PromptedClassifier(model, copy.deepcopy(tokenizer), spec, max_length=64,
                             metadata={"dataset": "toy", "strategy": "masked"})
    return clf


def test_another_prompt_under_the_same_model_is_another_calibration(toy_classifier):
    tok = toy_classifier.tokenizer
    a = calibration_key(_prompted(tok, "is the review positive or negative ?"), "toy")
    b = calibration_key(_prompted(tok, "is the review positive or negative ?"), "toy")
    c = calibration_key(_prompted(tok, "what is the sentiment of the review ?"), "toy")
    assert a == b and a.digest == b.digest
    assert a != c and a.digest != c.digest and "prompt_sha256" in a.differences(c)
    assert a.prompt_sha256 and "prompt" in a.describe()


def test_an_encoders_key_has_no_prompt_and_old_keys_read_as_none(toy_classifier):
    key = calibration_key(toy_classifier, "toy")
    assert key.prompt_sha256 is None and "prompt" not in key.describe()
    stored = {k: v for k, v in key.__dict__.items() if k != "prompt_sha256"}  # a key written before the field
    assert CalibrationKey.from_dict(stored) == key
