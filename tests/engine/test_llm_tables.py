"""The LLM tables of docs/llm.md: a deterministic measure's RACU against each seed of the random baseline, and the
self-explanation table with the published findings in a column labelled so."""
from __future__ import annotations

import numpy as np
import pandas as pd

from engine.faithfulness.metrics import racu
from engine.reports.llm_tables import racu_against_random_seeds, selfexplain_table


def _rows(measure: str, seed: int, values) -> list[dict]:
    ratios = np.linspace(0, 1, len(values))
    return [{"model": "m", "dataset": "rt", "split": "test", "base_model": "b", "strategy": "masked",
             "method": "recursive masking", "schedule": "ratio", "n_examples": 4, "grid": "g", "measure": measure,
             "seed": seed, "step": i, "ratio": r, "value": v} for i, (r, v) in enumerate(zip(ratios, values))]


def test_a_measure_computed_once_is_compared_with_the_random_curve_of_every_seed():
    """One seed-0 curve of a measure, three random seeds: three RACUs, each against that seed's random curve."""
    measure = [0.9, 0.5, 0.3, 0.2]
    randoms = {0: [0.9, 0.8, 0.6, 0.2], 1: [0.9, 0.7, 0.5, 0.2], 2: [0.9, 0.85, 0.7, 0.2]}
    rows = _rows("loo-sign", 0, measure)
    for seed, curve in randoms.items():
        rows += _rows("random", seed, curve)
    per = racu_against_random_seeds(pd.DataFrame(rows)).sort_values("seed")
    x = np.linspace(0, 1, 4)
    expected = [racu(x, np.array(measure), np.array(randoms[s])) for s in (0, 1, 2)]
    assert list(per["measure"]) == ["loo-sign"] * 3 and list(per["seed"]) == [0, 1, 2]
    assert np.allclose(per["racu"], expected) and len(set(np.round(expected, 6))) == 3


def test_selfexplain_table_labels_the_published_findings_and_names_each_kinds_model():
    """Built from the shipped store: the paper's column says published, and each kind's row names the model the
    paper found that kind most faithful for; a model without cells reads 'not run'."""
    from engine.runtime import PROJECT_ROOT

    table = selfexplain_table("smollm2-rt-selfexplain", (("zero-shot", "smollm2-rt-prompt"), ("absent", "no-such-model")))
    text = table(PROJECT_ROOT / "results")
    header = text.splitlines()[0]
    assert "(published)" in header
    rows = text.splitlines()[2:]
    cf = [r for r in rows if r.startswith("| counterfactual | zero-shot")]
    assert len(cf) == 1 and "Llama2" in cf[0] and "%" in cf[0]
    assert any("Mistral" in r for r in rows if r.startswith("| attribution"))
    assert any("Falcon" in r for r in rows if r.startswith("| redaction"))
    assert all("not run" in r for r in rows if "| absent |" in r)


