"""A classifier's kind (classification head, prompted LM, BiLSTM) has one answer, `Classifier.kind`, and the listing
of choosable models gives the same answer without loading anything (`CatalogueEntry.kind`, from the typed metadata);
the catalogue is typed, built in engine/models from the three listings, and the sidebar only draws it."""
from __future__ import annotations

import re
from pathlib import Path

import pytest
from test_prompted import bert_tokenizer, spec, tiny_lm  # noqa: F401 (bert_tokenizer: the fixture)

from engine.models.kinds import BILSTM_ARCHITECTURE, ModelKind, kind_of
from engine.models.metadata import CheckpointMeta

ROOT = Path(__file__).resolve().parents[2]


def test_the_recorded_facts_decide_the_kind_a_prompt_first():
    """A prompt spec makes a prompted LM whatever else is recorded; the BiLSTM's architecture (or, before it was
    recorded, its base model) makes the BiLSTM; anything else is a classification head."""
    assert kind_of({"instruction": "x"}, BILSTM_ARCHITECTURE, "bilstm") is ModelKind.PROMPTED
    assert kind_of(None, BILSTM_ARCHITECTURE) is ModelKind.BILSTM
    assert kind_of(None, None, "bilstm") is ModelKind.BILSTM
    assert kind_of(None, "bert", "bilstm") is ModelKind.HEAD, "a recorded architecture wins over a base model's name"
    assert kind_of(None, "bert", "tiny") is ModelKind.HEAD and kind_of(None, None) is ModelKind.HEAD
    assert CheckpointMeta.from_dict({"id": "m", "prompt": {"instruction": "x"}}).kind is ModelKind.PROMPTED
    assert CheckpointMeta.from_dict({"id": "m", "architecture": BILSTM_ARCHITECTURE}).kind is ModelKind.BILSTM
    assert ModelKind.PROMPTED == "prompted LM" and f"{ModelKind.BILSTM}" == "BiLSTM", "a str enum: its words"


def test_a_saved_head_has_the_same_kind_loaded_and_listed(models_cache, toy_classifier):
    from engine.models import load_classifier, save_classifier
    from engine.models.catalogue import model_catalogue, model_kind
    from engine.models.metadata import read_metadata

    folder = save_classifier(toy_classifier, "kind-toy")
    assert toy_classifier.kind is ModelKind.HEAD
    assert load_classifier("kind-toy").kind is read_metadata(folder).kind is ModelKind.HEAD
    assert model_kind("kind-toy") is model_kind(folder) is ModelKind.HEAD
    (entry,) = [e for e in model_catalogue() if e.origin == "checkpoint"]
    assert (entry.id, entry.origin, entry.kind, entry.path) == ("kind-toy", "checkpoint", ModelKind.HEAD, str(folder))


def test_an_in_memory_bilstm_is_the_bilstm_kind_and_its_metadata_and_folder_say_so(tmp_path):
    from engine.data import get_dataset
    from engine.models import Classifier
    from engine.models.bilstm import new_bilstm
    from engine.models.catalogue import model_kind

    dataset = get_dataset("toy")
    model, tokenizer = new_bilstm([e.primary for e in dataset.split("train")[:50]], 2, dataset.classes, paired=False)
    classifier = Classifier(model, tokenizer, dataset.classes, max_length=32)
    assert classifier.kind is ModelKind.BILSTM
    assert CheckpointMeta.from_dict({"id": "b", "architecture": model.config.architecture}).kind is ModelKind.BILSTM
    model.save_pretrained(tmp_path / "bilstm")
    assert model_kind(tmp_path / "bilstm") is ModelKind.BILSTM, "a folder without metadata: its config decides"


def test_a_prompted_lm_is_the_prompted_kind_loaded_registered_and_listed(models_cache, tmp_path, bert_tokenizer):  # noqa: F811
    """In memory, registered from a folder and listed in the catalogue (without loading it): a prompted LM each
    time, by the one rule, and the catalogue's entry keeps the registration's facts typed."""
    from engine.errors import CheckpointError
    from engine.models import load_classifier, register_model
    from engine.models.catalogue import model_catalogue, model_kind
    from engine.models.prompted import PromptedClassifier

    lm = tiny_lm("llama", bert_tokenizer)
    assert PromptedClassifier(lm, bert_tokenizer, spec()).kind is ModelKind.PROMPTED
    folder = tmp_path / "tiny-llama"
    lm.save_pretrained(folder)
    bert_tokenizer.save_pretrained(folder)
    register_model(folder, "kind-llama", prompt=spec().to_dict())
    entry = next(e for e in model_catalogue() if e.id == "kind-llama")
    assert (entry.origin, entry.kind, entry.registered, entry.builtin) == ("registered", ModelKind.PROMPTED, True, False)
    assert entry.meta.strategy == "prompted" and entry.meta.classes == ("negative", "positive")
    assert not entry.masked_fine_tuned and entry.meta.dataset is None
    assert load_classifier("kind-llama").kind is model_kind("kind-llama") is ModelKind.PROMPTED
    assert model_kind("smollm2-rt-prompt") is ModelKind.PROMPTED, "a built-in id: its manifest's prompt, nothing loaded"
    with pytest.raises(CheckpointError, match="no checkpoint or registered model 'nowhere'"):
        model_kind("nowhere")


def test_the_catalogue_lists_checkpoints_then_registered_then_installed_builtins_typed(models_cache, toy_classifier,
                                                                                         monkeypatch):
    """Its order is the sidebar's (trained here, registered, built in); a broken checkpoint, a registration whose
    folder is gone and a built-in LM whose package is missing are left out; each entry reads as the dict the
    sidebar used to build (row()) as well as through its typed fields."""
    import engine.models.registry as registry
    from engine.models import save_classifier
    from engine.models.catalogue import CatalogueEntry, model_catalogue

    save_classifier(toy_classifier, "a-toy")
    (models_cache / "b-half-copied").mkdir()
    (models_cache / "b-half-copied" / "config.json").write_text("{}")
    builtin = {"id": "llm-prompt", "path": "/nowhere/llm", "description": "SmolLM2-135M, 4-bit", "label": "zero-shot",
               "masked_fine_tuned": False, "replacement_token": "<unk>", "converted": False, "installed": True,
               "classes": ["negative", "positive"], "prompt": spec().to_dict()}
    missing = dict(builtin, id="llm-missing", installed=False)
    monkeypatch.setattr(registry, "builtin_prompted", lambda: [builtin, missing])
    monkeypatch.setattr(registry, "registered_models", lambda: [
        {"id": "mine", "path": "/data/mine", "architecture": "bert", "masked_fine_tuned": True, "classes": ["a", "b"]},
        {"id": "gone", "path": "/data/gone", "error": "folder /data/gone no longer exists"}])
    entries = model_catalogue()
    assert all(isinstance(e, CatalogueEntry) for e in entries)
    assert [(e.id, e.origin, e.kind) for e in entries] == [
        ("a-toy", "checkpoint", ModelKind.HEAD), ("mine", "registered", ModelKind.HEAD),
        ("llm-prompt", "builtin", ModelKind.PROMPTED)]
    toy, mine, llm = entries
    assert toy.meta.dataset == "toy" and toy.meta.strategy == "masked" and toy.masked_fine_tuned
    assert toy["dataset"] == "toy" and toy.get("builtin") is False and toy.row()["path"] == toy.path
    assert (mine.meta.base_model, mine.meta.strategy, mine.masked_fine_tuned) == ("bert", "elsewhere", True)
    assert mine.row()["registered"] is True and mine.get("dataset") is None
    assert (llm.meta.base_model, llm.label, llm.converted, llm.meta.replacement_token) == \
        ("SmolLM2-135M", "zero-shot", False, "<unk>")
    assert llm.row()["strategy"] == "prompted" and llm["converted"] is False


def test_the_sidebar_and_pages_read_the_typed_catalogue_and_metadata():
    """The sidebar builds no entry of its own (app/shared.py only hands over engine.models.catalogue), and the pages
    read a classifier's typed metadata (`classifier.meta`), never the dict (`classifier.metadata`)."""
    shared = (ROOT / "app" / "shared.py").read_text(encoding="utf-8")
    assert "model_catalogue()" in shared and "registered_models" not in shared and "builtin_prompted" not in shared
    main = (ROOT / "app" / "main.py").read_text(encoding="utf-8")
    assert not re.search(r"\b(m|meta|entry|checkpoints\[i\])(\[|\.get\()", main), "the sidebar reads the typed entries"
    offenders = [f"{page.name}:{n}" for page in sorted((ROOT / "pages").glob("*.py"))
                 for n, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1) if ".metadata" in line]
    assert not offenders, offenders


#: Asking "is this a prompted LM?" any other way than `.kind`: isinstance, an attribute's presence, a file on disk,
#: the strategy or source recorded in a dict.
OTHER_WAYS = re.compile(r"isinstance\([^)]*PromptedClassifier|getattr\([^)]*[\"']spec[\"']|strategy[\"']\]? ?== ?[\"']prompted|"
                        r"[\"']source[\"']\) ?== ?[\"']lora")
#: Every place asks `classifier.kind` (or `model_kind` / `CheckpointMeta.kind` before loading); none may ask another way.
NOT_YET: set[str] = set()


def test_prompted_is_asked_one_way():
    found = {str(path.relative_to(ROOT)) for folder in ("engine", "app", "pages") for path in (ROOT / folder).rglob("*.py")
             if OTHER_WAYS.search(path.read_text(encoding="utf-8"))}
    assert found <= NOT_YET, sorted(found - NOT_YET)

