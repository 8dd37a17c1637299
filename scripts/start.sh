#!/usr/bin/env bash
# Start the dashboard on a fresh machine: set up .venv, build the default model if models_cache has
# none (tiny masked-fine-tuned on Rotten Tomatoes, about 2 minutes on 2 cores, with a progress bar),
# then serve the app on 127.0.0.1 only (.streamlit/config.toml; the dashboard has no log-in). Extra arguments
# go to `streamlit run` (e.g. --server.port 8600); docs/configuration.md says how to serve it to others.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
if ! .venv/bin/python -c "
from engine.models import list_checkpoints
import sys; sys.exit(0 if any('error' not in m for m in list_checkpoints()) else 1)"; then
  echo "== no usable model in models_cache: building the default one (tiny, rt, masked fine-tuning)"
  .venv/bin/python -m engine train --model tiny --dataset rt --strategy masked
fi
# --server.address here as well as in the config: the config is only read from the working directory, and a
# later --server.address in "$@" still wins (the last value of an option counts)
exec .venv/bin/python -m streamlit run app/main.py --server.address 127.0.0.1 "$@"
