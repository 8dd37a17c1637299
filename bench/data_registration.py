"""Registering a user's file: time and peak memory by size and format (targets: a 100,000-row CSV within
10 s; 1 million rows without loading all texts at once).

Each measurement runs in a fresh process, so its peak resident memory (VmHWM, Linux) is its own; the table
shows it above the process's memory after imports, next to pyarrow's own allocation peak and, as the
reference, what reading the whole CSV with pandas costs. Registration streams: its peak stays near one
chunk while the file grows; `load` (what training does) holds every text, by design.

    python bench/data_registration.py                    # 100k and 1M rows, CSV / JSONL / Parquet
    python bench/data_registration.py --rows 100000 --formats csv
    python bench/data_registration.py --smoke            # CI: 2,000 rows
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def make_file(path: Path, rows: int, fmt: str, seed: int = 0) -> None:
    """`rows` reviews of 5-40 words from a 2,000-word vocabulary, 3 classes at 60/30/10 %."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.csv as pacsv
    import pyarrow.parquet as pq

    rng = np.random.default_rng(seed)
    vocabulary = np.array([f"w{i}" for i in range(2000)])
    chunks = []
    for start in range(0, rows, 100_000):
        n = min(100_000, rows - start)
        lengths = rng.integers(5, 41, size=n)
        words = vocabulary[rng.integers(0, len(vocabulary), size=int(lengths.sum()))]
        texts = [" ".join(part) for part in np.split(words, np.cumsum(lengths)[:-1])]
        labels = rng.choice(np.array(["positive", "negative", "neutral"]), size=n, p=[0.6, 0.3, 0.1])
        chunks.append(pa.table({"text": texts, "label": labels}))
    table = pa.concat_tables(chunks)
    if fmt == "csv":
        pacsv.write_csv(table, path)
    elif fmt == "jsonl":
        with open(path, "w", encoding="utf-8") as f:
            for text, label in zip(table.column("text").to_pylist(), table.column("label").to_pylist()):
                f.write(json.dumps({"text": text, "label": label}) + "\n")
    elif fmt == "parquet":
        pq.write_table(table, path, row_group_size=100_000)
    else:
        raise SystemExit(f"unknown format {fmt}")


def _rss_mb() -> float:
    """This process's peak resident memory (VmHWM). Not ru_maxrss: on Linux that keeps the high-water mark of
    the parent that forked this process, which here just built the file in memory."""
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmHWM:")) / 1024  # KiB


def measure(task: str, path: Path, user_dir: Path) -> dict:
    """One measurement in this process: 'register', 'load' (into a Dataset, as training does) or 'pandas'."""
    os.environ["ENGINE_USER_DIR"] = str(user_dir)
    import pandas  # noqa: F401  (libraries loaded before the baseline: their code is not the data's memory)
    import pyarrow as pa
    import pyarrow.compute  # noqa: F401
    import pyarrow.csv  # noqa: F401
    import pyarrow.parquet  # noqa: F401

    import engine.runtime  # noqa: F401  (imported before timing: code_version's import of torch is not the data's cost)
    from engine.data import get_dataset
    from engine.data.user import register_dataset

    baseline = _rss_mb()
    started = time.perf_counter()
    if task == "register":
        register_dataset("bench", path, "text", "label", overwrite=True)
    elif task == "load":
        dataset = get_dataset("bench")
        assert sum(len(v) for v in dataset.splits.values()) > 0
    elif task == "pandas":
        import pandas as pd

        frame = pd.read_csv(path) if path.suffix == ".csv" else pd.read_json(path, lines=True) if path.suffix == ".jsonl" \
            else pd.read_parquet(path)
        assert len(frame)
    seconds = time.perf_counter() - started
    return {"seconds": seconds, "peak_rss_above_baseline_mb": _rss_mb() - baseline, "baseline_rss_mb": baseline,
            "arrow_peak_mb": pa.default_memory_pool().max_memory() / 2**20}


def run_child(task: str, path: Path, user_dir: Path) -> dict:
    # the child measures this checkout's engine, whichever one is installed
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    out = subprocess.run([sys.executable, __file__, "--child", task, str(path), str(user_dir)], cwd=ROOT, env=env,
                         capture_output=True, text=True)
    if out.returncode:
        raise SystemExit(f"{task} of {path} failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", default="100000,1000000", help="comma-separated row counts. Default: 100000,1000000")
    parser.add_argument("--formats", default="csv,jsonl,parquet", help="comma-separated formats. Default: csv,jsonl,parquet")
    parser.add_argument("--load", action="store_true", help="also time loading into a Dataset (every text in memory)")
    parser.add_argument("--child", nargs=3, metavar=("TASK", "PATH", "USER_DIR"), help=argparse.SUPPRESS)
    parser.add_argument("--smoke", action="store_true", help="CI smoke mode: 2,000 rows of CSV, with --load")
    args = parser.parse_args()
    if args.smoke:
        args.rows, args.formats, args.load = "2000", "csv", True
    if args.child:
        print(json.dumps(measure(args.child[0], Path(args.child[1]), Path(args.child[2]))))
        return

    print(f"machine: {os.cpu_count()} cores; python {sys.version.split()[0]}")
    print("| rows | format | file MB | task | seconds | peak RSS above baseline MB | pyarrow peak MB |")
    print("|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        for rows in (int(r) for r in args.rows.split(",")):
            for fmt in args.formats.split(","):
                path = Path(tmp) / f"data-{rows}.{fmt}"
                make_file(path, rows, fmt)
                size = path.stat().st_size / 2**20
                tasks = ["register"] + (["load"] if args.load else []) + ["pandas"]
                for task in tasks:
                    r = run_child(task, path, Path(tmp) / "user")
                    name = {"register": "register (streamed)", "load": "load into a Dataset", "pandas": "reference: pandas reads it whole"}[task]
                    print(f"| {rows:,} | {fmt} | {size:.0f} | {name} | {r['seconds']:.2f} | {r['peak_rss_above_baseline_mb']:.0f} | "
                          f"{r['arrow_peak_mb']:.0f} |", flush=True)
                path.unlink()


if __name__ == "__main__":
    from engine.settings import offline

    offline()  # an entry point: no hub at run time (engine/settings.py)
    main()
