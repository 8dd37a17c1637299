"""MaSF cross-fitted over K folds (fit version 4): exact against the naive look-up, valid under the
null, less dependent on how the calibration inputs are divided than one split, with the calibration's own
uncertainty reported beside each p-value, and stored fits keyed by their folds."""
from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from engine.models import save_classifier
from engine.ood import (
    DEFAULT_FOLDS,
    MASF_FIT_VERSION,
    CrossFitMaSF,
    MaSF,
    false_alarm_interval,
    load_masf,
    load_or_fit_masf,
    naive_pvalues,
    pvalue_verdict,
)

pytestmark = pytest.mark.device  # depends on the torch device: a lent GPU runs it (-m device, docs/gpu.md)


def _features(rng, n, shift=0.0):
    """[n, 3, 24] features with point masses (max(c, normal)), like max-pooled hidden states' ties."""
    floor = np.random.default_rng(123).normal(size=(1, 3, 24))
    return np.maximum(floor, rng.normal(size=(n, 3, 24)) + shift)


def test_one_fold_is_exactly_one_split():
    rng = np.random.default_rng(0)
    cal, x = _features(rng, 300), _features(rng, 200)
    assert np.array_equal(CrossFitMaSF(folds=1, seed=3).fit(cal).pvalues(x), MaSF(seed=3).fit(cal).pvalues(x))


def test_pooled_pvalues_equal_the_naive_count_and_survive_storage():
    """p = (1 + sum over folds of #{F_k >= F_k(x)}) / (N + 1), with N every calibration input; a stored state reads back
    to the same p-values, and a state without folds (fit version 3 and before) reads as one split."""
    rng = np.random.default_rng(1)
    cal, x = _features(rng, 400), _features(rng, 150, shift=0.3)
    masf = CrossFitMaSF(folds=5, seed=0).fit(cal)
    assert masf.n_level3 == 400 and [n3 for _, _, n3 in masf.parts()] == [80] * 5
    p = masf.pvalues(x)
    assert np.array_equal(p, naive_pvalues(masf, x))
    assert np.array_equal(CrossFitMaSF.from_state(masf.state()).pvalues(x), p)
    single = MaSF(seed=0).fit(cal)
    old = CrossFitMaSF.from_state({k: v for k, v in single.state().items()})
    assert old.folds == 1 and np.array_equal(old.pvalues(x), single.pvalues(x))


def test_pooled_and_fold_pvalues_are_valid_under_the_null():
    """Fresh inputs drawn like the calibration inputs: at most about alpha below alpha, pooled and per fold."""
    rng = np.random.default_rng(2)
    masf = CrossFitMaSF(folds=5, seed=0).fit(_features(rng, 900))
    p, low, high = masf.pvalue_ranges(_features(rng, 3000))
    for alpha in (0.05, 0.1, 0.2):
        assert np.mean(p <= alpha) <= alpha + 0.015, alpha
    assert np.all(low <= high) and np.all(p <= high + 1e-12), "pooled counts never exceed the most lenient fold's"


def test_the_false_alarm_rate_varies_less_with_the_division_than_one_split():
    """Six divisions of the same calibration inputs: the share of fresh null inputs below 0.05 scatters less across
    cross-fits (every input ranks the final statistic) than across single splits (a third of them does)."""
    rng = np.random.default_rng(4)
    cal, x = _features(rng, 900), _features(rng, 3000)
    single = [np.mean(MaSF(seed=s).fit(cal).pvalues(x) < 0.05) for s in range(6)]
    crossed = [np.mean(CrossFitMaSF(folds=5, seed=s).fit(cal).pvalues(x) < 0.05) for s in range(6)]
    assert np.std(crossed) < 0.6 * np.std(single), (single, crossed)


def test_out_of_distribution_inputs_still_get_small_pvalues():
    rng = np.random.default_rng(5)
    masf = CrossFitMaSF(folds=5, seed=0).fit(_features(rng, 600))
    assert np.mean(masf.pvalues(_features(rng, 300, shift=2.0)) < 0.05) > 0.9


def test_each_verdict_carries_the_calibration_uncertainty():
    """The verdict says which side of alpha the p-value is on and whether every fold's p-value agrees."""
    assert "every fold agrees" in pvalue_verdict(0.01, 0.004, 0.03) and "unlike" in pvalue_verdict(0.01, 0.004, 0.03)
    assert "folds disagree" in pvalue_verdict(0.04, 0.01, 0.09)
    assert "like the calibration" in pvalue_verdict(0.4, 0.3, 0.5)
    low, high = false_alarm_interval(852)
    assert 0.03 < low < 0.05 < high < 0.07
    assert false_alarm_interval(284)[1] - false_alarm_interval(284)[0] > high - low, "fewer ranked inputs: wider"


def test_the_masf_command_prints_the_calibration_uncertainty_beside_its_verdicts(toy_classifier, models_cache, capsys):
    """`masf` prints the false-alarm interval in the calibration line and, per check, the share of verdicts the folds
    disagree on."""
    from engine.cli import main

    save_classifier(toy_classifier, "toy-crossfit-cli")
    assert main(["masf", "--model", "toy-crossfit-cli"]) == 0
    out = capsys.readouterr().out
    assert "5-fold cross-fit" in out and "(95%) given this calibration" in out
    assert out.count("the folds disagree on") == 2


def test_the_tool_fits_a_cross_fit_keyed_by_its_folds_and_refits_older_fits(toy_classifier, models_cache):
    """fit_masf stores a K-fold cross-fit whose key and provenance say so, with the false-alarm interval in the
    calibration's words; a single-split fit of fit version 3 stored beside it is never returned; a file holding
    another number of folds than its key is refused."""
    save_classifier(toy_classifier, "toy-crossfit")
    folder = models_cache / "toy-crossfit"
    masf = load_or_fit_masf(toy_classifier)
    prov = masf.provenance
    assert masf.folds == DEFAULT_FOLDS and prov["key"]["folds"] == DEFAULT_FOLDS and prov["key"]["fit_version"] == 4
    assert f"{DEFAULT_FOLDS}-fold cross-fit" in prov["calibration"] and "(95%) given this calibration" in prov["calibration"]
    assert prov["n_level3"] == prov["n_inputs"] and prov["false_alarm_interval"]["low"] < prov["false_alarm_interval"]["high"]
    assert MASF_FIT_VERSION == 4 and load_masf(toy_classifier).provenance == prov
    # the same key's file holding a single split (what fit version 3 stored): refused, never read as 5 folds
    from safetensors.torch import save_file

    weights = folder / f"masf-{prov['digest']}.safetensors"
    single = MaSF().fit(np.random.default_rng(0).normal(size=(60, *masf.shape)))
    save_file({k: v.contiguous() for k, v in single.state().items()}, str(weights))
    with pytest.raises(ValueError, match=r"holds 1 fold\(s\), its key says 5"):
        load_masf(toy_classifier)
    # a version-3 key (no folds) is another calibration: its digest differs, a look-up never finds it
    meta = json.loads((folder / f"masf-{prov['digest']}.json").read_text())
    old_key = {k: v for k, v in meta["key"].items() if k != "folds"} | {"fit_version": 3}
    from engine.ood import CalibrationKey

    assert CalibrationKey.from_dict(old_key).folds == 1 and CalibrationKey.from_dict(old_key).digest != prov["digest"]


def test_a_fit_on_too_few_inputs_for_its_folds_is_refused():
    with pytest.raises(ValueError, match="folds need at least"):
        CrossFitMaSF(folds=20).fit(np.random.default_rng(0).normal(size=(35, 2, 4)))
    assert torch.is_tensor(CrossFitMaSF(folds=5).fit(np.random.default_rng(0).normal(size=(35, 2, 4))).fits[0].level3)
