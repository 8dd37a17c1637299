#!/usr/bin/env bash
# Start the dashboard on a fresh machine: set up .venv, build the default model if models_cache has
# none (tiny masked-fine-tuned on Rotten Tomatoes, about 2 minutes on 2 cores, with a progress bar),
# then serve the app. Extra arguments go to `streamlit run` (e.g. --server.port 8600).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
if ! .venv/bin/python -c "
from engine.models import list_checkpoints
import sys; sys.exit(0 if any('error' not in m for m in list_checkpoints()) else 1)"; then
  echo "== no usable model in models_cache: building the default one (tiny, rt, masked fine-tuning)"
  .venv/bin/python -m engine train --model tiny --dataset rt --strategy masked
fi
exec .venv/bin/python -m streamlit run app/main.py "$@"
