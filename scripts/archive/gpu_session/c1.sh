# Call 1: environment, the code's digest, bench/gpu_check.py in full, then the device-touching tests on CUDA.
source .gpu1/scripts/env.sh || exit 1
{ nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv 2>&1
  python3 -c "import sys, torch, transformers; print('python', sys.version.split()[0], '| torch', torch.__version__, '| CUDA', torch.version.cuda, '| transformers', transformers.__version__, '|', torch.cuda.get_device_name(0) if torch.cuda.is_available() else 'no CUDA')"
  echo "code digest $(python3 "$S/scripts/code_digest.py" "$S/code_files.txt")"; } 2>&1 | tee "$OUT/env.txt"
SECONDS=0
timeout "${CHECK_S:-270}" python3 bench/gpu_check.py --out "$OUT/gpu_check.json" > "$OUT/gpu_check.log" 2>&1
echo "gpu_check rc=$? in ${SECONDS}s"; grep -E "^\[|errors" "$OUT/gpu_check.log" | tail -14
SECONDS=0
ENGINE_TEST_DEVICE=${TEST_DEVICE:-cuda} timeout -s INT -k 15 "${TESTS_S:-170}" python3 -m pytest -q -n "${WORKERS:-12}" -p no:cacheprovider \
  --timeout 120 --junitxml "$OUT/junit_cuda.xml" $(cat "$S/scripts/cuda_tests.txt") > "$OUT/pytest_cuda.log" 2>&1
echo "pytest rc=$? in ${SECONDS}s"; grep -E "^(FAILED|ERROR)" "$OUT/pytest_cuda.log" | head -30; tail -2 "$OUT/pytest_cuda.log"
