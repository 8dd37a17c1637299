"""What the bench and scripts entries share: their `--smoke` mode (CI runs every entry so, see
tests/architecture/test_smoke_entrypoints.py): the real code on tiny inputs, in a scratch folder, in seconds. Smoke numbers mean
nothing; they show that the entry still runs end to end. And their end: the result record printed and written.

The bench and scripts entries import it as `engine.smoke` (the package is installed: no entry edits sys.path).
"""
from __future__ import annotations

import os
import tempfile
from pathlib import Path

SMOKE_HELP = "CI smoke mode: the real code on tiny inputs (toy data, 1 epoch, 1 repeat) in a scratch folder; the numbers mean nothing"


def print_and_write(result: dict, out: str | os.PathLike | None) -> int:
    """An entry's end: its result record printed as JSON (indented 2) and, when `out` names a file, written there
    the same way with a final newline, atomically (never a half-written result file; its folder made). Returns 0,
    the entry's exit status."""
    import json

    text = json.dumps(result, indent=2)
    print(text)
    if out:
        from engine.atomic import write_text

        Path(out).parent.mkdir(parents=True, exist_ok=True)
        write_text(out, text + "\n")
    return 0


def append_row(out: Path, row: dict) -> None:
    """One JSON line appended to `out` (its folder made): the per-input log of a long entry, which a rerun reads
    back to skip the inputs done."""
    import json

    out.parent.mkdir(parents=True, exist_ok=True)
    with out.open("a") as fh:
        fh.write(json.dumps(row) + "\n")


def use_scratch_folders() -> Path:
    """Point the models cache, results and user folders at a scratch folder, so a smoke run never writes into the
    project's. ENGINE_SMOKE_DIR (set by the CI test) shares one across entries, so the smoke checkpoint is trained once."""
    root = Path(os.environ.get("ENGINE_SMOKE_DIR") or tempfile.mkdtemp(prefix="engine-smoke-"))
    for name, sub in (("ENGINE_MODELS_CACHE", "models_cache"), ("ENGINE_RESULTS_DIR", "results"),
                      ("ENGINE_USER_DIR", "user"), ("ENGINE_ANNOTATIONS_DB", "annotations.sqlite")):
        os.environ[name] = str(root / sub)
    return root


def smoke_checkpoint(dataset: str = "toy", strategy: str = "masked") -> str:
    """The id of `tiny` fine-tuned for one epoch on (the first 64 examples of) `dataset` in the scratch models cache,
    trained now (a few seconds) if it is not there yet."""
    from engine.models import TrainConfig, default_model_id, list_checkpoints, save_classifier, train_classifier

    config = TrainConfig(base_model="tiny", dataset=dataset, strategy=strategy, epochs=1, lr=3e-4, batch_size=16,
                         seed=0, train_limit=64, eval_limit=32)
    model_id = default_model_id(config)
    if model_id not in {m["id"] for m in list_checkpoints() if "error" not in m}:
        save_classifier(train_classifier(config, show_progress_bar=False), model_id, overwrite=True)
    return model_id


def tiny_prompted(seed: int = 0):
    """A prompted classifier for the LLM entries' smoke mode: a random-weight 2-layer Llama on the packaged `tiny`
    BERT tokenizer with a plain prompt (the real code paths in seconds; its numbers mean nothing)."""
    import torch
    import transformers
    from transformers import AutoTokenizer

    from engine.models.encoders import resolve_encoder
    from engine.models.prompt_spec import PromptSpec
    from engine.models.prompted import PromptedClassifier

    tokenizer = AutoTokenizer.from_pretrained(resolve_encoder("tiny"))
    config = transformers.LlamaConfig(vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                      num_attention_heads=4, num_key_value_heads=2, pad_token_id=tokenizer.pad_token_id,
                                      bos_token_id=tokenizer.cls_token_id, eos_token_id=tokenizer.sep_token_id)
    torch.manual_seed(seed)
    model = transformers.AutoModelForCausalLM.from_config(config, attn_implementation="eager").eval()
    spec = PromptSpec.from_dict({"instruction": "is the review positive or negative ?", "input_format": "review : {input}",
                                 "template": "plain", "answer_prefix": "answer :",
                                 "verbalizer": {"negative": ["bad"], "positive": ["good"]}, "replacement": "special"})
    return PromptedClassifier(model, tokenizer, spec, max_length=96)
