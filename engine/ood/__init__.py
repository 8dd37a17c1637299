"""In-distribution tests for masked inputs (MaSF, docs/masf.md): `masf` (the test and its cross-fit), `features`
(the one feature path: hidden states max-pooled over each input's real tokens), `calibration` (fits stored beside a
checkpoint, each keyed by what calibrated it, found again or fitted anew, and their p-values and provenance)."""

from __future__ import annotations

from engine.lazy_exports import lazy_face

#: public name -> the submodule that defines it (PEP 562: loaded on first use, so importing a light submodule,
#: engine.ood.files, does not import torch through this file)
_EXPORTS = {
    "DEFAULT_MASK_SEED": "calibration",
    "FALSE_ALARM_ALPHA": "calibration",
    "LEGACY_MASF_FILE": "files",
    "LEGACY_MASF_META": "files",
    "MASF_FIT_VERSION": "files",
    "MASF_PREFIX": "files",
    "CalibrationKey": "calibration",
    "calibration_key": "calibration",
    "calibration_strategy": "calibration",
    "calibration_uncertainty": "calibration",
    "fit_masf": "calibration",
    "load_masf": "calibration",
    "load_or_fit_masf": "calibration",
    "masf_provenance": "calibration",
    "masf_pvalue_ranges": "calibration",
    "masf_pvalues": "calibration",
    "stored_calibrations": "calibration",
    "calibration_features": "features",
    "hidden_state_features": "features",
    "logits_and_features": "features",
    "DEFAULT_FOLDS": "masf",
    "LEVEL1_RTOL": "masf",
    "CrossFitMaSF": "masf",
    "MaSF": "masf",
    "false_alarm_interval": "masf",
    "naive_pvalues": "masf",
    "pvalue_verdict": "masf",
}


__all__ = ["MaSF", "CrossFitMaSF", "CalibrationKey", "DEFAULT_FOLDS", "DEFAULT_MASK_SEED", "FALSE_ALARM_ALPHA",
           "LEGACY_MASF_FILE", "LEGACY_MASF_META", "LEVEL1_RTOL", "MASF_FIT_VERSION", "MASF_PREFIX", "calibration_key",
           "calibration_strategy", "calibration_uncertainty", "false_alarm_interval", "fit_masf", "load_masf",
           "load_or_fit_masf", "masf_provenance", "masf_pvalues", "masf_pvalue_ranges", "pvalue_verdict",
           "stored_calibrations", "hidden_state_features", "logits_and_features", "calibration_features", "naive_pvalues"]


__getattr__, __dir__ = lazy_face(__name__, _EXPORTS)
