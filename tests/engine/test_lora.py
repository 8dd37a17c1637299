"""Masked LoRA fine-tuning of a prompted language model (engine.models.lora_training), on a random-weight tiny
Llama (2 layers, hidden 32) built here with the packaged `tiny` BERT tokenizer and a plain-text prompt, trained
on a few `rt` sentences (a few seconds)."""
from __future__ import annotations

import copy
import json

import pytest
import torch

from engine.models.batch import SPECIAL
from engine.models.lora_training import LoraTrainConfig, load_adapter, mask_training_batch, save_lora_classifier, train_lora
from engine.models.prompt_spec import PromptSpec
from engine.models.prompted import PromptedClassifier

pytestmark = pytest.mark.device  # depends on the torch device: a lent GPU runs it (-m device, docs/gpu.md)

pytest.importorskip("peft")


def rt_spec(replacement: str = "special") -> PromptSpec:
    return PromptSpec.from_dict({
        "instruction": "is the review positive or negative ?", "input_format": "review : {input}", "template": "plain",
        "answer_prefix": "answer :", "verbalizer": {"negative": ["bad"], "positive": ["good", "great"]},
        "replacement": replacement})


@pytest.fixture(scope="module")
def bert_tokenizer():
    from transformers import AutoTokenizer

    from engine.models.encoders import resolve_encoder

    return AutoTokenizer.from_pretrained(resolve_encoder("tiny"))


def tiny_llama(tokenizer, seed: int = 0):
    """A random-weight Llama (2 layers, hidden 32) sized to the tokenizer, float32, eager attention."""
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, pad_token_id=tokenizer.pad_token_id,
                         bos_token_id=tokenizer.cls_token_id, eos_token_id=tokenizer.sep_token_id)
    torch.manual_seed(seed)
    return LlamaForCausalLM(config).eval()


def make(tokenizer, replacement: str = "special", seed: int = 0) -> PromptedClassifier:
    tok = copy.deepcopy(tokenizer)
    clf = PromptedClassifier(tiny_llama(tok, seed), tok, rt_spec(replacement), max_length=96)
    clf.metadata.update(id="tiny-llama-prompt", base_model="tiny-llama", folder=None, weights_sha256=None)
    return clf


def config(**overrides) -> LoraTrainConfig:
    base = {"base_model": "custom", "dataset": "rt", "epochs": 3, "lr": 1e-2, "batch_size": 8, "train_limit": 16,
            "eval_limit": 8, "test_sample": 8, "eval_batch_size": 8, "lora_r": 4, "lora_dropout": 0.0, "device": "cpu"}
    base.update(overrides)
    return LoraTrainConfig(**base)


@pytest.fixture(scope="module")
def trained(bert_tokenizer):
    """(classifier before LoRA as a state-dict copy, trained classifier, peft model), 3 epochs on 16 rt sentences."""
    clf = make(bert_tokenizer)
    before = {k: v.clone() for k, v in clf.model.state_dict().items()}
    clf, peft_model = train_lora(config(), classifier=clf, show_progress_bar=False)
    return before, clf, peft_model


def test_lora_epochs_lower_the_training_loss_on_the_verbalizer(trained):
    """The training loss (cross-entropy on the class log-probabilities) falls over 3 epochs on the same sentences,
    and the dual validation (unmasked and masked) is recorded for every epoch."""
    _, clf, _ = trained
    history = clf.metadata["history"]
    assert [h["epoch"] for h in history] == [1, 2, 3]
    assert history[-1]["train_loss"] < history[0]["train_loss"]
    assert all(0 <= h["val_unmasked"] <= 1 and 0 <= h["val_masked"] <= 1 for h in history)
    assert clf.metadata["masked_fine_tuned"] is True and clf.metadata["strategy"] == "masked"
    t = clf.metadata["test"]
    assert t["n"] == 8 and 0 <= t["masked_100_accuracy"] <= 1


def test_only_lora_parameters_change_and_the_base_is_frozen(trained):
    """After training, every base weight equals its value before (keys map through peft's `base_layer`), and the
    LoRA B matrices (initialised to zero) are no longer zero; only lora_ parameters require gradients."""
    before, clf, peft_model = trained
    state = clf.model.state_dict()
    lora_keys = [k for k in state if "lora_" in k]
    assert lora_keys
    for key, value in state.items():
        if "lora_" in key:
            continue
        assert torch.equal(value, before[key.replace(".base_layer", "")]), key
    assert all(state[k].abs().sum() > 0 for k in lora_keys if "lora_B" in k)
    trainable = [n for n, p in peft_model.named_parameters() if p.requires_grad]
    assert trainable and all("lora_" in n for n in trainable)


@pytest.mark.parametrize("replacement", ["special", "redacted"])
def test_training_masking_touches_only_input_slot_tokens_of_even_rows(bert_tokenizer, replacement):
    """FMM's half-batch transform on a prompted batch: changed positions are slot tokens (never the instruction,
    template or label text), only even rows change, and they become the spec's replacement id."""
    clf = make(bert_tokenizer, replacement)
    texts = ["a gripping , funny and moving film about friendship and loss"] * 8
    batch = clf.batch(texts, target=[1] * 8).to("cpu")
    changed = torch.zeros_like(batch.maskable)
    generator = torch.Generator().manual_seed(0)
    for _ in range(20):
        masked = mask_training_batch(clf, batch, generator)
        diff = masked.input_ids != batch.input_ids
        assert torch.all(masked.input_ids[diff] == clf.mask_token_id)
        changed |= diff
    assert not changed[batch.segments == SPECIAL].any()
    assert not changed[1::2].any()
    assert changed[0::2].any()
    assert torch.equal(changed, changed & batch.maskable)


def test_saved_adapter_and_merged_folder_reload_to_identical_logits_without_pickles(trained, bert_tokenizer, models_cache):
    """The merged folder loads by id as one prompted classifier, and base + saved adapter gives the same logits as
    the trained model; nothing but safetensors and JSON/text is written, and the adapter records its base."""
    from engine.models import load_classifier

    _, clf, peft_model = trained
    texts = ["a gripping , funny film", "dull , tedious and far too long"]
    with torch.no_grad():
        expected = clf.logits(clf.batch(texts))
    folder = save_lora_classifier(clf, peft_model, "tiny-lora", cache_dir=models_cache)
    files = [p for p in folder.rglob("*") if p.is_file()]
    assert not [p for p in files if p.suffix in (".bin", ".pt", ".pth", ".pkl", ".pickle", ".ckpt")]
    assert {p.suffix for p in files} <= {".safetensors", ".json", ".txt", ".jinja", ".md"}  # .md: peft's model card
    assert (folder / "adapter" / "adapter_model.safetensors").is_file()
    provenance = json.loads((folder / "adapter" / "provenance.json").read_text())
    assert provenance["from_classifier"] == "tiny-llama-prompt" and provenance["lora"]["r"] == 4

    merged = load_classifier("tiny-lora")
    assert isinstance(merged, PromptedClassifier) and merged.masked_fine_tuned
    assert merged.metadata["prompt"] == clf.metadata["prompt"] and merged.metadata["source"] == "lora"
    base = make(bert_tokenizer)
    load_adapter(base, folder)
    with torch.no_grad():
        # the merged folder loads on the tests' device; the trained classifier ran on the CPU (config device)
        assert torch.allclose(merged.logits(merged.batch(texts)).cpu(), expected.cpu(), atol=1e-5)
        assert torch.allclose(base.logits(base.batch(texts)), expected, atol=1e-5)
        assert torch.allclose(clf.logits(clf.batch(texts)), expected, atol=1e-5)  # merged in place: same function


def test_lora_refuses_a_classifier_that_is_not_a_prompted_lm(toy_classifier):
    """--lora on an encoder classifier says what to use instead."""
    from engine.errors import NotApplicableError

    with pytest.raises(NotApplicableError, match="without --lora"):
        train_lora(config(dataset="toy"), classifier=toy_classifier, show_progress_bar=False)


def test_cli_train_lora_saves_a_merged_folder_and_an_adapter(tmp_path, models_cache, bert_tokenizer, capsys):
    """`train --from-classifier ID --dataset rt --lora` on a registered prompted tiny Llama writes models_cache/<id>/
    (merged model + adapter/) and prints the test accuracy with its interval; the id then loads as masked-fine-tuned."""
    from engine.cli import main
    from engine.models import load_classifier
    from engine.models.registry import register_model

    clf = make(bert_tokenizer, "redacted")
    folder = tmp_path / "tiny-llama"
    clf.model.save_pretrained(folder)
    clf.tokenizer.save_pretrained(folder)
    register_model(folder, "tiny-llama-prompt", prompt=rt_spec("redacted").to_dict())
    assert main(["train", "--from-classifier", "tiny-llama-prompt", "--dataset", "rt", "--lora", "--lora-r", "2",
                 "--train-limit", "8", "--eval-limit", "4", "--test-sample", "4", "--quiet", "--id", "tiny-rt-lora"]) == 0
    out = capsys.readouterr().out
    assert "adapter (LoRA r=2" in out and "100% masked" in out
    assert (models_cache / "tiny-rt-lora" / "adapter" / "adapter_model.safetensors").is_file()
    loaded = load_classifier("tiny-rt-lora")
    assert loaded.masked_fine_tuned and loaded.metadata["replacement"] == "redacted"
    assert loaded.metadata["lora"]["r"] == 2 and loaded.metadata["config"]["epochs"] == 1


def test_an_adapter_with_only_a_pickle_is_refused_before_peft_can_unpickle_it(trained, bert_tokenizer, models_cache):
    """peft falls back to torch.load of adapter_model.bin when no safetensors file is there: load_adapter refuses
    such a folder (naming the safetensors file) and nothing is unpickled."""
    from engine.errors import CheckpointError

    _, clf, peft_model = trained
    folder = save_lora_classifier(clf, peft_model, "tiny-lora-pickle", cache_dir=models_cache)
    adapter = folder / "adapter"
    (adapter / "adapter_model.safetensors").rename(adapter / "adapter_model.bin")
    original = torch.load
    torch.load = lambda *a, **k: pytest.fail("an adapter pickle was unpickled")
    try:
        with pytest.raises(CheckpointError, match="adapter_model.safetensors"):
            load_adapter(make(bert_tokenizer), folder)
    finally:
        torch.load = original
