#!/usr/bin/env bash
# Set up .venv if needed, then run the test suite. Extra arguments go to pytest.
# ENGINE_SMOKE=1 (CI's smoke run of every script): the interpreter in $PYTHON, setup's smoke check, and pytest
# collecting the suite without running it.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
if [ "${ENGINE_SMOKE:-}" = 1 ]; then
  # collects one module (the real suite, run after, imports every module anyway): the command line is what is checked
  exec "${PYTHON:-python3}" -m pytest -q --collect-only "${@:-tests/engine/test_cli.py}"
fi
# Cached bytecode (gitignored __pycache__ folders), even where PYTHONDONTWRITEBYTECODE is set: the suite starts about 150
# Python processes (test workers, servers, scripts, pool workers) and each compiled the engine's sources again.
unset PYTHONDONTWRITEBYTECODE
# On every core (pytest-xdist; tests/conftest.py groups what must share a worker); `-n 0` in "$@" runs in one process.
exec .venv/bin/python -m pytest -q -n auto --dist loadgroup "$@"
