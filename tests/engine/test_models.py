"""Tokenisation into `Batch`, the masked fine-tuning transform, checkpoints and their failure modes."""
from __future__ import annotations

import copy
import json

import pytest
import torch

from engine.data import get_dataset
from engine.models import (
    AUXILIARY,
    PRIMARY,
    CheckpointError,
    EmptyInputError,
    LabelMismatchError,
    TrainConfig,
    TrainingCancelled,
    UnknownModelError,
    list_checkpoints,
    load_classifier,
    mask_all_primary,
    resolve_encoder,
    save_classifier,
    tokenize,
    train_classifier,
    training_transform,
)
from engine.runtime import pick_device

pytestmark = pytest.mark.device  # depends on the torch device: a lent GPU runs it (-m device, docs/gpu.md)


@pytest.fixture(scope="module")
def tokenizer():
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(resolve_encoder("tiny"))


def test_single_input_maskable_is_primary_without_specials(tokenizer):
    b = tokenize(tokenizer, ["a fine film", "bad"], max_length=16)
    special = torch.isin(b.input_ids, torch.tensor(tokenizer.all_special_ids))
    assert not (b.maskable & special).any(), "special tokens are never maskable"
    assert (b.maskable == (b.segments == PRIMARY)).all()
    assert b.maskable[0].sum() == 3 and b.maskable[1].sum() == 1
    assert b.attention_mask[1].sum() == 3 and not b.truncated.any()


def test_paired_input_auxiliary_is_not_maskable_and_never_truncated(tokenizer):
    para = " ".join(["Mary went to the kitchen."] * 30)
    b = tokenize(tokenizer, [para], ["Where is Mary?"], max_length=32)
    assert b.truncated.tolist() == [True], "truncation is flagged"
    assert b.input_ids.shape[1] == 32
    aux = b.segments == AUXILIARY
    assert tokenizer.decode(b.input_ids[aux]) == "where is mary?", "the question survives truncation whole"
    assert not (b.maskable & aux).any()
    # offsets map primary tokens back into the text
    first = b.offsets[0][1]
    assert para[first[0]:first[1]] == "Mary"


@pytest.mark.parametrize("text", ["", "   ", "\n\t"])
def test_empty_text_is_a_clear_error(tokenizer, text):
    with pytest.raises(EmptyInputError, match="empty"):
        tokenize(tokenizer, [text])


def test_emoji_and_non_latin_text_tokenise(tokenizer):
    b = tokenize(tokenizer, ["très bien 👍 映画 фильм"], max_length=32)
    assert b.maskable.sum() >= 4


def test_masked_transform_masks_even_rows_only_and_never_specials(tokenizer):
    texts = ["word " * 40] * 64
    b = tokenize(tokenizer, texts, max_length=48)
    g = torch.Generator().manual_seed(0)
    out = training_transform(b, "masked", tokenizer.mask_token_id, g)
    masked = out.input_ids == tokenizer.mask_token_id
    assert not masked[1::2].any(), "odd rows stay unmasked"
    assert not masked[b.segments == 0].any(), "special tokens and padding are never masked"
    ratios = masked[0::2].sum(1).float() / b.maskable[0::2].sum(1)
    # r ~ U(0,1): the realised ratios of 32 rows spread over the unit interval
    assert ratios.min() < 0.25 and ratios.max() > 0.75 and 0.3 < ratios.mean() < 0.7
    plain = training_transform(b, "plain", tokenizer.mask_token_id, g)
    assert torch.equal(plain.input_ids, b.input_ids)
    only = training_transform(b, "only-masking", tokenizer.mask_token_id, g)
    assert (only.input_ids == tokenizer.mask_token_id)[1::2].any()
    full = mask_all_primary(b, tokenizer.mask_token_id)
    assert ((full.input_ids == tokenizer.mask_token_id) == b.maskable).all()
    with pytest.raises(ValueError, match="unknown strategy"):
        training_transform(b, "half", tokenizer.mask_token_id)


def test_masked_finetuning_learns_toy_and_records_provenance(toy_classifier):
    """The toy task is learnt; with every token masked the model can only answer with the class prior, so its
    100%-masked accuracy (recomputed here, with the exact binomial 95% CI that is stored) has the
    class-majority baseline inside its CI: neither below it (masked inputs out of distribution) nor above it
    (a mask that leaks the input). The old check, CI high >= baseline, held for any accuracy above ~1/3."""
    from scipy.stats import binomtest

    meta = toy_classifier.metadata
    assert meta["test"]["unmasked"] >= 0.9, "the toy task is learnable"
    masked = toy_classifier.evaluate(get_dataset("toy"), "test", mask_all=True)
    assert masked["n"] == meta["test"]["n"] and masked["accuracy"] == meta["test"]["masked_100_accuracy"]
    lo, hi = meta["test"]["masked_100_accuracy_ci95"]
    ci = binomtest(masked["n_correct"], masked["n"]).proportion_ci(0.95, method="exact")
    assert (lo, hi) == pytest.approx((ci.low, ci.high), abs=1e-12)
    assert lo <= meta["test"]["majority_baseline"] <= hi, "100%-masked accuracy matches the class-majority baseline"
    for key in ("dataset", "strategy", "split_seed", "seed", "config", "history", "best_epoch", "code_version"):
        assert key in meta
    assert len(meta["history"]) == 3 and meta["best_epoch"] in (1, 2, 3)
    assert meta["history"][meta["best_epoch"] - 1]["selection"] == max(h["selection"] for h in meta["history"])


def test_checkpoint_roundtrip_gives_identical_logits(toy_classifier, models_cache):
    folder = save_classifier(toy_classifier, "toy-roundtrip")
    assert (folder / "model.safetensors").is_file() and not list(folder.glob("*.bin")) and not list(folder.glob("*.pt"))
    loaded = load_classifier("toy-roundtrip")
    b = toy_classifier.batch(["the movie was great", "the plot was dull and bad"])
    with torch.no_grad():
        assert torch.allclose(toy_classifier.logits(b), loaded.logits(b.to(loaded.device)), atol=1e-6)
    assert loaded.classes == toy_classifier.classes and loaded.metadata["id"] == "toy-roundtrip"
    assert [m["id"] for m in list_checkpoints()] == ["toy-roundtrip"]
    with pytest.raises(FileExistsError):
        save_classifier(toy_classifier, "toy-roundtrip")


def _corrupt(folder, how):
    if how == "missing-weights":
        (folder / "model.safetensors").unlink()
    elif how == "corrupt-weights":
        (folder / "model.safetensors").write_bytes(b"\x00garbage" * 100)
    elif how == "corrupt-metadata":
        (folder / "metadata.json").write_text("{not json")
    elif how == "metadata-not-object":
        (folder / "metadata.json").write_text("[1, 2]")
    elif how == "label-mismatch":
        meta = json.loads((folder / "metadata.json").read_text())
        meta["classes"] = ["a", "b", "c"]
        (folder / "metadata.json").write_text(json.dumps(meta))


@pytest.mark.parametrize("how", ["missing-weights", "corrupt-weights", "corrupt-metadata", "metadata-not-object", "label-mismatch"])
def test_broken_checkpoint_is_a_clear_error_and_left_untouched(toy_classifier, models_cache, how):
    folder = save_classifier(toy_classifier, "broken")
    _corrupt(folder, how)
    before = {p.name: p.read_bytes() for p in folder.iterdir()}
    with pytest.raises(CheckpointError):
        load_classifier("broken")
    assert {p.name: p.read_bytes() for p in folder.iterdir()} == before, "a failed load changes nothing"
    listed = list_checkpoints()
    assert listed[0]["id"] == "broken" and "error" in listed[0]


def test_pickled_weights_are_never_loaded(toy_classifier, models_cache):
    """A folder whose weights come only as a pickle (which could run code) is refused. Saved from a shallow copy:
    saving points the classifier at the new folder, whose weights this test deletes, and the session's shared
    `toy_classifier` must keep naming loadable weights for the tests after it (test_export hashes them)."""
    folder = save_classifier(copy.copy(toy_classifier), "pickled")
    (folder / "model.safetensors").unlink()
    torch.save(toy_classifier.model.state_dict(), folder / "pytorch_model.bin")
    with pytest.raises(CheckpointError, match="missing model.safetensors"):
        load_classifier("pickled")


def test_label_set_mismatch_is_refused(toy_classifier):
    with pytest.raises(LabelMismatchError, match="classes"):
        toy_classifier.check_dataset(get_dataset("babi-1"))
    with pytest.raises(ValueError, match="out of range"):
        toy_classifier.check_target(2)


def test_unknown_model_names():
    with pytest.raises(UnknownModelError, match="unknown model"):
        resolve_encoder("roberta")
    with pytest.raises(CheckpointError, match="no checkpoint"):
        load_classifier("does-not-exist")
    with pytest.raises(ValueError, match="model id"):
        load_classifier("bad id!")


def test_device_choice():
    assert pick_device("cpu").type == "cpu"
    assert pick_device("auto").type == ("cuda" if torch.cuda.is_available() else "cpu")
    with pytest.raises(ValueError):
        pick_device("tpu")


def test_training_can_be_cancelled_and_saves_nothing(models_cache):
    calls = []

    def stop():
        calls.append(1)
        return len(calls) > 2

    with pytest.raises(TrainingCancelled):
        train_classifier(TrainConfig(dataset="toy", epochs=1, batch_size=8), should_stop=stop, show_progress_bar=False)
    assert not models_cache.exists() or not any(models_cache.iterdir())


def test_paired_training_uses_question(babi_classifier):
    meta = babi_classifier.metadata
    assert meta["paired"] and meta["dataset"] == "babi-1" and len(babi_classifier.classes) == 6
