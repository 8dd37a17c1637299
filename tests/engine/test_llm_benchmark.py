"""A prompted LM through the recursive-masking benchmark (`python -m engine mask-sweep --model-template ID`): a
registered causal-LM folder validates, a zero-shot LM's MaSF calibrates on unmasked inputs, a LoRA checkpoint keeps
its MaSF fits in its own folder, and `--no-masf` skips the fit. A random-weight 2-layer Llama on the packaged `tiny`
BERT tokenizer with a plain prompt (seconds)."""
from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from engine.cli import main
from engine.models.prompt_spec import PromptSpec
from engine.models.prompted import PromptedClassifier

SPEC = {"instruction": "is the review positive or negative ?", "input_format": "review : {input}", "template": "plain",
        "answer_prefix": "answer :", "verbalizer": {"negative": ["bad"], "positive": ["good"]}, "replacement": "special"}


@pytest.fixture(scope="module")
def llama_folder(tmp_path_factory):
    """A causal-LM folder (config, model.safetensors, fast tokenizer) of a random-weight tiny Llama."""
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    from engine.models.encoders import resolve_encoder

    folder = tmp_path_factory.mktemp("tiny-llama")
    tokenizer = AutoTokenizer.from_pretrained(resolve_encoder("tiny"))
    config = LlamaConfig(vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, pad_token_id=tokenizer.pad_token_id,
                         bos_token_id=tokenizer.cls_token_id, eos_token_id=tokenizer.sep_token_id)
    torch.manual_seed(0)
    LlamaForCausalLM(config).eval().save_pretrained(folder, safe_serialization=True)
    tokenizer.save_pretrained(folder)
    return folder


def test_validate_model_accepts_a_registered_prompted_lm_and_still_refuses_one_without_weights(llama_folder, models_cache,
                                                                                           tmp_path):
    """`benchmark` validates each model before any work: a registered causal LM with a prompt is a classifier (it
    has no *ForSequenceClassification head to find), and the same registration pointing at a folder without
    weights is refused."""
    import shutil

    from engine.errors import CheckpointError
    from engine.models.checkpoint import validate_model
    from engine.models.registry import register_model

    register_model(llama_folder, "tiny-llama-rt", prompt=SPEC)
    validate_model("tiny-llama-rt")
    broken = tmp_path / "broken"
    shutil.copytree(llama_folder, broken)
    register_model(broken, "tiny-llama-broken", prompt=SPEC)
    (broken / "model.safetensors").unlink()
    with pytest.raises(CheckpointError, match="no weights"):
        validate_model("tiny-llama-broken")


def test_a_zero_shot_prompted_lm_calibrates_masf_on_unmasked_inputs(llama_folder):
    """A zero-shot prompted LM never saw a masked input: its MaSF is calibrated like a plainly fine-tuned model's
    (the inputs unmasked), and the fit goes through."""
    from engine.models.prompted_loading import load_prompted
    from engine.ood import calibration_strategy, fit_masf

    clf = load_prompted(llama_folder, SPEC, model_id="tiny-llama-rt")
    assert clf.metadata["strategy"] == "zero-shot"
    assert calibration_strategy(clf) == "plain"
    masf = fit_masf(clf, dataset="rt", limit=36, save=False)
    assert masf.provenance["key"]["strategy"] == "plain" and masf.provenance["n_inputs"] == 36


def test_a_saved_prompted_checkpoint_keeps_its_fits_in_its_own_folder(llama_folder, tmp_path):
    """A LoRA checkpoint's metadata is copied from the zero-shot model it was trained from, whose `artifacts_dir` is
    that model's registry folder: loaded, the checkpoint keeps what is fitted for it (MaSF) in its own folder, never
    among another model's fits."""
    import shutil

    from engine.models.metadata import CheckpointMeta
    from engine.models.prompted_loading import load_prompted_checkpoint

    folder = tmp_path / "tiny-llama-lora"
    shutil.copytree(llama_folder, folder)
    metadata = {"id": "tiny-llama-lora", "prompt": PromptSpec.from_dict(SPEC).to_dict(), "strategy": "masked",
                "masked_fine_tuned": True, "artifacts_dir": str(tmp_path / "user" / "models" / "tiny-llama-rt")}
    (folder / "metadata.json").write_text(json.dumps(metadata), encoding="utf-8")
    clf = load_prompted_checkpoint(folder, CheckpointMeta.from_dict(metadata))
    assert isinstance(clf, PromptedClassifier)
    assert clf.artifacts_dir == folder


def test_benchmark_runs_a_registered_prompted_lm_without_masf(llama_folder, models_cache, tmp_path, monkeypatch, capsys):
    """`benchmark --model-template ID --no-masf` on a registered prompted LM writes curves whose p-values are NaN
    (no fit), with the same accuracy per level as with MaSF; a cell with MaSF keeps the key it had before the option
    existed (resumable runs)."""
    from engine.faithfulness.benchmark import Cell
    from engine.models.registry import register_model
    from engine.results import ResultsStore

    monkeypatch.setenv("ENGINE_RESULTS_DIR", str(tmp_path / "results"))
    register_model(llama_folder, "tiny-llama-rt", prompt=SPEC)
    argv = ["mask-sweep", "--model-template", "tiny-llama-rt", "--datasets", "rt", "--measures", "random", "grad-l2",
            "--seeds", "0", "--limit", "6", "--ratios", "0,0.5,1", "--run", "llm", "--workers", "1", "--no-masf"]
    assert main(argv) == 0
    assert "2 cells computed" in capsys.readouterr().out
    rows = ResultsStore(tmp_path / "results").load("llm")
    assert sorted(rows["measure"].unique()) == ["grad-l2", "random"]
    assert rows["p_value"].isna().all() and rows["p_below_005"].isna().all()
    assert np.isfinite(rows["value"]).all() and set(rows["n_examples"]) == {6}
    assert "masf" not in Cell(model="m", dataset="rt", measure="random", seed=0).key()
    assert Cell(model="m", dataset="rt", measure="random", seed=0, masf=False).key()["masf"] is False
