"""In-distribution tests for masked inputs (MaSF, docs/masf.md): `masf` (the test and its cross-fit), `features`
(the one feature path: hidden states max-pooled over each input's real tokens), `calibration` (fits stored beside a
checkpoint, each keyed by what calibrated it, found again or fitted anew, and their p-values and provenance)."""
from engine.ood.calibration import (
    DEFAULT_MASK_SEED,
    FALSE_ALARM_ALPHA,
    LEGACY_MASF_FILE,
    LEGACY_MASF_META,
    MASF_FIT_VERSION,
    MASF_PREFIX,
    CalibrationKey,
    calibration_key,
    calibration_strategy,
    calibration_uncertainty,
    fit_masf,
    load_masf,
    load_or_fit_masf,
    masf_provenance,
    masf_pvalue_ranges,
    masf_pvalues,
    stored_calibrations,
)
from engine.ood.features import calibration_features, hidden_state_features, logits_and_features
from engine.ood.masf import DEFAULT_FOLDS, LEVEL1_RTOL, CrossFitMaSF, MaSF, false_alarm_interval, naive_pvalues, pvalue_verdict

__all__ = ["MaSF", "CrossFitMaSF", "CalibrationKey", "DEFAULT_FOLDS", "DEFAULT_MASK_SEED", "FALSE_ALARM_ALPHA",
           "LEGACY_MASF_FILE", "LEGACY_MASF_META", "LEVEL1_RTOL", "MASF_FIT_VERSION", "MASF_PREFIX", "calibration_key",
           "calibration_strategy", "calibration_uncertainty", "false_alarm_interval", "fit_masf", "load_masf",
           "load_or_fit_masf", "masf_provenance", "masf_pvalues", "masf_pvalue_ranges", "pvalue_verdict",
           "stored_calibrations", "hidden_state_features", "logits_and_features", "calibration_features", "naive_pvalues"]
