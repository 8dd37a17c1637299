#!/usr/bin/env bash
# The shipped rt report cards (docs/ground-truth.md): `bash scripts/experiments/groundtruth_rt.sh [tiny|minilm|smollm2]` (default
# tiny; smollm2: the prompted LM planted by masked LoRA, with its self-explanation rows).
# Plant each mechanism (skipped when its checkpoint is there), then its card under [MASK], model by model so whole
# cards land first; then the other operators. Every step resumes: planted checkpoints are kept, report-card cells
# already stored are skipped.
set -uo pipefail
FAMILY=${1:-tiny}
case "$FAMILY" in tiny|minilm|smollm2) ;; *) echo "usage: bash scripts/experiments/groundtruth_rt.sh [tiny|minilm|smollm2]" >&2; exit 2;; esac
export ENGINE_THREADS=${ENGINE_THREADS:-1} OMP_NUM_THREADS=${OMP_NUM_THREADS:-1} MKL_NUM_THREADS=${MKL_NUM_THREADS:-1}
PY=${PY:-.venv/bin/python}
RUN=${RUN:-$FAMILY-rt-card}
if [ "${ENGINE_SMOKE:-}" = 1 ]; then
  # CI's smoke run: the same plant command on the toy data (64 sentences, 1 epoch) in the scratch folder, then the
  # truth by intervention on it (a model this small may not learn the trigger: the card would be refused, as it must)
  PY=${PYTHON:-python3}
  export ENGINE_MODELS_CACHE="$ENGINE_SMOKE_DIR/models_cache" ENGINE_USER_DIR="$ENGINE_SMOKE_DIR/user" \
    ENGINE_RESULTS_DIR="$ENGINE_SMOKE_DIR/results"
  $PY -m engine plant --model tiny --dataset toy --mechanism trigger --words vessel --rate 0.3 --epochs 1 \
    --train-limit 64 --quiet --id smoke-planted-trigger || exit 1
  $PY -m engine report-card --model smoke-planted-trigger --run smoke-card --truth-only
  status=$?
  [ $status -eq 0 ] || [ $status -eq 2 ] || exit $status  # 2: refused, not learned (said on stderr)
  exit 0
fi
MEASURES="random attention-mean grad-l2 x-grad-sign x-grad-abs ig-sign deeplift loo-sign occlusion shapley-sampling"
METRICS="racu comprehensiveness sufficiency soft deletion insertion randomisation f-fidelity"
# MiniLM: one epoch at its usual rate (a planted word is learned within it; two epochs are 16 min on 2 idle cores
# per model) and 100 inputs per cell (a MiniLM input costs about six tiny ones)
# SmolLM2: masked LoRA from the zero-shot prompt on the first 1,200 training sentences, two epochs at 2e-3 (one epoch
# on 800 at 1e-3 did not learn the trigger: insertion flipped 9% of the clean test inputs, 15 deciding); 50 inputs per
# cell, the live measures (IG at its 20 steps, no escalation: with it IG alone is about 90 CPU-s per input here; its
# completeness gap is recorded), three metric families (six judges), its own replacement [REDACTED] against delete
if [ "$FAMILY" = minilm ]; then TRAIN="--epochs 1 --lr 5e-5"; LIMIT=100; else TRAIN=""; LIMIT=200; fi
if [ "$FAMILY" = smollm2 ]; then
  TRAIN="--train-limit 1200 --epochs 2 --lr 2e-3 --eval-limit 100"; LIMIT=50
  MEASURES="grad-l2 x-grad-sign ig-sign loo-sign"
  METRICS="racu comprehensiveness sufficiency"
  IG="--option ig-sign:max_steps=20"
fi
BASE=$FAMILY; [ "$FAMILY" = smollm2 ] && BASE=smollm2-rt-prompt
plant() {  # id, then plant options
  local id=$1; shift
  if [ -f "${ENGINE_MODELS_CACHE:-models_cache}/$id/metadata.json" ]; then echo "have $id"; return; fi
  /usr/bin/time -f "plant $id: %e s wall, %U s user CPU" $PY -m engine plant --model "$BASE" --dataset rt --quiet \
    --id "$id" $TRAIN "$@"
}
card() {  # id, operator, extra options (metrics, self-explanations)
  /usr/bin/time -f "card $1 $2: %e s wall, %U s user CPU" $PY -m engine report-card --model "$1" --run "$RUN" \
    --operator "$2" --measures $MEASURES --metrics $METRICS $3 --limit $LIMIT --ffid-draws 5 --naopc-beam 1
}
truth() { $PY -m engine report-card --model "$1" --run "$RUN" --truth-only; }
declare -A OPTS=(
  [gt-tiny-rt-trigger-q100]="--mechanism graded --words vessel --q 1.0"
  [gt-tiny-rt-trigger-q80]="--mechanism graded --words vessel --q 0.8"
  [gt-tiny-rt-trigger-q65]="--mechanism graded --words vessel --q 0.65"
  [gt-tiny-rt-or]="--mechanism or --words vessel orbit"
  [gt-tiny-rt-gated]="--mechanism gated --words vessel --gate first-half"
  [gt-tiny-rt-decoy]="--mechanism decoy --words vessel lantern"
  [gt-tiny-rt-none]="--mechanism none --words vessel"
)
# Order chosen to fit 2 shared cores: the three trigger strengths under [MASK] first (NAOPC's bounds only for the
# first: they cost about as much as the rest of its card), then the other operators on the weakest trigger, then
# the rest. Each line resumes.
if [ "$FAMILY" = smollm2 ]; then
  # the must-show's two: the trigger and the control, one process per model (`bash scripts/experiments/groundtruth_rt.sh smollm2
  # ID` runs one) so a measure's scores serve both operators: [REDACTED] (the prompt's own replacement), the
  # self-explanations (answers of at most 128 tokens, greedy, cached on disk), then delete
  for id in ${2:-gt-smollm2-rt-trigger gt-smollm2-rt-none}; do
    case $id in *-trigger) opts="--mechanism trigger --words vessel";; *) opts="--mechanism none --words vessel";; esac
    plant "$id" $opts || exit 1
    truth "$id"
    /usr/bin/time -f "card $id: %e s wall, %U s user CPU" $PY -m engine report-card --model "$id" --run "$RUN" \
      --operator redacted delete --measures $MEASURES --metrics $METRICS --limit $LIMIT $IG --max-new-tokens 128
  done
  exit 0
fi
if [ "$FAMILY" = minilm ]; then
  # the must-show's three: a graded trigger, OR and the control, each under [MASK] first, then [UNK]
  declare -A MOPTS=(
    [gt-minilm-rt-trigger-q80]="--mechanism graded --words vessel --q 0.8"
    [gt-minilm-rt-or]="--mechanism or --words vessel orbit"
    [gt-minilm-rt-none]="--mechanism none --words vessel"
  )
  for id in gt-minilm-rt-trigger-q80 gt-minilm-rt-or gt-minilm-rt-none; do
    plant "$id" ${MOPTS[$id]} || exit 1
    truth "$id"
    card "$id" mask ""
  done
  for id in gt-minilm-rt-trigger-q80 gt-minilm-rt-or gt-minilm-rt-none; do card "$id" unk ""; done
  exit 0
fi
card gt-tiny-rt-trigger-q100 mask "naopc"
truth gt-tiny-rt-trigger-q80
plant gt-tiny-rt-trigger-q65 ${OPTS[gt-tiny-rt-trigger-q65]}
truth gt-tiny-rt-trigger-q65
card gt-tiny-rt-trigger-q65 mask ""
card gt-tiny-rt-trigger-q65 unk ""
card gt-tiny-rt-trigger-q65 delete ""
card gt-tiny-rt-trigger-q80 mask ""
for id in gt-tiny-rt-trigger-q100 gt-tiny-rt-trigger-q80; do card "$id" unk ""; card "$id" delete ""; done
for id in gt-tiny-rt-or gt-tiny-rt-gated gt-tiny-rt-decoy gt-tiny-rt-none; do
  plant "$id" ${OPTS[$id]}
  truth "$id"
  for op in mask unk delete; do card "$id" "$op" ""; done
done
