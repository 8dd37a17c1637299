# One device call of the LLM GPU session (prepare_llm.py): gather this call's pieces, unpack every bundle that is now
# whole, and start its jobs in the background (setsid: they outlive the call while the machine stays warm).
#   bash scripts/gpu_session/llm_stage.sh .gsK
set -u
S=${GSTAGE:-/root/gstage}
mkdir -p "$S/pieces" "$S/logs" "$S/out"
cp "$1"/* "$S/pieces/"
if [ ! -d "$S/repo" ]; then  # the jobs run from a copy, so a later call's fresh tree cannot change code under them
  mkdir -p "$S/repo" && cp -r engine app pages scripts bench tests pyproject.toml requirements*.txt "$S/repo/"
  date -u +%s > "$S/t0"
fi
python3 - "$S" <<'PY'
import hashlib, json, subprocess, sys
from pathlib import Path
S = Path(sys.argv[1])
manifest = json.loads((S / "pieces" / "manifest.json").read_text())
for name, b in manifest.items():
    if (S / f"{name}.unpacked").exists():
        continue
    files = [S / "pieces" / p for p in b["pieces"]]
    if not all(f.exists() for f in files):
        print(f"{name}: {sum(f.exists() for f in files)}/{len(files)} pieces")
        continue
    h = hashlib.sha256()
    for f in files:
        h.update(f.read_bytes())
    if h.hexdigest() != b["sha256"]:
        print(f"{name}: SHA-256 differs: not unpacked"); continue
    cat = subprocess.Popen(["cat", *map(str, files)], stdout=subprocess.PIPE)
    subprocess.run(["tar", "-x", "-C", str(S)], stdin=cat.stdout, check=True)
    cat.wait()
    for f in files:
        f.unlink()
    (S / f"{name}.unpacked").touch()
    print(f"{name}: unpacked")
PY
for b in base smollm2 gemma3; do
  if [ -f "$S/$b.unpacked" ] && [ ! -f "$S/$b.started" ] && { [ "$b" = base ] || [ -f "$S/base.started" ]; }; then
    touch "$S/$b.started"
    setsid nohup bash "$S/repo/scripts/gpu_session/llm_jobs.sh" "$b" > "$S/logs/$b.log" 2>&1 < /dev/null &
    echo "$b: jobs started"
  fi
done
sleep 2; tail -n 3 "$S"/logs/*.log 2>/dev/null; echo "t = $(( $(date -u +%s) - $(cat "$S/t0") )) s since the first call"
