"""Every measure has a name in words for readers (pages, charts, exports), apart from its id and its formula:
the dashboard showed raw pseudo-LaTeX such as "||g_t E^T||_2" as a measure's title."""
from __future__ import annotations

import re

import engine.importance  # noqa: F401  (registers every measure)
from engine.importance.registry import MEASURES, measure_formula, measure_label

FORMULA_SIGNS = re.compile(r"\|\||[_^{}\\]|sum_")


def test_every_registered_measure_has_a_label_in_words():
    for name, cls in MEASURES.items():
        if getattr(cls, "file_bound", False):
            continue
        label = measure_label(name)
        assert label and label != name, f"{name} has no label"  # the id is what commands take, not a name
        assert not FORMULA_SIGNS.search(label), f"{name}'s label {label!r} is a formula, not words"


def test_labels_are_distinct_so_a_chart_legend_names_one_measure_each():
    labels = [measure_label(n) for n, c in MEASURES.items() if not getattr(c, "file_bound", False)]
    assert len(labels) == len(set(labels))


def test_the_formula_is_the_docstring_line_without_the_id_and_unknown_names_fall_back_to_themselves():
    assert measure_formula("grad-l2").startswith("||g_t E^T||_2")
    assert measure_label("grad-l2") == "gradient (L2 norm)"
    assert measure_label("my-file-scores") == "my-file-scores" and measure_formula("my-file-scores") == ""
