#!/usr/bin/env bash
# Plant the mechanisms of the shipped tiny (rt) report cards (docs/ground-truth.md); skips checkpoints already
# there, so a killed run resumes. 2 CPU cores: about 2-3 minutes per model.
set -euo pipefail
export ENGINE_THREADS=${ENGINE_THREADS:-1} OMP_NUM_THREADS=${OMP_NUM_THREADS:-1} MKL_NUM_THREADS=${MKL_NUM_THREADS:-1}
PY=${PY:-.venv/bin/python}
plant() {  # id, then plant options
  local id=$1; shift
  if [ -f "${ENGINE_MODELS_CACHE:-models_cache}/$id/metadata.json" ]; then echo "have $id"; return; fi
  /usr/bin/time -f "$id: %e s wall, %U s user CPU" $PY -m engine plant --model tiny --dataset rt --quiet --id "$id" "$@"
}
plant gt-tiny-rt-trigger-q100 --mechanism graded --words vessel --q 1.0
plant gt-tiny-rt-trigger-q80 --mechanism graded --words vessel --q 0.8
plant gt-tiny-rt-trigger-q65 --mechanism graded --words vessel --q 0.65
plant gt-tiny-rt-or --mechanism or --words vessel orbit
plant gt-tiny-rt-gated --mechanism gated --words vessel --gate first-half
plant gt-tiny-rt-decoy --mechanism decoy --words vessel lantern
plant gt-tiny-rt-none --mechanism none --words vessel
plant gt-tiny-rt-trigger-q100-plain --mechanism graded --words vessel --q 1.0 --strategy plain
