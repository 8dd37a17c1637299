"""The one place where a dataset's labels meet a model's classes.

A dataset numbers its classes in its own order (a registered file: alphabetical, or by number for whole
numbers; a packaged dataset: its fixed list); a model numbers them in the order of its head (`id2label`).
The two orders need not agree: an NLI classifier says {0: contradiction, 1: neutral, 2: entailment} while
a file with those words sorts them alphabetically. So labels are matched by *name*:

1. the same name;
2. the same name up to case, surrounding spaces, whole-number spelling ('1' = '1.0') and transformers'
   default names ('LABEL_1' = '1');
3. whole-number labels of a dataset (every class a whole number, e.g. 0/1/2 in a file) by *index* into a
   model whose classes carry words (no name of it reads as a number): label k is the model's class k.

Anything else is a real mismatch and is refused, naming both lists. `align_to_classes` returns the dataset
relabelled in the model's order (its `classes` are the model's), so every metric, target and calibration
computed after it compares like with like.
"""
from __future__ import annotations

import dataclasses
import re
from collections import Counter
from collections.abc import Mapping, Sequence

from engine.data.types import Dataset
from engine.errors import DataLabelMismatchError, LabelMismatchError

_WHOLE = re.compile(r"-?\d+")


def label_key(label) -> str:
    """Case, surrounding space, whole-number spelling ('1', '1.0') and transformers' default names
    ('LABEL_1') do not distinguish labels."""
    text = str(label).strip().lower()
    if m := re.fullmatch(r"label_(-?\d+)", text):
        return m.group(1)
    try:
        number = float(text)
    except ValueError:
        return text
    return str(int(number)) if number.is_integer() else text


def _class_list(classes: Sequence[str] | Mapping[int, str]) -> list[str]:
    if isinstance(classes, Mapping):
        classes = [classes[k] for k in sorted(classes, key=int)]
    return [str(c) for c in classes]


def check_labels(dataset: Dataset, classes: Sequence[str] | Mapping[int, str], model: str | None = None) -> tuple[int, ...]:
    """For each of the dataset's classes, the index of the same class among a model's `classes` (its labels
    in id order, or its `id2label`), by the rules of the module docstring. A class of the dataset that no
    row carries needs no match (its entry is -1).

    Raises DataLabelMismatchError for a registered file (naming the file, the column and the first row of
    each unknown label), else LabelMismatchError; both name the data's labels the model lacks (with their
    row counts), the dataset's classes and the model's."""
    classes = _class_list(classes)
    used = Counter(e.label for split in dataset.splits.values() for e in split)
    exact = {c: i for i, c in enumerate(classes)}
    loose: dict[str, int] = {}
    for i, c in enumerate(classes):
        loose.setdefault(label_key(c), i)
    # Rule 3: whole numbers index a model whose classes are words (a model named by numbers matches by name).
    by_index = (all(_WHOLE.fullmatch(label_key(n)) for n in dataset.classes)
                and not any(_WHOLE.fullmatch(k) for k in loose))
    mapping, missing = [], []
    for k, name in enumerate(dataset.classes):
        index = exact.get(name, loose.get(label_key(name)))
        if index is None and by_index and 0 <= int(label_key(name)) < len(classes):
            index = int(label_key(name))
        if index is None:
            if used.get(k):
                missing.append((k, name))
            index = -1
        mapping.append(index)
    # two labels the rows carry that land on one class of the model ('Pos' and 'pos' against 'pos') are refused
    taken = Counter(i for k, i in enumerate(mapping) if i >= 0 and used.get(k))
    clash = sorted(i for i, n in taken.items() if n > 1)
    if missing or clash:
        extra = dataset.extra or {}
        where = ""
        if missing and extra.get("user"):
            first = extra.get("class_first_row", {})
            where = (f" in column {extra['columns']['label']!r} of {extra['path']} (first at "
                     + ", ".join(f"{extra.get('row_unit', 'row')} {first.get(n, '?')} for {n!r}" for _k, n in missing) + ")")
        if missing:
            listed = ", ".join(f"{n!r} ({used[k]:,} rows)" for k, n in missing)
            problem = f"has label(s) {listed}{where} that the model does not know"
        else:
            names = ", ".join(repr(n) for n, i in zip(dataset.classes, mapping) if i in clash)
            problem = f"has labels {names} that all match the model's class {classes[clash[0]]!r}"
        error = DataLabelMismatchError if extra.get("user") else LabelMismatchError
        raise error(f"dataset {dataset.name!r} {problem}: the dataset's classes are {list(dataset.classes)}, model "
                    f"{model or ''}{' ' if model else ''}has classes {classes} (labels match by name; whole-number "
                    "labels by index into a model whose classes are words)")
    return tuple(mapping)


def align_to_classes(dataset: Dataset, classes: Sequence[str] | Mapping[int, str], model: str | None = None) -> Dataset:
    """The dataset relabelled in the model's class order: `classes` become the model's, every example's
    label the index of its class among them (`check_labels`). The same object when nothing changes;
    otherwise a new `Dataset` (the cached one is never modified) whose `extra['label_mapping']` records
    {dataset class: model class} and `extra['dataset_classes']` the dataset's own order."""
    classes = _class_list(classes)
    mapping = check_labels(dataset, classes, model)
    if tuple(classes) == tuple(dataset.classes):
        return dataset
    splits = {name: [dataclasses.replace(e, label=mapping[e.label]) for e in examples]
              for name, examples in dataset.splits.items()}
    extra = dict(dataset.extra or {})
    extra["label_mapping"] = {name: classes[i] for name, i in zip(dataset.classes, mapping) if i >= 0}
    extra["dataset_classes"] = list(dataset.classes)
    return dataclasses.replace(dataset, classes=tuple(classes), splits=splits, extra=extra)
