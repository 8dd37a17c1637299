# Call 2: the live bundle on a random BERT-base at T = 128 and 512; SmolLM2 (random weights, real tokenizer and
# prompt) on CUDA against the CPU, bf16 against fp32, and its live bundle against the forward-pass limit; the same
# for Gemma 3 270M.
source "${GSTAGE:-/root/gstage}/scripts/env.sh" || exit 1
SECONDS=0
python3 "$S/scripts/random_llm.py" "$S/smollm2" "$ENGINE_MODELS_CACHE/.llm/smollm2" 2>&1 | tail -1
for T in ${BASE_LENGTHS-128 512}; do timeout 100 python3 bench/importance.py --base --base-length $T > "$OUT/base_T$T.txt" 2>&1; echo "base T=$T rc=$?"; done
timeout 120 python3 "$S/scripts/llm_agreement.py" smollm2-rt-prompt > "$OUT/llm_agreement_smollm2.jsonl" 2>"$OUT/llm_agreement_smollm2.err"; echo "agreement rc=$?"
timeout 120 python3 bench/llm_explain_speed.py --model smollm2-rt-prompt --wall --repeats 3 --batch-sizes 1 8 32 128 > "$OUT/llm_speed_smollm2.txt" 2>&1; echo "llm speed rc=$?"
python3 "$S/scripts/random_llm.py" "$S/gemma3" "$ENGINE_MODELS_CACHE/.llm/gemma3-270m" 2>&1 | tail -1
timeout 90 python3 "$S/scripts/llm_agreement.py" gemma3-rt-prompt > "$OUT/llm_agreement_gemma3.jsonl" 2>"$OUT/llm_agreement_gemma3.err"; echo "gemma agreement rc=$?"
timeout 90 python3 bench/llm_explain_speed.py --model gemma3-rt-prompt --wall --repeats 3 --batch-sizes 1 8 32 > "$OUT/llm_speed_gemma3.txt" 2>&1; echo "gemma speed rc=$?"
echo "call 2 in ${SECONDS}s"; tail -n 12 "$OUT"/base_T*.txt "$OUT/llm_speed_smollm2.txt" "$OUT/llm_speed_gemma3.txt"; cut -c1-700 "$OUT"/llm_agreement_*.jsonl
