"""Checkpoint metadata is typed (engine.models.metadata.CheckpointMeta), read and written in one place, and old
files (no schema_version, no split_seed, no masked_fine_tuned) still load with the meaning they always had."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from engine.errors import CheckpointError
from engine.models.metadata import (
    MASKED_STRATEGIES,
    SCHEMA_VERSION,
    STRATEGIES,
    CheckpointMeta,
    read_metadata,
    write_metadata,
)

ROOT = Path(__file__).resolve().parents[2]

#: metadata.json as checkpoints were written before the schema was versioned (keys of a real tiny checkpoint,
#: without split_seed and masked_fine_tuned, which the oldest ones lacked)
OLD = {
    "id": "tiny-toy-masked-s0", "base_model": "tiny", "dataset": "toy", "classes": ["negative", "positive"],
    "strategy": "only-masking", "max_length": 64, "seed": 0, "metric": "accuracy", "paired": False,
    "architecture": "bert", "history": [{"epoch": 0, "train_loss": 0.69}], "best_epoch": 0,
    "test": {"n": 40, "unmasked": 0.9, "masked_100": 0.5}, "code_version": "abc123", "created": "2025-01-02T03:04:05Z",
    "config": {"base_model": "tiny", "dataset": "toy", "strategy": "only-masking", "seed": 0},
}


def test_old_metadata_reads_with_defaults_and_round_trips_unchanged(tmp_path):
    """A pre-schema file reads as version 0 with split_seed 0 and masked_fine_tuned from its strategy, and
    to_dict() gives back exactly the JSON object that was read (nothing added, nothing lost)."""
    (tmp_path / "metadata.json").write_text(json.dumps(OLD), encoding="utf-8")
    meta = read_metadata(tmp_path)
    assert meta.schema_version == 0
    assert meta.split_seed == 0 and meta.seed == 0
    assert meta.masked_fine_tuned is True  # only-masking trains on masked inputs
    assert meta.classes == ("negative", "positive") and meta.max_length == 64
    assert meta.extra["history"] == OLD["history"]
    assert meta.to_dict() == OLD
    assert CheckpointMeta.from_dict(meta.to_dict()) == meta


def test_writing_stamps_the_schema_version_and_keeps_every_key(tmp_path):
    """write_metadata adds schema_version (the only change) and reading it back gives the same typed fields."""
    written = write_metadata(tmp_path, OLD)
    assert written == {**OLD, "schema_version": SCHEMA_VERSION}
    assert json.loads((tmp_path / "metadata.json").read_text(encoding="utf-8")) == written
    again = read_metadata(tmp_path)
    assert again.schema_version == SCHEMA_VERSION
    assert again.to_dict() == written


def test_masked_fine_tuned_is_declared_first_then_taken_from_the_strategy():
    """One rule: a declared masked_fine_tuned wins (registration, LoRA); else masked and only-masking are, plain
    and the strategies of models not fine-tuned here are not."""
    for strategy in STRATEGIES:
        assert CheckpointMeta(strategy=strategy).masked_fine_tuned is (strategy in MASKED_STRATEGIES)
    assert MASKED_STRATEGIES == ("masked", "only-masking")
    assert CheckpointMeta(strategy="elsewhere").masked_fine_tuned is False
    assert CheckpointMeta.from_dict({"strategy": "elsewhere", "masked_fine_tuned": True}).masked_fine_tuned is True
    assert CheckpointMeta.from_dict({"strategy": "masked", "masked_fine_tuned": False}).masked_fine_tuned is False


def test_newer_schema_and_wrong_types_are_refused(tmp_path):
    """A file from a newer engine, or with a field of the wrong type, is a CheckpointError naming the file."""
    (tmp_path / "metadata.json").write_text(json.dumps({**OLD, "schema_version": SCHEMA_VERSION + 1}), encoding="utf-8")
    with pytest.raises(CheckpointError, match="schema_version"):
        read_metadata(tmp_path)
    (tmp_path / "metadata.json").write_text(json.dumps({**OLD, "max_length": "long"}), encoding="utf-8")
    with pytest.raises(CheckpointError, match="metadata.json.*wrong type"):
        read_metadata(tmp_path)
    (tmp_path / "metadata.json").write_text(json.dumps({k: v for k, v in OLD.items() if k != "strategy"}), encoding="utf-8")
    with pytest.raises(CheckpointError, match="lacks the fields"):
        read_metadata(tmp_path)


def test_cli_strategy_choices_are_the_one_strategies_tuple():
    """`train --strategy` and `roar --strategy` offer exactly STRATEGIES."""
    import argparse

    from engine.cli import roar, train

    for module in (train, roar):
        parser = argparse.ArgumentParser()
        module.configure(parser)
        action = next(a for a in parser._actions if a.dest == "strategy")
        assert tuple(action.choices) == STRATEGIES, module.__name__


def test_a_saved_checkpoint_rewritten_in_the_old_format_loads_as_before(toy_classifier, models_cache):
    """A real checkpoint whose metadata.json is put back in the pre-schema form (no schema_version,
    masked_fine_tuned or split_seed) loads; the classifier's typed view and its decisions match the new file's."""
    from engine.models import load_classifier, save_classifier

    folder = save_classifier(toy_classifier, "toy-meta")
    new = json.loads((folder / "metadata.json").read_text(encoding="utf-8"))
    assert new["schema_version"] == SCHEMA_VERSION
    old = {k: v for k, v in new.items() if k not in ("schema_version", "masked_fine_tuned", "split_seed")}
    (folder / "metadata.json").write_text(json.dumps(old), encoding="utf-8")

    loaded = load_classifier("toy-meta")
    assert loaded.metadata == old  # the dict readers see what the file holds
    assert loaded.meta.schema_version == 0
    assert loaded.masked_fine_tuned is True and loaded.meta.split_seed == 0
    assert loaded.meta.dataset == "toy" and loaded.meta.base_model == "tiny"
    assert loaded.meta.provenance["strategy"] == "masked"
    assert loaded.classes == toy_classifier.classes
    assert loaded.mask_token_id == toy_classifier.mask_token_id


def test_every_shipped_results_store_loads():
    """Each results store shipped under results/ (recursive masking, ROAR, evaluation, simulability) loads its
    rows and provenance."""
    from engine.results.store import ResultsStore

    stores = sorted({p.parent.parent for p in (ROOT / "results").rglob("cells") if p.is_dir()})
    assert len(stores) >= 3, stores
    n_runs = 0
    for root in stores:
        store = ResultsStore(root)
        for run in store.runs():
            rows = store.load(run)
            assert len(rows) > 0, (root, run)
            assert all(isinstance(p, dict) for p in store.provenance(run))
            n_runs += 1
    assert n_runs >= 10
