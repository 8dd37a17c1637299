# Call 3: MiniLM (assembled from the two carried halves): masked fine-tuning of 3 seeds on the GPU, recursive
# masking of the whole rt test split with the shipped cells' 9 measures and MaSF; MiniLM's live bundle against the
# forward-pass limit.
source "${GSTAGE:-/root/gstage}/scripts/env.sh" || exit 1
SECONDS=0
for s in 0 1 2; do timeout 150 python3 -m engine train --model minilm --dataset rt --epochs 2 --lr 5e-5 --seed $s --quiet ${TRAIN_EXTRA:-} \
  > "$OUT/train_s$s.log" 2>&1; echo "train s$s rc=$? at ${SECONDS}s"; tail -n 2 "$OUT/train_s$s.log"; done
timeout "${SWEEP_S:-240}" python3 -m engine benchmark --model-template 'minilm-{dataset}-masked-s{seed}' --datasets rt \
  --measures random grad-l2 grad-l1 x-grad-abs x-grad-sign ig-sign ig-abs loo-sign loo-abs --seeds 0 1 2 \
  --run minilm-rt-3seeds-gpu ${SWEEP_EXTRA:-} > "$OUT/sweep.log" 2>&1; echo "sweep rc=$? at ${SECONDS}s"; tail -n 3 "$OUT/sweep.log"
tar czf "$OUT/gpu_cells.tgz" -C "$ENGINE_RESULTS_DIR" . -C "$ENGINE_MODELS_CACHE" $(cd "$ENGINE_MODELS_CACHE" && ls -d minilm-rt-masked-s*/metadata.json 2>/dev/null)
timeout 90 python3 bench/importance.py --models minilm --lengths 128 512 --measures grad-l2 --skip-captum grad-l2 --beam-lengths --repeats 3 > "$OUT/minilm_bundle.txt" 2>&1; echo "minilm bundle rc=$?"
