"""The prompted language models the project registers itself (no manifest file; docs/llm.md): a packaged LLM
(`engine.models.llm_package`), a prompt and, for the masked-LoRA ids, an adapter shipped in the repository.

    id                  LLM           prompt                                            adapter
    smollm2-rt-lora     smollm2       the adapter's (sentiment_prompt(): chat, [REDACTED]) builtin/smollm2-rt-lora/adapter
    gemma3-rt-lora      gemma3-270m   the adapter's (plain, zero-shot, [REDACTED] notice)  builtin/gemma3-rt-lora/adapter
    smollm2-rt-prompt   smollm2       sentiment_prompt()                                none (zero-shot)
    gemma3-rt-prompt    gemma3-270m   gemma3_rt_prompt() (few-shot plain text)          none

A masked-LoRA id uses the prompt it was trained with, saved beside its adapter (adapter/prompt_spec.json): Gemma's
LoRA starts from the zero-shot plain prompt, not the few-shot one, since a LoRA-trained model needs no examples and
its prompt (32 tokens besides the input, against 119) makes every forward pass about 40% as costly.

The masked-LoRA ids come first: their masked inputs are in distribution, so they are the ones a user can measure
by masking (the sidebar offers them first). A shipped adapter folder holds what `save_lora_classifier` writes
under `adapter/` (adapter_model.safetensors with the LoRA matrices only, adapter_config.json, the prompt spec,
provenance.json naming the base weights' SHA-256), `training.json` (the training run's metadata: command,
history, test figures) and `reference_logits.json` (class log-probabilities of a few sentences when it was
shipped, which a test compares against). It is applied to the converted base with
`lora_training.load_adapter` (safetensors only) and merged.

The Gemma few-shot prompt is `builtin/gemma3-rt-prompt.json`: the variant chosen on rt validation sentences among
those `scripts/experiments/llm_prompt_variants.py` writes with `draw_examples` + `gemma3_rt_spec` (a seeded draw from rt's
*training* split; a test checks that the shipped file is what the draw gives).
"""
from __future__ import annotations

import hashlib
import json
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from engine.errors import CheckpointError
from engine.models.prompt_spec import PromptSpec, sentiment_prompt

BUILTIN_DIR = Path(__file__).resolve().parent / "builtin"
GEMMA_PROMPT_FILE = BUILTIN_DIR / "gemma3-rt-prompt.json"

#: the draw of the Gemma prompt's few-shot examples (rt training split): per class, seed, longest sentence in words
GEMMA_SHOTS = {"dataset": "rt", "split": "train", "per_class": 2, "seed": 0, "max_words": 20}
GEMMA_INSTRUCTION = "Is the sentiment of each movie review positive or negative?"
REDACTION_NOTICE = "Some words may have been redacted and replaced by [REDACTED]."


def draw_examples(dataset: str = "rt", split: str = "train", per_class: int = 2, seed: int = 0,
                  max_words: int = 20) -> list[dict]:
    """Few-shot examples: `per_class` sentences of each class drawn (seeded) among the split's sentences of at
    most `max_words` words (a short prompt keeps every forward pass cheap), then shuffled with the same seed so the
    classes alternate by chance, not by construction. [{'input': text, 'label': class name}]."""
    import numpy as np

    from engine.data import get_dataset

    data = get_dataset(dataset)
    rows = [e for e in data.split(split) if len(e.primary.split()) <= max_words]
    rng = np.random.default_rng(seed)
    picked = []
    for label, name in enumerate(data.classes):
        pool = [e for e in rows if e.label == label]
        picked += [{"input": pool[i].primary, "label": name} for i in sorted(rng.choice(len(pool), per_class, replace=False))]
    return [picked[i] for i in rng.permutation(len(picked))]


def gemma3_rt_spec(examples: list[dict], notice: bool = True, instruction: str = GEMMA_INSTRUCTION) -> PromptSpec:
    """The plain-text prompt a base model can continue: an instruction line, then 'Review: ...' / 'Sentiment: label'
    pairs and the input's pair left open after 'Sentiment:'. The label words carry their leading space
    (' negative', ' positive'), so each starts a new word after the answer prefix as in the examples (one
    Gemma token each, checked by a test)."""
    return PromptSpec(
        instruction=instruction + (" " + REDACTION_NOTICE if notice else ""),
        input_format="Review: {input}", template="plain", examples=list(examples), answer_prefix="Sentiment:",
        verbalizer={"negative": [" negative"], "positive": [" positive"]},
        replacement="redacted", mask_notice=REDACTION_NOTICE if notice else None)


def gemma3_rt_prompt() -> PromptSpec:
    """The shipped prompt of `gemma3-rt-prompt` (chosen on rt validation sentences, docs/llm.md)."""
    try:
        return PromptSpec.from_dict(json.loads(GEMMA_PROMPT_FILE.read_text(encoding="utf-8")))
    except FileNotFoundError:
        raise CheckpointError(f"the prompt of gemma3-rt-prompt is missing ({GEMMA_PROMPT_FILE}); restore it from the "
                              "repository or write it with `python -m engine.models.builtin_llms --write`") from None


@dataclass(frozen=True)
class BuiltinPrompted:
    """A built-in id: the packaged LLM key, its prompt (None: the adapter's), the shipped adapter folder (or None)
    and a short label."""

    model_id: str
    llm: str
    prompt_of: Callable[[], PromptSpec] | None
    adapter: str | None
    label: str

    def prompt(self) -> PromptSpec:
        if self.prompt_of is not None:
            return self.prompt_of()
        path = self.adapter_dir / "adapter" / "prompt_spec.json"
        try:
            return PromptSpec.from_dict(json.loads(path.read_text(encoding="utf-8")))
        except FileNotFoundError:
            raise CheckpointError(f"the shipped adapter of {self.model_id} has no prompt spec ({path})") from None

    @property
    def adapter_dir(self) -> Path | None:
        return BUILTIN_DIR / self.adapter if self.adapter else None

    @property
    def shipped(self) -> bool:
        """A LoRA id is offered only when its adapter is in the checkout; a prompt-only id always is."""
        return self.adapter is None or (self.adapter_dir / "adapter" / "adapter_model.safetensors").is_file()


BUILTINS: dict[str, BuiltinPrompted] = {b.model_id: b for b in (
    BuiltinPrompted("smollm2-rt-lora", "smollm2", None, "smollm2-rt-lora", "masked LoRA"),
    BuiltinPrompted("gemma3-rt-lora", "gemma3-270m", None, "gemma3-rt-lora", "masked LoRA"),
    BuiltinPrompted("smollm2-rt-prompt", "smollm2", sentiment_prompt, None, "zero-shot"),
    BuiltinPrompted("gemma3-rt-prompt", "gemma3-270m", gemma3_rt_prompt, None, "few-shot"),
)}
#: the zero-shot / few-shot id -> its masked-LoRA counterpart (what the Explain page suggests)
LORA_OF = {"smollm2-rt-prompt": "smollm2-rt-lora", "gemma3-rt-prompt": "gemma3-rt-lora"}


def file_sha256(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def training_record(model_id: str) -> dict:
    """The shipped adapter's training metadata (`training.json`)."""
    folder = BUILTINS[model_id].adapter_dir
    try:
        return json.loads((folder / "training.json").read_text(encoding="utf-8"))
    except (FileNotFoundError, json.JSONDecodeError) as err:
        raise CheckpointError(f"the shipped adapter of {model_id} has no readable training.json in {folder} ({err})") from None


def adapter_sha256(model_id: str) -> str:
    """SHA-256 (hex) of built-in `model_id`'s shipped adapter_model.safetensors."""
    from engine.models.adapters import ADAPTER_DIR

    return file_sha256(BUILTINS[model_id].adapter_dir / ADAPTER_DIR / "adapter_model.safetensors")


def merged_weights_sha256(base_hash: str, adapter_hash: str) -> str:
    """The weights hash of a base with an adapter merged in: SHA-256 (hex) of '<base's weights hash>+<adapter's
    hash>', so that another adapter on the same base, or the same adapter on another conversion of the base, is
    another model."""
    return hashlib.sha256(f"{base_hash}+{adapter_hash}".encode()).hexdigest()


def apply_shipped_adapter(classifier, model_id: str):
    """Put the shipped masked-LoRA adapter of `model_id` on a freshly loaded prompted classifier of its base, merge
    it, and record in the metadata what it is (strategy masked, the LoRA settings, the test figures, a weights
    hash over base and adapter). Reads adapter_model.safetensors only (`lora_training.load_adapter`)."""
    from engine.models.adapters import ADAPTER_DIR, load_adapter

    builtin = BUILTINS[model_id]
    if not builtin.shipped:
        raise CheckpointError(f"{model_id} has no adapter in {builtin.adapter_dir}; restore it from the repository")
    record = training_record(model_id)
    provenance = json.loads((builtin.adapter_dir / ADAPTER_DIR / "provenance.json").read_text(encoding="utf-8"))
    base_hash = classifier.weights_sha256
    trained_on = provenance.get("base_weights_sha256")
    if trained_on not in (None, base_hash):
        # Another conversion of the same package (e.g. another transformers version's rounding): the adapter still
        # applies, but its recorded figures were measured on other base weights; say so, in the metadata too.
        warnings.warn(f"the adapter of {model_id} was trained on base weights {trained_on[:12]}..., but the converted "
                      f"{builtin.llm} has {str(base_hash)[:12]}...; its recorded test figures may not carry over "
                      f"(convert it again from its package, or retrain)", stacklevel=2)
    peft_model = load_adapter(classifier, builtin.adapter_dir)
    classifier.model = peft_model.merge_and_unload().eval()
    adapter_hash = adapter_sha256(model_id)
    merged_hash = merged_weights_sha256(base_hash, adapter_hash)
    keep = ("strategy", "masked_fine_tuned", "dataset", "classes", "metric", "lora", "history", "best_epoch", "test",
            "test_sample", "train_size", "validation_size", "split_seed", "seed", "config", "selection_rule",
            "train_seconds", "code_version", "created")
    classifier.metadata.update({k: record[k] for k in keep if k in record})
    classifier.metadata.update({
        "id": model_id, "source": "lora", "builtin": True, "adapter": str(builtin.adapter_dir / ADAPTER_DIR),
        "adapter_sha256": adapter_hash, "base_weights_sha256": base_hash,
        "base_weights_as_trained": trained_on in (None, base_hash),
        "weights_sha256": merged_hash,
        "note": "a prompted language model masked-fine-tuned with LoRA (shipped adapter): masked inputs are in distribution"})
    # the model it runs is the base and the adapter merged: not its folder's files, which are the base's alone
    classifier.record_weights_sha256(classifier.metadata["weights_sha256"])
    return classifier
