"""The false-alarm estimate of MaSF on fresh checkpoints (engine.results.masf_calibration): its interval contains
every source of variance (training seed, masking draw, calibration division, and the test inputs every checkpoint
shares), and the claim printed beside it is the one the interval supports. Synthetic runs only: no model."""
from __future__ import annotations

import json
from itertools import product

import numpy as np
import pytest

from engine.results.masf_calibration import (
    cell_seeds,
    claim,
    false_alarm_interval,
    flags,
    hierarchical_bootstrap,
    report_table,
    run_folder,
    variance_components,
)

N_TEST = 400


def _records(counts: np.ndarray, shared: np.ndarray | None = None, seed: int = 0) -> list[dict]:
    """Records of a synthetic run: counts [S, M, D] false alarms per cell among N_TEST test inputs; each cell flags
    a random subset of that size, or, with `shared` (a ranking of the test inputs), the first ones of that ranking
    (the same texts in every cell, as when some texts are unlike the calibration inputs whatever the model)."""
    rng = np.random.default_rng(seed)
    s_n, m_n, d_n = counts.shape
    records = []
    for s in range(s_n):
        cells = []
        for m, d in product(range(m_n), range(d_n)):
            k = int(counts[s, m, d])
            chosen = shared[:k] if shared is not None else rng.choice(N_TEST, k, replace=False)
            cells.append({"draw": m, "division": d, "n_all_masked": 0,
                          "after": {"share": k / N_TEST, "flagged": sorted(int(i) for i in chosen), "share_all_masked": None,
                                    "folds_disagree": 0.0, "n_level3": 100},
                          "before": {"share": k / N_TEST, "share_all_masked": None, "n_level3": 33}})
        records.append({"model": f"m-s{s}", "training_seed": s, "n_test": N_TEST, "n_calibration": 100, "alpha": 0.05,
                        "folds": 5, "draws": m_n, "divisions": d_n, "cells": cells,
                        "provenance": {"code_version": "0.1.0+abc", "checkpoint_code_version": "0.1.0+abc"}})
    return records


def _width(records, **kw) -> float:
    low, high = false_alarm_interval(records, n_resamples=0, **kw)["interval"]
    return high - low


def test_cell_seeds_are_never_shared_between_checkpoints_draws_or_divisions():
    """Every (training seed, draw) masks the calibration and test inputs with its own seeds, and every (training
    seed, draw, division) divides them with its own: a run that masked every checkpoint's test inputs with one fixed
    seed (or divided them with one) would share that draw, and the spread over checkpoints would leave it out."""
    keys = list(product(range(30), range(6), range(6)))
    seeds = [cell_seeds(*k) for k in keys]
    assert len({s["fold_seed"] for s in seeds}) == len(keys)
    masks = {(t, m): cell_seeds(t, m, 0) for t, m, _ in keys}
    for t, m, d in keys:  # the masking belongs to the draw: the same for each division of it
        assert {k: v for k, v in cell_seeds(t, m, d).items() if k != "fold_seed"} == \
            {k: v for k, v in masks[(t, m)].items() if k != "fold_seed"}
    all_masks = [s["calibration_mask_seed"] for s in masks.values()] + [s["test_mask_seed"] for s in masks.values()]
    assert len(set(all_masks)) == len(all_masks)


@pytest.mark.parametrize("source", ["seed", "draw", "division"])
def test_the_interval_widens_with_each_source_even_away_from_the_first_draw_and_division(source):
    """Spread added to one source only (checkpoints, or the draws other than draw 0, or the divisions other than
    division 0) widens the interval: every cell enters it, not one fixed draw and division per checkpoint (the old
    construction, a t-interval over the checkpoints' draw-0, division-0 shares, stays as narrow)."""
    rng = np.random.default_rng(1)
    base = np.full((5, 3, 3), 20.0)
    noise = np.zeros_like(base)
    if source == "seed":
        noise += rng.normal(0, 4, (5, 1, 1))
    elif source == "draw":
        noise[:, 1:, :] += rng.normal(0, 6, (5, 2, 1))
    else:
        noise[:, :, 1:] += rng.normal(0, 6, (5, 3, 2))
    counts = np.clip(np.round(base + noise), 0, N_TEST)
    flat, spread = _records(base), _records(counts)
    assert _width(spread) > 2 * _width(flat)
    if source != "seed":  # what the old construction reads does not move
        assert np.array_equal(counts[:, 0, 0], base[:, 0, 0])
    comp = false_alarm_interval(spread, n_resamples=0)["components"]
    assert comp[source] == max(comp["seed"], comp["draw"], comp["division"]) > 0


def test_texts_flagged_by_every_checkpoint_widen_the_interval():
    """When the same test texts are flagged in every cell (a text effect shared by all checkpoints, which no spread
    over checkpoints shows), the interval is wider than when each cell flags its own: the shared test inputs' term."""
    counts = np.full((4, 2, 2), 20)
    ranking = np.random.default_rng(2).permutation(N_TEST)
    own, shared = false_alarm_interval(_records(counts), n_resamples=0), false_alarm_interval(_records(counts, ranking), n_resamples=0)
    assert own["components"]["test_inputs"] == pytest.approx(0, abs=1e-6)
    p = 20 / N_TEST
    assert shared["components"]["test_inputs"] == pytest.approx(p * (1 - p) / N_TEST, rel=0.01)
    assert _width(_records(counts, ranking)) > _width(_records(counts)) + 0.01


def test_variance_components_recover_known_components():
    """The nested decomposition returns, on a large balanced Gaussian grid, the standard deviations it was drawn
    with (seed 0.02, draw 0.01, division 0.005), and the variance of the grand mean its spread over checkpoints."""
    rng = np.random.default_rng(3)
    s, m, d = 400, 4, 4
    y = (rng.normal(0, 0.02, (s, 1, 1)) + rng.normal(0, 0.01, (s, m, 1)) + rng.normal(0, 0.005, (s, m, d)))
    comp = variance_components(y)
    assert np.sqrt(comp["seed"]) == pytest.approx(0.02, rel=0.1)
    assert np.sqrt(comp["draw"]) == pytest.approx(0.01, rel=0.1)
    assert np.sqrt(comp["division"]) == pytest.approx(0.005, rel=0.1)
    assert comp["mean_variance"] == pytest.approx(np.var(y.mean((1, 2)), ddof=1) / s)


def test_the_interval_covers_the_rate_on_simulated_runs():
    """Over simulated runs of 5 checkpoints x 3 draws x 3 divisions with all three sources, the 95% interval covers
    the true rate at least 90% of the time; one draw and one division per checkpoint with a draw and a division
    shared by every checkpoint (what a fixed masking seed and fold seed give) covers it far less often."""
    rng = np.random.default_rng(4)
    hits = old_hits = 0
    runs = 150
    for _ in range(runs):
        seed_fx, draw_fx, div_fx = rng.normal(0, 3, (5, 1, 1)), rng.normal(0, 4, (5, 3, 1)), rng.normal(0, 4, (5, 3, 3))
        counts = np.clip(np.round(20 + seed_fx + draw_fx + div_fx), 0, N_TEST)
        low, high = false_alarm_interval(_records(counts, seed=int(rng.integers(1 << 30))), n_resamples=0)["interval"]
        hits += low <= 20 / N_TEST <= high
        fixed = (20 + seed_fx[:, 0, 0] + rng.normal(0, 4) + rng.normal(0, 4)) / N_TEST  # one draw, one division for all
        half = 2.776 * fixed.std(ddof=1) / np.sqrt(5)
        old_hits += fixed.mean() - half <= 20 / N_TEST <= fixed.mean() + half
    assert hits / runs >= 0.9
    assert old_hits / runs < 0.8


def test_the_hierarchical_bootstrap_resamples_every_level():
    """With the test inputs kept, the replicates do not spread when no source does, and spread when any one source
    alone does (checkpoints, draws within them, divisions within those: all resampled); resampling the test inputs
    spreads them when the same texts are flagged everywhere."""
    rng = np.random.default_rng(5)
    base = np.full((4, 3, 3), 20.0)

    def spread(counts, shared=None, inputs=False):
        f, index = flags(_records(np.clip(counts, 0, N_TEST), shared))
        return np.std(hierarchical_bootstrap(f, index, 300, seed=0, resample_inputs=inputs))

    assert spread(base) < 1e-12
    for shape in ((4, 1, 1), (4, 3, 1), (4, 3, 3)):
        assert spread(base + np.round(rng.normal(0, 6, shape))) > 0.001, shape
    assert spread(base, np.arange(N_TEST), inputs=True) > 0.005


def test_claim_says_at_most_alpha_only_when_the_interval_lies_below_it():
    """"At most alpha" only when the whole interval lies at or below alpha; an interval containing alpha supports
    "about alpha" and says how far from alpha its ends reach; one above alpha says so."""
    assert claim(0.04, 0.035, 0.045, 0.05).startswith("at most alpha")
    about = claim(0.05, 0.042, 0.061, 0.05)
    assert about.startswith("about alpha") and "within 1.1%" in about and "at most alpha\" nor" in about
    assert claim(0.07, 0.06, 0.08, 0.05).startswith("above alpha")


def test_the_table_prints_the_interval_the_components_and_the_claim(tmp_path):
    """The docs table reads a run folder and prints the rate over all cells with its interval, each source's
    component, the claim and what a masking draw shared by every checkpoint would leave out."""
    counts = np.round(20 + np.random.default_rng(6).normal(0, 3, (3, 2, 2)))
    folder = run_folder("synthetic", tmp_path)
    folder.mkdir(parents=True)
    for r in _records(counts):
        (folder / f"{r['model']}.json").write_text(json.dumps(r), encoding="utf-8")
    text = report_table("synthetic")(tmp_path)
    mean = counts.mean() / N_TEST
    assert f"**{mean:.2%} [" in text
    for words in ("claim: ", "training seed", "masking draw", "calibration division", "shared test inputs",
                  "a masking draw shared by every checkpoint", "3 checkpoints x 2 masking draws x 2 calibration divisions"):
        assert words in text
