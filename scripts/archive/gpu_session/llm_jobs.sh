# The jobs of one bundle on the device (started by llm_stage.sh): base installs the wheels and runs the device-touching
# test files on CUDA; smollm2 / gemma3 convert the packaged GGUF once (the engine's own path), then run in parallel
# IG's completeness check on 100 rt test sentences and the field's self-explanation tests on 100 (insertion,
# biased features, CC-SHAP), each writing under $S/out. A file $S/<bundle>.done marks the end.
set -u
S=${GSTAGE:-/root/gstage}
B=$1
cd "$S/repo"
export PYTHONPATH="$S/site:$S/pkgs:$S/repo" PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 \
  TOKENIZERS_PARALLELISM=false ENGINE_MODELS_CACHE="$S/models_cache" ENGINE_RESULTS_DIR="$S/out/results" \
  ENGINE_THREADS=1
stamp() { echo "[$(date -u +%H:%M:%S)] $*"; }
if [ "$B" = base ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target "$S/site" "$S"/whl/*.whl
  stamp "wheels installed rc=$?"
  { nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv
    python3 -c "import sys, torch, transformers; print('python', sys.version.split()[0], '| torch', torch.__version__, '| CUDA', torch.version.cuda, '| transformers', transformers.__version__, '|', torch.cuda.get_device_name(0))"
    echo "code digest $(python3 scripts/gpu_session/code_digest.py "$S/pieces/code_files.txt")"; } > "$S/out/env.txt" 2>&1
  cat "$S/out/env.txt"
  touch "$S/base.ready"
  [ -n "${SKIP_TESTS:-}" ] && { touch "$S/base.done"; exit 0; }
  ENGINE_TEST_DEVICE=cuda timeout -s INT -k 15 300 python3 -m pytest -q -n 6 -p no:cacheprovider --timeout 200 \
    --junitxml "$S/out/junit_cuda.xml" $(cat scripts/gpu_session/cuda_tests.txt) > "$S/out/pytest_cuda.log" 2>&1
  stamp "pytest rc=$?"; grep -E "^(FAILED|ERROR)" "$S/out/pytest_cuda.log" | head -40; tail -n 2 "$S/out/pytest_cuda.log"
  touch "$S/base.done"; exit 0
fi
while [ ! -f "$S/base.ready" ]; do sleep 2; done
case $B in smollm2) M=smollm2-rt-prompt;; gemma3) M=gemma3-rt-prompt;; esac
stamp "$M: converting and loading"
python3 -c "
import time; t = time.perf_counter()
from engine.models import load_classifier
c = load_classifier('$M'); print('$M loaded on', c.device, 'weights', c.metadata.get('weights_sha256'), f'{time.perf_counter() - t:.0f} s')"
stamp "$M: loaded rc=$?"
mkdir -p "$S/out/ig" "$S/out/gen" "$S/out/logs"
run() {  # name, then the command
  local name=$1; shift
  ( SECONDS=0; ENGINE_GENERATIONS_DB="$S/out/gen/$B-$name.sqlite3" "$@" > "$S/out/logs/$B-$name.log" 2>&1
    echo "[$(date -u +%H:%M:%S)] $B-$name rc=$? in ${SECONDS}s" ) &
}
run ig python3 scripts/llm_ig_completeness.py --model $M --dataset rt --n ${LLM_N:-100} --seed 0 \
  --jsonl "$S/out/ig/$B-rt-convergence-cuda.jsonl"
run insertion python3 -m engine self-explain --model $M --kind insertion --limit ${LLM_N:-100} --seed 0 --max-new-tokens 64 \
  --run $B-rt-field-insertion-100
run biased python3 -m engine self-explain --model $M --kind biased-hint biased-fewshot --limit ${LLM_N:-100} --seed 0 \
  --max-new-tokens 64 --run $B-rt-field-biased-100
run ccshap python3 -m engine self-explain --model $M --kind cc-shap --limit ${LLM_N:-100} --seed 0 --max-new-tokens 64 \
  --permutations 2 --run $B-rt-field-ccshap-100
wait
stamp "$B: all jobs ended"
touch "$S/$B.done"
