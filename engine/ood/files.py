"""The names of MaSF's stored fits beside a checkpoint and the version of the fitting code: what a reader of a
checkpoint folder needs to tell whether it is calibrated (the dashboard's model card) without importing the fitting
code (engine.ood.calibration, which imports torch)."""
from __future__ import annotations

# Version of the fitting code: bumped whenever a fit's stored levels would come out different (2: ties within a
# tolerance, docs/masf.md; 3: prompted LMs pooled from the slot on; 4: cross-fitted over K folds, docs/masf.md). It is
# part of the key, so a fit by older code is never reused: it is fitted again.
# The git commit is recorded too (provenance), but is not part of the key: every commit would refit everything.
MASF_FIT_VERSION = 4  # 4: cross-fitted over `folds` folds (CrossFitMaSF): no verdict hangs on one split
# Files of the fits made before fits were keyed (one per checkpoint, calibrated on the checkpoint's own dataset).
LEGACY_MASF_FILE = "masf.safetensors"
LEGACY_MASF_META = "masf.json"
MASF_PREFIX = "masf-"
