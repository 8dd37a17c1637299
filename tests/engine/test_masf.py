"""MaSF: exact against the naive implementation, calibrated under the null, sensitive off it, stored safely."""
from __future__ import annotations

import numpy as np
import pytest
import torch
from scipy.stats import kstest

from engine.models import mask_all_primary, save_classifier
from engine.ood import MaSF, fit_masf, hidden_state_features, load_masf, masf_pvalues, naive_pvalues
from engine.ood.masf import SortedRows, conformal_two_sided, simes

pytestmark = pytest.mark.device  # depends on the torch device: a lent GPU runs it (-m device, docs/gpu.md)


def test_conformal_pvalue_hand_computed():
    fit = torch.tensor([[1.0], [2.0], [3.0], [4.0]])
    p = conformal_two_sided(fit, torch.tensor([[0.0], [2.5], [4.0], [9.0]]))[:, 0]
    # tails: min(#<=z, #>=z) = 0, 2, 1, 0 -> 2 (1 + tail) / 5, capped at 1
    assert torch.allclose(p, torch.tensor([0.4, 1.0, 0.8, 0.4], dtype=torch.float64))
    assert float(simes(torch.tensor([0.01, 0.04, 0.5]), 0)) == pytest.approx(0.03)


def test_fast_pvalues_equal_naive_broadcast():
    rng = np.random.default_rng(1)
    masf = MaSF(seed=2).fit(rng.normal(size=(300, 3, 16)))
    x = rng.normal(size=(50, 3, 16)) * rng.choice([1.0, 3.0], size=(50, 1, 1))
    assert np.array_equal(masf.pvalues(x), naive_pvalues(masf, x))


def test_fast_pvalues_equal_naive_broadcast_with_ties_on_a_grid():
    """Features on a coarse grid tie with calibration values and with each other (the one-search look-up falls
    back to a second search for tied queries; Simes by counting equal tails): still equal to the naive path."""
    rng = np.random.default_rng(3)
    masf = MaSF(seed=1).fit(rng.integers(0, 6, size=(90, 2, 8)).astype(float))
    x = rng.integers(-1, 8, size=(40, 2, 8)).astype(float)
    assert np.array_equal(masf.pvalues(x), naive_pvalues(masf, x))


def test_tail_counts_from_the_run_end_table_equal_brute_force_counts_with_ties_and_out_of_range_queries():
    """min(#{fit <= z}, #{fit >= z}) by one binary search plus the precomputed end of each run of equal values equals
    counting by comparison, for queries below, above, between and equal to calibration values (first, inner and last
    value of a run, the column's maximum and minimum), in float64 and in float32."""
    rng = np.random.default_rng(5)
    fit = torch.sort(torch.as_tensor(rng.integers(0, 5, size=(40, 6)).astype(float)), dim=0).values
    fit[:, 0] = 2.0  # a column that is one run of ties (the [CLS] dims of the embedding layer)
    queries = torch.as_tensor(np.arange(-1.0, 6.5, 0.5))[:, None].expand(-1, 6)  # [M, D]
    for dtype in (torch.float64, torch.float32):
        f, q = fit.to(dtype), queries.to(dtype)
        brute = torch.minimum((f[None] <= q[:, None]).sum(1), (f[None] >= q[:, None]).sum(1)).double()  # [M, D]
        assert torch.equal(SortedRows(f).tail_counts(q.T.contiguous()).T, brute)


def test_lookup_layout_is_made_once_and_again_when_a_level_is_replaced():
    rng = np.random.default_rng(6)
    masf = MaSF().fit(rng.normal(size=(60, 2, 4)))
    x = rng.normal(size=(5, 2, 4))
    first = masf.pvalues(x)
    rows = masf._sorted_rows("level1")
    masf.pvalues(x)
    assert masf._sorted_rows("level1") is rows, "a fitted MaSF keeps its look-up layout between calls"
    other = MaSF(seed=1).fit(rng.normal(size=(60, 2, 4)) * 2.0)
    masf.level1, masf.level2, masf.level3 = other.level1, other.level2, other.level3
    assert np.array_equal(masf.pvalues(x), other.pvalues(x)) and not np.array_equal(first, other.pvalues(x))


def test_simes_per_layer_by_counting_equals_simes_of_the_sorted_conformal_pvalues():
    rng = np.random.default_rng(4)
    masf = MaSF(seed=0).fit(rng.normal(size=(120, 3, 32)))
    for x in (torch.as_tensor(rng.normal(size=(25, 3, 32))), masf.level1[:7].reshape(7, 3, 32)):
        by_sort = simes(conformal_two_sided(masf.level1, x.reshape(len(x), -1), masf.rtol).reshape(len(x), 3, 32), dim=-1)
        assert torch.equal(masf._simes_per_layer(x), by_sort)


def test_pvalues_are_uniform_under_the_null_and_small_off_it():
    rng = np.random.default_rng(0)
    masf = MaSF().fit(rng.normal(size=(3000, 3, 32)))
    p = masf.pvalues(rng.normal(size=(1000, 3, 32)))
    assert kstest(p, "uniform").statistic < 0.06, "fresh in-distribution inputs give ~U(0,1) p-values"
    assert 0.02 < np.mean(p < 0.05) < 0.09
    far = masf.pvalues(rng.normal(size=(200, 3, 32)) * 3.0)
    assert np.mean(far < 0.05) > 0.9, "inputs far from the calibration data get small p-values"
    assert 0 < masf.pvalues(rng.normal(size=(5, 3, 32))).min() <= 1, "conformal p-values are never 0"
    assert MaSF.dataset_pvalue(far) < 0.05


def test_bad_shapes_are_refused():
    rng = np.random.default_rng(0)
    with pytest.raises(ValueError, match="at least 30"):
        MaSF().fit(rng.normal(size=(10, 2, 4)))
    masf = MaSF().fit(rng.normal(size=(60, 2, 4)))
    with pytest.raises(ValueError, match="do not match"):
        masf.pvalues(rng.normal(size=(3, 2, 5)))


def test_features_ignore_padding(toy_classifier):
    short = toy_classifier.batch(["the movie was good"])
    padded = toy_classifier.batch(["the movie was good", "the movie was really very very good and fun"])
    a = hidden_state_features(toy_classifier, short)[0]
    b = hidden_state_features(toy_classifier, padded)[0]
    assert a.shape == (3, 128)  # embeddings + 2 layers, hidden 128
    assert torch.allclose(a, b, atol=1e-5), "max-pooling never looks at padding"


def test_fit_store_and_reload_on_a_checkpoint(toy_classifier, models_cache):
    save_classifier(toy_classifier, "toy-masf")
    masf = fit_masf(toy_classifier)
    digest = masf.provenance["digest"]
    assert (toy_classifier.folder / f"masf-{digest}.safetensors").is_file()
    assert (toy_classifier.folder / f"masf-{digest}.json").is_file()
    again = load_masf(toy_classifier)
    batch = toy_classifier.batch(["the plot was dull", "this film was great"])
    assert np.array_equal(masf_pvalues(toy_classifier, masf, batch), masf_pvalues(toy_classifier, again, batch))
    assert again.provenance == masf.provenance
    masked = masf_pvalues(toy_classifier, again, mask_all_primary(batch, toy_classifier.mask_token_id))
    assert ((masked > 0) & (masked <= 1)).all()


def test_a_sweep_fits_each_missing_masf_once_and_leaves_no_partial_files(toy_classifier, models_cache):
    """Parallel workers must not each fit (and half-write) the same MaSF: the sweep fits it up front, and a fit
    is written under a temporary name and renamed, so only whole files are ever visible."""
    from engine.faithfulness.benchmark import ensure_masf

    save_classifier(toy_classifier, "toy-ensure")
    folder = models_cache / "toy-ensure"
    ensure_masf([("toy-ensure", "toy"), ("no-such-model", "toy")])  # a missing checkpoint is left for its cells
    [stored] = folder.glob("masf-*.safetensors")
    fitted = stored.stat()
    assert stored.with_suffix(".json").is_file() and not list(folder.glob("*.tmp"))
    ensure_masf([("toy-ensure", "toy")])
    again = stored.stat()
    assert (again.st_ino, again.st_mtime_ns) == (fitted.st_ino, fitted.st_mtime_ns), "a stored fit is not redone"


def test_ensure_masf_skips_what_a_cell_reports_but_lets_a_bug_through(toy_classifier, models_cache, monkeypatch):
    """ensure_masf skips an EngineError (missing checkpoint, unknown dataset, other labels: the cell reports it) and
    nothing else: an error of the code itself stops the sweep with its traceback instead of being swallowed."""
    import engine.ood.calibration
    from engine.faithfulness.benchmark import ensure_masf

    save_classifier(toy_classifier, "toy-bug")
    ensure_masf([("no-such-model", "toy"), ("toy-bug", "no-such-dataset")])
    assert not list((models_cache / "toy-bug").glob("masf-*"))

    def broken(*args, **kwargs):
        raise RuntimeError("a bug in the fit")

    monkeypatch.setattr(engine.ood.calibration, "fit_masf", broken)
    with pytest.raises(RuntimeError, match="a bug in the fit"):
        ensure_masf([("toy-bug", "toy")])


def test_one_forward_gives_the_logits_and_pvalues_of_two(toy_classifier):
    """Recursive masking takes a step's logits and MaSF features from one forward: they equal, bit for bit, the
    logits of Classifier.logits and the p-values of a separate MaSF pass (so curves written before the change
    reproduce), on a padded batch with masked tokens."""
    from engine.faithfulness.recursive import observe_step
    from engine.ood import logits_and_features

    masf = fit_masf(toy_classifier, save=False)
    batch = toy_classifier.batch(["the movie was good", "the plot was dull and far too long for what it had to say"])
    batch = batch.with_ids(torch.where(batch.maskable & (torch.arange(batch.input_ids.shape[1], device=batch.device) % 3 == 0),
                                       torch.full_like(batch.input_ids, toy_classifier.mask_token_id), batch.input_ids))
    with torch.no_grad():
        separate = toy_classifier.logits(batch)
        # The features computed on their own, as MaSF defines them: every hidden state, max over non-PAD tokens.
        states = toy_classifier.model(input_ids=batch.input_ids, attention_mask=batch.attention_mask,
                                      token_type_ids=batch.token_type_ids, output_hidden_states=True).hidden_states
        real = batch.attention_mask.bool()
        own = torch.stack([torch.stack([layer[i][real[i]].amax(0) for layer in states]) for i in range(len(batch))]).double()
        own = own.cpu()  # MaSF features live on the CPU, whatever the model's device
    fused, features = logits_and_features(toy_classifier, batch)
    assert torch.equal(fused, separate)
    assert torch.equal(features, own)
    target = torch.tensor([1, 0], device=batch.device)
    prob, logit, predicted, p_value = observe_step(toy_classifier, batch, target, masf)
    assert np.array_equal(p_value, masf.pvalues(own))
    assert np.array_equal(logit, separate.float()[[0, 1], target].cpu().numpy())
    assert np.array_equal(prob, torch.softmax(separate.float(), -1)[[0, 1], target].cpu().numpy())


# -- a fit is keyed by what calibrated it -------------------------------------------------------
def test_a_lookup_for_another_dataset_fits_anew_and_never_reuses_the_stored_fit(toy_classifier, models_cache):
    """A checkpoint's MaSF fitted on its own dataset (toy) is not what a look-up for rt gets: that look-up fits on
    rt's validation split and stores it beside the first; each fit's provenance names its data, and each later
    look-up gets its own."""
    from engine.ood import load_or_fit_masf, stored_calibrations

    save_classifier(toy_classifier, "toy-keyed")
    own = load_or_fit_masf(toy_classifier)
    other = load_or_fit_masf(toy_classifier, "rt")
    assert own.provenance["key"]["dataset"] == "toy" and other.provenance["key"]["dataset"] == "rt"
    assert "rt validation split" in other.provenance["calibration"]
    assert other.provenance["n_inputs"] == 852 and own.provenance["n_inputs"] == 40
    assert {k.dataset for k in stored_calibrations(toy_classifier)} == {"toy", "rt"}
    assert load_masf(toy_classifier, "rt").provenance == other.provenance
    assert load_masf(toy_classifier).provenance == own.provenance
    assert load_masf(toy_classifier, "rt", limit=100) is None, "a fit on part of the split is a calibration of its own"


def test_every_fit_records_device_dtype_and_library_versions(toy_classifier, test_device):
    """A fit records the device the features were computed on (the tests' device), the model's dtype and the
    libraries' versions."""
    import transformers

    masf = fit_masf(toy_classifier, save=False)
    prov = masf.provenance
    assert torch.device(prov["device"]).type == test_device.type and prov["model_dtype"] == "float32"
    assert prov["versions"]["torch"] == torch.__version__ and prov["versions"]["transformers"] == transformers.__version__
    assert {"numpy", "python", "safetensors"} <= set(prov["versions"]) and "torch_threads" in prov
    assert prov["key"]["fit_version"] == prov["key"]["fit_version"] >= 2 and prov["level1_rtol"] > 0


def test_a_stored_file_whose_key_is_not_the_one_asked_for_is_refused_naming_both(toy_classifier, models_cache):
    from engine.ood import calibration_key, load_or_fit_masf

    save_classifier(toy_classifier, "toy-swapped")
    folder = models_cache / "toy-swapped"
    other = fit_masf(toy_classifier, dataset="toy", limit=35)  # another key: the first 35 inputs only
    wanted = calibration_key(toy_classifier).digest
    for suffix in (".safetensors", ".json"):  # a fit's files copied under another key's name
        (folder / f"masf-{other.provenance['digest']}{suffix}").rename(folder / f"masf-{wanted}{suffix}")
    with pytest.raises(ValueError, match=r"first 35 inputs.*not on.*all inputs"):
        load_or_fit_masf(toy_classifier)


def test_an_unkeyed_fit_of_older_code_is_recognised_but_fitted_again(toy_classifier, models_cache):
    """A `masf.safetensors` written before fits were keyed counts as calibrated on the checkpoint's own dataset by
    fitting code version 1: listed, never reused (its levels were computed with exact ties), fitted again."""
    from safetensors.torch import save_file

    from engine.ood import MASF_FIT_VERSION, load_or_fit_masf, stored_calibrations

    save_classifier(toy_classifier, "toy-legacy")
    folder = models_cache / "toy-legacy"
    legacy = MaSF().fit(np.random.default_rng(0).normal(size=(60, 3, 128)))
    state = {k: v for k, v in legacy.state().items() if k != "rtol"}
    save_file({k: v.contiguous() for k, v in state.items()}, str(folder / "masf.safetensors"))
    [key] = stored_calibrations(toy_classifier)
    assert (key.dataset, key.fit_version) == ("toy", 1)
    assert load_masf(toy_classifier) is None
    fresh = load_or_fit_masf(toy_classifier)
    assert fresh.provenance["key"]["fit_version"] == MASF_FIT_VERSION and fresh.parts()[0][0] != 20


def test_a_model_fine_tuned_elsewhere_with_only_an_old_fit_is_refused_with_the_fits_named(toy_classifier, models_cache):
    """No dataset recorded, none named, and no current fit: the look-up refuses, naming the stored (old) fit and
    asking for the dataset, instead of guessing."""
    from engine.ood import load_or_fit_masf

    save_classifier(toy_classifier, "toy-elsewhere")
    (models_cache / "toy-elsewhere" / "masf.safetensors").write_bytes(b"")  # an old fit whose dataset is unknown
    elsewhere = toy_classifier
    saved = dict(elsewhere.metadata)
    try:
        elsewhere.metadata.pop("dataset")
        (models_cache / "toy-elsewhere" / "masf.json").write_text('{"dataset": "rt", "seed": 0}', encoding="utf-8")
        with pytest.raises(ValueError, match=r"name the dataset.*rt validation split.*fit v1"):
            load_or_fit_masf(elsewhere)
        assert load_or_fit_masf(elsewhere, "toy").provenance["key"]["dataset"] == "toy"
        assert load_or_fit_masf(elsewhere).provenance["key"]["dataset"] == "toy", "its only current fit"
    finally:
        elsewhere.metadata.clear()
        elsewhere.metadata.update(saved)


def test_a_sweep_cell_stores_which_data_calibrated_its_pvalues(toy_classifier, models_cache, tmp_path):
    from engine.faithfulness.benchmark import Cell, run_cell
    from engine.results import ResultsStore

    save_classifier(toy_classifier, "toy-cell")
    cell = Cell(model="toy-cell", dataset="toy", measure="random", seed=0, limit=2, ratios=(0.0, 0.5, 1.0))
    run_cell(cell, results_dir=str(tmp_path / "results"), run="r")
    [recorded] = ResultsStore(str(tmp_path / "results")).provenance("r")
    masf = recorded["provenance"]["masf"] if "provenance" in recorded else recorded["masf"]
    assert masf["key"]["dataset"] == "toy" and "toy validation split" in masf["calibration"]
    assert masf["versions"]["torch"] == torch.__version__


# -- ties: no p-value hangs on one float32 ulp ---------------------------------------------------
def _nudged_by_one_ulp(features: torch.Tensor, seed: int = 0) -> torch.Tensor:
    """Half of the float32 features moved one ulp up or down (what another device or BLAS build can do)."""
    rng = np.random.default_rng(seed)
    f32 = features.float().numpy()
    towards = np.where(rng.random(f32.shape) < 0.5, np.inf, -np.inf).astype(np.float32)
    return torch.from_numpy(np.where(rng.random(f32.shape) < 0.5, np.nextafter(f32, towards), f32)).double()


def test_pvalues_of_a_real_model_do_not_move_when_features_move_by_one_ulp(toy_classifier):
    """Masked rt inputs through tiny: embedding-layer maxima tie exactly with calibration values. Moving half of the
    features by one float32 ulp changes no p-value by more than one rank of the last level, 1 / (N3 + 1)."""
    from engine.data import get_dataset
    from engine.models import training_transform
    from engine.ood import calibration_features

    rt = get_dataset("rt", 0)
    masf = MaSF().fit(calibration_features(toy_classifier, rt.split("validation")[:300], "masked"))
    g = torch.Generator().manual_seed(99)
    # transformed on the CPU (the generator's device), run where the model is, as calibration_features does
    batch = training_transform(toy_classifier.batch_of(rt.split("test")[:160]).to("cpu"), "masked",
                               toy_classifier.mask_token_id, g).to(toy_classifier.device)
    feats = hidden_state_features(toy_classifier, batch)
    tied = (feats[:, 0, :].reshape(-1, 1) == masf.level1[:, :128].T.repeat(160, 1)).any(1).double().mean()
    assert tied > 0.05, "the embedding layer's maxima tie with calibration values (the case this test is about)"
    p, nudged = masf.pvalues(feats), masf.pvalues(_nudged_by_one_ulp(feats))
    assert np.abs(nudged - p).max() <= 1.0 / (masf.level3.shape[0] + 1) + 1e-12


def test_point_masses_keep_pvalues_valid_and_stable_under_one_ulp():
    """Features with point masses (each dim is max(c, normal): a run of exact ties at its minimum, as the [CLS]
    vector makes in the embedding layer): fresh inputs give at most ~5% below 0.05 (ties counted on both sides
    are conservative), and one ulp moves no p-value by more than one level-3 rank."""
    rng = np.random.default_rng(7)
    floor = rng.normal(size=(1, 2, 24)).astype(np.float32)

    def draw(n):
        return torch.from_numpy(np.maximum(floor, rng.normal(size=(n, 2, 24)).astype(np.float32))).double()

    masf = MaSF().fit(draw(900))
    x = draw(2000)
    p = masf.pvalues(x)
    assert np.mean(p < 0.05) < 0.065
    assert np.abs(masf.pvalues(_nudged_by_one_ulp(x)) - p).max() <= 1.0 / (masf.level3.shape[0] + 1) + 1e-12


def test_the_masking_page_says_which_data_calibrated_its_pvalues(toy_classifier, models_cache):
    """The step-by-step masking page shows, under its MaSF p-value, the calibration of the fit it used (the model's
    own dataset), and keeps it with the result (the curve CSV's `masf_calibration` column reads it from there)."""
    from pathlib import Path

    from streamlit.testing.v1 import AppTest

    save_classifier(toy_classifier, "toy-page")
    main = str(Path(__file__).resolve().parents[2] / "app" / "main.py")
    at = AppTest.from_file(main, default_timeout=300)
    at.run()
    at.switch_page(str(Path(main).parent.parent / "pages" / "masking.py"))
    at.run()
    at.text_area(key="masking_text").input("the movie was really good")
    at.selectbox(key="masking_measure").set_value("loo-sign")
    at.button(key="masking_run").click()
    at.run()
    assert not at.exception, [e.message for e in at.exception]
    shown = " ".join(c.value for c in at.caption)
    assert "MaSF p-values calibrated on toy validation split" in shown
    assert "toy validation split" in at.session_state["masking_masf_calibration"]


def test_a_dataset_name_given_to_other_rows_is_other_calibration_data(toy_classifier, models_cache, tmp_path):
    """A fit on registered dataset `calib` is not reused after `calib` is registered again for a file with other
    rows: the key holds a digest of the calibration rows themselves, so the look-up fits anew."""
    import pandas as pd

    from engine.data.user import register_dataset
    from engine.ood import calibration_key, load_or_fit_masf

    save_classifier(toy_classifier, "toy-rows")
    for version, word in (("a", "good"), ("b", "dull")):
        rows = [{"text": f"a {word} film number {i}", "label": ["negative", "positive"][i % 2]} for i in range(300)]
        pd.DataFrame(rows).to_csv(tmp_path / f"{version}.csv", index=False)
    register_dataset("calib", tmp_path / "a.csv", "text", "label")
    first = load_or_fit_masf(toy_classifier, "calib")
    register_dataset("calib", tmp_path / "b.csv", "text", "label", overwrite=True)
    assert calibration_key(toy_classifier, "calib").data_sha256 != first.provenance["key"]["data_sha256"]
    assert load_masf(toy_classifier, "calib") is None, "the stored fit was calibrated on the old rows"
    second = load_or_fit_masf(toy_classifier, "calib")
    assert second.provenance["digest"] != first.provenance["digest"]
