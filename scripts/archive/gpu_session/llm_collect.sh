# The last call of the LLM GPU session: wait up to $1 seconds for every bundle's jobs, then send back (under $OUT) the
# logs and everything the jobs wrote, as one tar (results, IG lines, generation caches), whatever has finished.
set -u
S=${GSTAGE:-/root/gstage}
end=$(( $(date -u +%s) + ${1:-300} ))
while [ "$(date -u +%s)" -lt "$end" ]; do
  [ -f "$S/base.done" ] && [ -f "$S/smollm2.done" ] && [ -f "$S/gemma3.done" ] && break
  sleep 5
done
for f in base smollm2 gemma3; do [ -f "$S/$f.done" ] && echo "$f: done" || echo "$f: NOT done"; done
for f in "$S"/out/ig/*.jsonl; do [ -f "$f" ] && echo "$(basename "$f"): $(wc -l < "$f") sentences"; done
cat "$S"/logs/*.log | tail -n 40
tail -n 2 "$S"/out/logs/*.log
tar -cf "$OUT/llm_gpu_out.tar" -C "$S" out logs
echo "t = $(( $(date -u +%s) - $(cat "$S/t0") )) s since the first call"
