#!/usr/bin/env bash
# Start the dashboard on a fresh machine: set up .venv, build the default model if models_cache has
# none (tiny masked-fine-tuned on Rotten Tomatoes, about 2 minutes on 2 cores, with a progress bar),
# then serve the app on 127.0.0.1 only (.streamlit/config.toml; the dashboard has no log-in). Extra arguments
# go to `streamlit run` (e.g. --server.port 8600); docs/configuration.md says how to serve it to others.
# ENGINE_SMOKE=1 (CI's smoke run of every script): setup's smoke check, then the app served headless on a free
# localhost port until its health endpoint answers, then stopped; no model is built.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
if [ "${ENGINE_SMOKE:-}" = 1 ]; then
  PY=${PYTHON:-.venv/bin/python}
  port=$("$PY" -c "import socket; s = socket.socket(); s.bind(('127.0.0.1', 0)); print(s.getsockname()[1])")
  "$PY" -m app.serve --server.address 127.0.0.1 --server.port "$port" --server.headless true \
    --browser.gatherUsageStats false >/dev/null 2>&1 &
  app=$!
  trap 'kill $app 2>/dev/null || true' EXIT
  for _ in $(seq 1 120); do
    if "$PY" -c "import urllib.request, sys; sys.exit(0 if urllib.request.urlopen('http://127.0.0.1:$port/_stcore/health', timeout=2).read() == b'ok' else 1)" 2>/dev/null; then
      echo "== smoke: the dashboard answered on 127.0.0.1:$port"
      exit 0
    fi
    sleep 1
  done
  echo "start smoke: the dashboard did not answer on 127.0.0.1:$port within 120 s"
  exit 1
fi
# served to a network (a non-loopback --server.address, or ENGINE_NETWORK=1) with no admin secret, or one easy to
# guess: refuse to start, before anything slow (building the default model takes minutes)
.venv/bin/python -m app.admin check-serve --server.address 127.0.0.1 "$@"
if ! .venv/bin/python -c "
from engine.models import list_checkpoints
import sys; sys.exit(0 if any('error' not in m for m in list_checkpoints()) else 1)"; then
  echo "== no usable model in models_cache: building the default one (tiny, rt, masked fine-tuning)"
  .venv/bin/python -m engine train --model tiny --dataset rt --strategy masked
fi
# --server.address here as well as in the config: the config is only read from the working directory, and a
# later --server.address in "$@" still wins (the last value of an option counts)
# app.serve is `streamlit run app/main.py` that exits within seconds of SIGTERM even with dead browsers attached
exec .venv/bin/python -m app.serve --server.address 127.0.0.1 "$@"  # streamlit run app/main.py
