"""A dataset's labels meet a model's classes by name, not by position.

The model is the packaged `tiny` BERT saved with a 3-label NLI head in the usual order {0: contradiction,
1: neutral, 2: entailment}; the data is a CSV with string labels, which registration orders alphabetically
(contradiction, entailment, neutral). The head is set to always answer 'neutral', so any metric computed
with labels matched by position (dataset index 1 = 'entailment' read as the model's 'neutral') comes out
different from the one matched by name.
"""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch

from engine.data import get_dataset
from engine.data.labels import align_to_classes, check_labels
from engine.errors import LabelMismatchError
from engine.models import load_classifier

pytestmark = pytest.mark.device  # depends on the torch device: a lent GPU runs it (-m device, docs/gpu.md)

NLI = ("contradiction", "neutral", "entailment")  # the model's id order
WORDS = ("a", "man", "dog", "runs", "sleeps", "park", "red", "car", "is", "outside")
# unequal class sizes: a constant prediction scores differently under every labelling of the classes
COUNTS = {"contradiction": 180, "neutral": 120, "entailment": 60}  # MaSF calibrates on >= 30 validation rows


@pytest.fixture(autouse=True)
def _dirs(tmp_path, monkeypatch):
    monkeypatch.setenv("ENGINE_MODELS_CACHE", str(tmp_path / "models_cache"))
    monkeypatch.setenv("ENGINE_USER_DIR", str(tmp_path / "user"))
    monkeypatch.setenv("ENGINE_RESULTS_DIR", str(tmp_path / "results"))


def nli_folder(folder, answer: str = "neutral"):
    """`tiny` with a fresh 3-label head {0: contradiction, 1: neutral, 2: entailment} that always answers
    `answer` (zero weights, one large bias), saved with save_pretrained beside its tokenizer."""
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    from engine.models import resolve_encoder

    source = resolve_encoder("tiny")
    model = AutoModelForSequenceClassification.from_pretrained(
        source, use_safetensors=True, num_labels=3, id2label=dict(enumerate(NLI)), label2id={c: i for i, c in enumerate(NLI)})
    with torch.no_grad():
        model.classifier.weight.zero_()
        model.classifier.bias.copy_(torch.tensor([10.0 if c == answer else 0.0 for c in NLI]))
    model.save_pretrained(str(folder))
    AutoTokenizer.from_pretrained(source).save_pretrained(str(folder))
    return folder


def nli_data(folder, name: str = "nli", labels=None):
    """A CSV of premise/hypothesis pairs with string labels (COUNTS of each), registered as `name`."""
    from engine.data.user import register_dataset

    rng = np.random.default_rng(0)
    rows = [(lab, i) for lab, n in COUNTS.items() for i in range(n)]
    frame = pd.DataFrame({
        "premise": [" ".join(rng.choice(WORDS, 6)) + f" {k}" for k, _ in enumerate(rows)],
        "hypothesis": [" ".join(rng.choice(WORDS, 4)) for _ in rows],
        "label": [(labels or {}).get(lab, lab) for lab, _ in rows],
    })
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "nli.csv"
    frame.to_csv(path, index=False)
    register_dataset(name, path, "premise", "label", pair_column="hypothesis")
    return get_dataset(name)


def test_string_labels_map_to_the_models_classes_by_name(tmp_path):
    """Alignment gives every example the model's index of its own label's name; the dataset's alphabetical
    order is not the model's, so matching by position would relabel 'entailment' as 'neutral'."""
    data = nli_data(tmp_path / "data")
    assert data.classes == ("contradiction", "entailment", "neutral")
    aligned = align_to_classes(data, NLI)
    assert aligned.classes == NLI and aligned is not data and data.classes[1] == "entailment"  # the cache is untouched
    for split in ("train", "validation", "test"):
        for before, after in zip(data.split(split), aligned.split(split)):
            assert NLI[after.label] == data.classes[before.label] and after.uid == before.uid
    assert aligned.extra["label_mapping"] == {"contradiction": "contradiction", "entailment": "entailment", "neutral": "neutral"}
    assert align_to_classes(aligned, NLI) is aligned  # already in the model's order: nothing copied


def test_whole_number_labels_index_the_models_classes_and_a_real_mismatch_names_both_lists(tmp_path):
    """Labels 0/1/2 in a file are the model's class ids; names the model lacks are refused with the data's and
    the model's class lists in the message."""
    ints = nli_data(tmp_path / "ints", "ints", labels={"contradiction": 0, "neutral": 1, "entailment": 2})
    assert ints.classes == ("0", "1", "2") and check_labels(ints, NLI) == (0, 1, 2)
    # a model named by numbers matches by name, not by index
    assert check_labels(ints, ("2", "1", "0")) == (2, 1, 0)
    other = nli_data(tmp_path / "other", "other", labels={"neutral": "unrelated"})
    with pytest.raises(LabelMismatchError) as caught:
        check_labels(other, NLI, model="'nli'")
    message = str(caught.value)
    assert "'unrelated' (120 rows)" in message
    assert "['contradiction', 'entailment', 'unrelated']" in message and "['contradiction', 'neutral', 'entailment']" in message
    with pytest.raises(LabelMismatchError, match="out of range|does not know"):
        check_labels(ints, ("yes", "no"))  # label 2 has no class 2


def test_evaluation_of_a_string_labelled_file_scores_labels_by_name(tmp_path):
    """`Classifier.evaluate` on the CSV: the head always answers 'neutral', so accuracy is the share of
    'neutral' rows in the test split (by position it would be the share of 'entailment')."""
    classifier = load_classifier(str(nli_folder(tmp_path / "nli-model")))
    data = nli_data(tmp_path / "data")
    test = data.split("test")
    by_name = np.mean([data.classes[e.label] == "neutral" for e in test])
    by_position = np.mean([e.label == NLI.index("neutral") for e in test])
    assert by_name != by_position  # the test can tell the two apart
    assert classifier.evaluate(data, "test")["accuracy"] == pytest.approx(by_name)


def test_masf_faithfulness_evaluate_and_train_take_an_nli_model_with_string_labels(tmp_path, capsys):
    """The four commands that refused this pair ("dataset has classes [...] but model was trained on [...]")
    run, and a classifier trained from it keeps its own class order and records the mapping."""
    from engine.cli import main

    folder = nli_folder(tmp_path / "nli-model")
    nli_data(tmp_path / "data")
    assert main(["models", "add", str(folder), "--id", "nli"]) == 0
    assert main(["masf", "--model", "nli", "--dataset", "nli"]) == 0
    assert main(["mask", "--model", "nli", "--dataset", "nli", "--measure", "x-grad-abs", "--limit", "4",
                 "--ratios", "0,1"]) == 0
    assert main(["metrics", "--model", "nli", "--dataset", "nli", "--measures", "random", "--metrics", "comprehensiveness",
                 "--limit", "3"]) == 0
    assert main(["train", "--from-classifier", "nli", "--dataset", "nli", "--epochs", "1", "--train-limit", "16",
                 "--eval-limit", "8", "--quiet", "--id", "nli-further"]) == 0
    err = capsys.readouterr().err
    assert "trained on" not in err and "does not know" not in err
    trained = load_classifier("nli-further")
    assert trained.classes == NLI
    assert trained.metadata["dataset_label_mapping"]["entailment"] == "entailment"


def test_two_labels_landing_on_one_class_are_refused():
    """'Pos' and 'pos' as two classes of the data both match the model's 'pos' up to case: refused rather than
    merged, naming both."""
    from engine.data.types import Dataset, Example

    rows = [Example("good", 0, uid="a"), Example("fine", 1, uid="b")]
    data = Dataset("cased", ("Pos", "pos"), "accuracy", {"train": rows, "validation": rows, "test": rows}, 0)
    with pytest.raises(LabelMismatchError, match="'Pos', 'pos' that all match the model's class 'pos'"):
        check_labels(data, ("neg", "pos"))


def test_every_caller_uses_the_dataset_that_check_dataset_returns():
    """`Classifier.check_dataset` returns the dataset relabelled in the model's class order; a caller that drops the
    result goes on with labels matched by position. Every call in the engine and scripts is an assignment or a
    return (one deliberate check-only call is marked `# refuses`)."""
    import re
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    dropped = []
    for path in [*root.glob("engine/**/*.py"), *root.glob("scripts/**/*.py"), *root.glob("bench/*.py"), *root.glob("pages/*.py")]:
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            code = line.split("#")[0]
            if re.search(r"\.check_dataset\(", code) and not re.search(r"(=|return)\s*\S*\.check_dataset\(", code) \
                    and "def check_dataset" not in code and "# refuses" not in line:
                dropped.append(f"{path.relative_to(root)}:{number}: {line.strip()}")
    assert dropped == []
