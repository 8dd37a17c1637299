"""Sanity checks (docs/methods.md#sanity-checks-and-cost): cascading model randomisation and label randomisation."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from engine.sanity import cascading_randomisation, randomisation_stages, rank_similarity, sanity_summary
from engine.sanity.randomisation import reinitialise

pytestmark = pytest.mark.device  # depends on the torch device: a lent GPU runs it (-m device, docs/gpu.md)

TEXTS = ["a great and moving film , truly wonderful", "dull , flat and far too long to bear",
         "the best thing i have seen this year", "an awful , boring mess of a movie", "funny and sweet",
         "it never works and nobody cares", "a lovely surprise from start to end", "bad , bad , bad"]


def test_stages_cascade_from_the_head_down_to_the_embeddings(toy_classifier):
    """tiny (BERT, 2 layers): head (classifier + pooler), layer 1, layer 0, embeddings, in that order."""
    stages = randomisation_stages(toy_classifier.model)
    assert [name for name, _ in stages] == ["head", "layer 1", "layer 0", "embeddings"]
    head = stages[0][1]
    assert toy_classifier.model.classifier in head and toy_classifier.model.bert.pooler in head


def test_reinitialise_changes_only_the_stage_and_is_seeded(toy_classifier):
    import copy

    model = copy.deepcopy(toy_classifier.model)
    stages = randomisation_stages(model)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    reinitialise(stages[0][1], 0.02, torch.Generator().manual_seed(0))
    after = model.state_dict()
    changed = {k for k in before if not torch.equal(before[k], after[k])}
    assert changed and all(k.startswith(("classifier", "bert.pooler")) for k in changed)
    twin = copy.deepcopy(toy_classifier.model)
    reinitialise(randomisation_stages(twin)[0][1], 0.02, torch.Generator().manual_seed(0))
    assert torch.equal(twin.classifier.weight, model.classifier.weight)


def test_rank_similarity_is_spearman_over_maskable_tokens():
    a = torch.tensor([[9.0, 1, 2, 3, 4]])
    b = torch.tensor([[-9.0, 4, 3, 2, 1]])
    maskable = torch.tensor([[False, True, True, True, True]])
    rho, rho_abs = rank_similarity(a, b, maskable)
    assert rho[0] == pytest.approx(-1.0) and rho_abs[0] == pytest.approx(-1.0)
    rho, _ = rank_similarity(a, a, maskable)
    assert rho[0] == pytest.approx(1.0)


def test_cascading_randomisation_separates_a_model_dependent_measure_from_random(toy_classifier):
    """The trained stage correlates 1 with itself; `random` (a function of the input only) stays at 1 through
    every stage and fails; a gradient measure decorrelates once every weight is random; the classifier used is
    left untouched."""
    batch = toy_classifier.batch(TEXTS)
    weights = toy_classifier.model.classifier.weight.clone()
    rows = cascading_randomisation(toy_classifier, ["random", "grad-l2", "x-grad-sign"], batch, seed=0)
    assert torch.equal(weights, toy_classifier.model.classifier.weight)
    summary = sanity_summary(rows)
    trained = summary[summary.stage_index == 0]
    assert np.allclose(trained["spearman"], 1.0)
    last = summary[summary.stage_index == summary.stage_index.max()].set_index("measure")
    assert last.loc["random", "spearman"] == pytest.approx(1.0) and not last.loc["random", "passes"]
    assert last.loc["x-grad-sign", "spearman"] < 0.9
    assert {"ci_low", "ci_high", "ci_method"} <= set(last.columns)
    assert list(summary[summary.measure == "grad-l2"].stage) == ["trained", "head", "layer 1", "layer 0", "embeddings"]


def test_label_permutation_keeps_the_class_balance_and_breaks_the_link():
    from engine.data import Example
    from engine.models.training import permute_labels

    train = [Example(primary=f"t{i}", label=i % 2, uid=str(i)) for i in range(200)]
    val = [Example(primary=f"v{i}", label=i % 2, uid=f"v{i}") for i in range(50)]
    t2, v2 = permute_labels(train, val, seed=0)
    assert sorted(e.label for e in t2) == sorted(e.label for e in train)
    assert [e.primary for e in t2] == [e.primary for e in train]
    assert 0.3 < np.mean([a.label == b.label for a, b in zip(train, t2)]) < 0.7
    assert [e.label for e in permute_labels(train, val, seed=0)[0]] == [e.label for e in t2]


def test_label_randomisation_trains_on_permuted_labels_and_compares_scores(toy_classifier, models_cache):
    """The twin trained on permuted toy labels scores near chance on the real test labels, is saved beside the
    original, and each measure gets one Spearman per input."""
    from engine.models import save_classifier
    from engine.sanity import label_randomisation, train_label_randomised

    save_classifier(toy_classifier, toy_classifier.id, overwrite=True)
    twin = train_label_randomised(toy_classifier, permutation_seed=1, epochs=1)
    assert twin.id.endswith("labels-permuted-p1") and (models_cache / twin.id / "model.safetensors").is_file()
    assert twin.metadata["config"]["extra"]["label_permutation_seed"] == 1
    assert twin.metadata["test"]["unmasked"] < toy_classifier.metadata["test"]["unmasked"]
    # its metadata.json, read back through the one reader, names it and the model it was randomised from
    from engine.models.metadata import SCHEMA_VERSION, read_metadata

    saved = read_metadata(models_cache / twin.id)
    assert saved.id == twin.id and saved.extra["label_randomised_from"] == toy_classifier.id
    assert saved.schema_version == SCHEMA_VERSION and saved.dataset == toy_classifier.meta.dataset
    batch = toy_classifier.batch(TEXTS)
    rows = label_randomisation(toy_classifier, twin, ["random", "x-grad-sign"], batch)
    assert len(rows) == 2 * len(TEXTS)
    means = rows.groupby("measure")["spearman"].mean()
    assert means["random"] == pytest.approx(1.0) and means["x-grad-sign"] < 0.9


def test_sanity_sweep_in_a_pool_equals_one_process_and_trains_each_twin_once(tmp_path, monkeypatch):
    """`python -m engine sanity --workers 2`: both checks of two measures computed by two spawned workers (one
    thread each) give the same Spearman rows, bit for bit, as one process; the label-randomised twin both label
    cells need is saved once, under its one id; a second call writes nothing."""
    import argparse

    import pandas as pd

    from engine.cli import sanity as cli
    from engine.faithfulness.evaluation import evaluation_store
    from engine.models import TrainConfig, save_classifier, train_classifier

    monkeypatch.setenv("ENGINE_THREADS", "1")
    monkeypatch.setenv("ENGINE_USER_DIR", str(tmp_path / "user"))
    quick = TrainConfig(base_model="tiny", dataset="toy", strategy="masked", epochs=1, lr=3e-4, batch_size=16,
                        train_limit=48, eval_limit=16)
    model = train_classifier(quick, show_progress_bar=False)
    parser = argparse.ArgumentParser()
    cli.configure(parser)
    loaded = {}
    for name, workers in (("one", "1"), ("pool", "2")):
        cache = tmp_path / f"cache-{name}"
        monkeypatch.setenv("ENGINE_MODELS_CACHE", str(cache))
        monkeypatch.setenv("ENGINE_RESULTS_DIR", str(tmp_path / name))
        save_classifier(model, "quick-toy")
        args = parser.parse_args(["--model", "quick-toy", "--dataset", "toy", "--measures", "random", "grad-l2",
                                  "--limit", "8", "--workers", workers, "--run", "s"])
        args.command_line = "python -m engine sanity ..."
        assert cli.run(args) == 0
        loaded[name] = evaluation_store().load("s")
        twins = [p.name for p in cache.iterdir() if "labels-permuted" in p.name]
        assert twins == ["quick-toy-labels-permuted-p0"]
    columns = ["method", "measure", "step", "value", "spearman_abs"]
    a, b = (loaded[n][columns].sort_values(columns[:3]).reset_index(drop=True) for n in ("one", "pool"))
    assert len(a) > 0 and set(a["method"]) == {"sanity: cascading model randomisation", "sanity: label randomisation"}
    pd.testing.assert_frame_equal(a, b)
    args = parser.parse_args(["--model", "quick-toy", "--dataset", "toy", "--measures", "random", "grad-l2",
                              "--limit", "8", "--workers", "2", "--run", "s"])
    args.command_line = "python -m engine sanity ..."
    before = sorted(p.stat().st_mtime_ns for p in (tmp_path / "pool" / "evaluation" / "s" / "cells").iterdir())
    assert cli.run(args) == 0
    assert sorted(p.stat().st_mtime_ns for p in (tmp_path / "pool" / "evaluation" / "s" / "cells").iterdir()) == before
