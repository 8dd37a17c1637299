"""Benchmark sweeps: recursive-masking curves for every cell (checkpoint x dataset x measure x seed),
written to the results store, resumable, on a local process pool or a Ray cluster.

A cell explains the gold label of every example of a split (as both papers do), masks recursively
by the measure, and records the dataset metric and MaSF p-values per step. The random baseline is
the measure `random` with the cell's seed. Cells already in the store are skipped, so an
interrupted sweep resumes where it stopped.
"""
from __future__ import annotations

import json
import logging
import os
import platform
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

import pandas as pd

from engine import settings
from engine.errors import InvalidInputError
from engine.results.store import schedule_columns
from engine.runtime import code_version

_log = logging.getLogger(__name__)

@dataclass(frozen=True)
class Cell:
    model: str  # checkpoint id in models_cache
    dataset: str
    measure: str
    seed: int
    split: str = "test"
    ratios: tuple[float, ...] = tuple(i / 10 for i in range(11))
    limit: int | None = None
    options: tuple[tuple[str, object], ...] = ()
    counts: tuple[int, ...] | None = None  # count mode (k tokens per input, e.g. 0..10) instead of ratios
    whole_words: bool = False  # mask whole words: the schedule counts words (a labelled variant of the schedule)
    masf: bool = True  # MaSF p-values per step; False skips the fit (its curves and RACU are the same, p-values NaN)

    def __post_init__(self):
        if self.counts is not None:
            if self.ratios:
                raise InvalidInputError("a cell masks by ratios or by counts, not both (give ratios=())")
            counts = list(self.counts)
            if not counts or counts[0] != 0 or counts[-1] < 1 or any(b <= a for a, b in zip(counts, counts[1:])):
                raise InvalidInputError(f"counts must start at 0, increase and reach at least 1, got {self.counts}")

    def key(self) -> dict:
        d = asdict(self)
        d["options"] = dict(self.options)
        if self.counts is None:
            del d["counts"]  # the key of a ratio cell stays what it was before count mode, so old runs resume
        if not self.whole_words:
            del d["whole_words"]  # likewise: token-level cells keep their keys
        if self.masf:
            del d["masf"]  # likewise: cells with MaSF keep their keys
        return d


@dataclass
class SweepReport:
    run: str
    done: list[dict] = field(default_factory=list)
    skipped: list[dict] = field(default_factory=list)
    failed: list[tuple[dict, str]] = field(default_factory=list)  # (cell key, one line naming the error and its traceback file)
    tracebacks: list[str] = field(default_factory=list)  # the full traceback of each failed cell, in the order of `failed`

    def fail(self, key: dict, err: BaseException, root: str | os.PathLike | None = None) -> None:
        """Record a failed cell with its full traceback: kept here, logged, and (with the store's root) written to
        <root>/<run>/failed/<cell key>.txt, so a sweep that runs on unattended keeps why each cell failed."""
        from engine.results.store import cell_key

        text = "".join(traceback.format_exception(err))
        self.tracebacks.append(text)
        message = f"{type(err).__name__}: {err}"
        if root is not None:
            folder = Path(root) / self.run / "failed"
            folder.mkdir(parents=True, exist_ok=True)
            path = folder / f"{cell_key(key)}.txt"
            path.write_text(json.dumps(key, sort_keys=True, default=str) + "\n\n" + text, encoding="utf-8")
            message += f" (traceback: {path})"
        _log.error("cell %s failed:\n%s", key, text)
        self.failed.append((key, message))


def run_cell(cell: Cell, results_dir: str | None = None, run: str = "default",
             progress: Callable[[int, int], None] | None = None, command: str | None = None) -> dict:
    """Compute one cell and write it to the store; returns the cell key. Runs in a worker process.
    progress(done, total): examples finished in this cell (called after each batch); command: the command
    line recorded in the cell's provenance (default: this function's name)."""
    from engine.data import get_dataset
    from engine.faithfulness.recursive import dataset_masking_curve
    from engine.importance import get_explainer
    from engine.models import load_classifier
    from engine.models.checkpoint import weights_sha256
    from engine.ood import load_or_fit_masf, masf_provenance
    from engine.results import ResultsStore
    from engine.runtime import configure, runtime_record, seed_everything

    configure()
    seed_everything(cell.seed)
    started = time.time()
    classifier = load_classifier(cell.model)
    meta = classifier.metadata
    # Calibrated on the cell's data, never another dataset's. A large LM's fit (a forward of the whole validation
    # split) can cost more than its curves on a small subset: `--no-masf` skips it.
    masf = load_or_fit_masf(classifier, cell.dataset) if cell.masf else None
    dataset = get_dataset(cell.dataset, meta.get("split_seed", 0))
    options = dict(cell.options)
    explainer = get_explainer(cell.measure, classifier, **({"seed": cell.seed} if cell.measure == "random" else {}), **options)
    # Cost (docs/methods.md#sanity-checks-and-cost): wall time and model rows of every explanation the curve needed.
    from engine.faithfulness.cost import CostMeter

    meter = CostMeter(classifier.model)
    explainer.attribute = meter.wrap(explainer.attribute)
    schedule = "count" if cell.counts is not None else "ratio"
    levels = list(cell.counts if cell.counts is not None else cell.ratios)
    rows = dataset_masking_curve(classifier, explainer, dataset, split=cell.split,
                                 ratios=None if cell.counts is not None else cell.ratios, counts=cell.counts, masf=masf,
                                 limit=cell.limit, progress=progress, whole_words=cell.whole_words)
    n_examples = len(dataset.split(cell.split)[: cell.limit])
    cost = meter.summary()  # per explanation = one attribute call on one input (a masking step of one example)
    tidy = pd.DataFrame([{
        "model": cell.model, "seed": cell.seed, "dataset": cell.dataset, "split": cell.split, "measure": cell.measure,
        "strategy": meta.get("strategy"), "step": r["step"],
        **schedule_columns(schedule, levels[r["step"]], levels[-1], cell.whole_words), "metric": r["metric"],
        "value": r["value"], "p_value": r.get("p_value_simes", float("nan")),
        "p_below_005": r.get("p_below_005", float("nan")),
        "mean_probability": r["mean_probability"], "base_model": meta.get("base_model"),
        # The examples the curve averages over (the first n of the split): the summary compares a measure only
        # with the random curve of the same examples, so a subset (beam) and the whole split share one run.
        "n_examples": n_examples, "seconds_per_explanation": cost["seconds_per_explanation"],
        "forward_rows_per_explanation": cost["forward_rows_per_explanation"],
        "backward_rows_per_explanation": cost["backward_rows_per_explanation"],
    } for r in rows])
    provenance = {
        "command": command or "engine.faithfulness.benchmark.run_cell",
        "code_version": code_version(), "checkpoint": cell.model,
        "checkpoint_sha256": weights_sha256(classifier.folder), "checkpoint_code_version": meta.get("code_version"),
        "measure_options": options, "target": "gold label", "split": cell.split,
        # A stored MaSF fit is reused across sweeps: record which code fitted it, when, and on what data.
        "masf": masf_provenance(masf),
        "n_examples": n_examples, "seconds": round(time.time() - started, 1), "cost": cost,
        "machine": f"{platform.machine()} {os.cpu_count()} cpus, {classifier.device}",
        "runtime": runtime_record(classifier.device),  # GPU, versions and determinism flags
        "model_runtime": classifier.runtime,  # dtype and attention kernel the numbers were computed with
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    ResultsStore(results_dir).write_cell(run, cell.key(), tidy, provenance)
    return cell.key()


#: The share of a GPU one Ray cell asks for: a cell's model, batches and MaSF features of the packaged models
#: take a few GiB, so several cells share a GPU instead of all loading onto cuda:0 while the others idle.
RAY_GPU_FRACTION = 0.25


def ray_task_options(cluster_gpus: float, fraction: float = RAY_GPU_FRACTION) -> dict:
    """Ray resources of one cell: a GPU fraction when the cluster has GPUs, none otherwise (CPU-only clusters).
    Ray then makes the assigned GPU the task's only visible one and gives a GPU task a fresh worker each time."""
    return {"num_gpus": fraction} if cluster_gpus and cluster_gpus > 0 else {}


def ray_device(gpu_ids: Sequence, visible: str | None) -> str:
    """The torch device of the GPU Ray assigned to this task: ids from `ray.get_gpu_ids()`, `visible` the task's
    CUDA_VISIBLE_DEVICES (which Ray sets to the assigned ids, so the first assigned GPU is usually cuda:0).
    'cpu' for a task given no GPU, so it never loads onto a GPU it did not ask for."""
    if not gpu_ids:
        return "cpu"
    first = str(gpu_ids[0])
    listed = [v.strip() for v in (visible or "").split(",") if v.strip()]
    return f"cuda:{listed.index(first)}" if first in listed else f"cuda:{first}"


def run_cell_on_ray(cell: Cell, results_dir: str | None = None, run: str = "default",
                    progress: Callable[[int, int], None] | None = None, command: str | None = None) -> dict:
    """`run_cell` in a Ray task, on the device Ray assigned to it (`ray_device`)."""
    import ray

    os.environ["ENGINE_DEVICE"] = ray_device(ray.get_gpu_ids(), os.environ.get("CUDA_VISIBLE_DEVICES"))
    return run_cell(cell, results_dir, run, progress, command)


def ensure_masf(pairs: Sequence[tuple[str, str | None]]) -> None:
    """Fit and store the MaSF of every (checkpoint, dataset) pair that has none calibrated on that dataset yet (a
    no-op for those that have one; dataset None: the checkpoint's own)."""
    from engine.errors import EngineError
    from engine.models import load_classifier
    from engine.ood import load_or_fit_masf

    for model, dataset in pairs:
        try:
            load_or_fit_masf(load_classifier(model), dataset)
        except EngineError:  # a missing or broken checkpoint, an unknown dataset, other labels: its cells fail and
            continue  # are reported one by one; anything else is a bug and stops the sweep with its traceback


def _paired_examples(cell: dict) -> tuple:
    """What makes two cells' curves comparable (a measure and its random baseline): the same checkpoint id
    masked on the same examples (split, limit) and levels."""
    return (cell.get("model"), cell.get("split", "test"), cell.get("limit"), tuple(cell.get("ratios") or ()),
            tuple(cell.get("counts") or ()))


def check_same_weights(store, run: str, cells: Sequence[Cell]) -> None:
    """Refuse, before any work, cells whose checkpoint's weights differ from those recorded by the run's cells
    they would be compared with.

    A run is built up over sessions and machines, and models_cache is not shipped: a checkpoint id retrained on
    another CPU keeps its test metrics but not its weights bit for bit (other vector kernels), so a new measure
    curve would be paired with a random curve of another model. Cells written before the weights were recorded
    cannot be checked and are let be. Raises ValueError naming both hashes."""
    from engine.models.checkpoint import model_folders, weights_sha256

    recorded: dict[tuple, set[str]] = {}
    for entry in store.provenance(run):
        sha = entry.get("provenance", {}).get("checkpoint_sha256")
        if sha:
            recorded.setdefault(_paired_examples(entry.get("cell", {})), set()).add(sha)
    current: dict[str, str | None] = {}
    for cell in cells:
        before = recorded.get(_paired_examples(cell.key()))
        if not before:
            continue
        if cell.model not in current:
            folder, _ = model_folders(cell.model)
            current[cell.model] = weights_sha256(folder) if folder.is_dir() else None
        now = current[cell.model]
        if now is not None and now not in before:
            raise InvalidInputError(
                f"run {run!r} holds cells of {cell.model} on these examples computed from other weights "
                f"(sha256 {', '.join(sorted(s[:12] for s in before))}; this checkpoint: {now[:12]}), e.g. retrained on "
                f"another machine: its curves would be compared with another model's. Use another --run, or "
                f"another --limit/--split for the new examples.")


def pending_cells(store, run: str, cells: Sequence, skipped: list) -> list:
    """The cells of `run` not yet in `store` (those there are appended to `skipped` as keys), after checking,
    before any work, that they come from the same weights as the run's cells they will be compared with."""
    todo = []
    for cell in cells:
        if store.has_cell(run, cell.key()):
            skipped.append(cell.key())
        else:
            todo.append(cell)
    check_same_weights(store, run, todo)
    return todo


def run_sweep(cells: Sequence[Cell], run: str = "default", results_dir: str | None = None, workers: int = 1,
              ray_address: str | None = None, progress: Callable[[int, int, dict], None] | None = None,
              cell_progress: Callable[[Cell, int, int], None] | None = None, command: str | None = None) -> SweepReport:
    """Run every cell not yet in the store. workers > 1: a local process pool; ray_address: Ray
    ('auto' or an address) with the same store (a shared folder).
    progress(i, total, key): after each cell; cell_progress(cell, examples done, examples total): within a cell,
    in the one-process path only (a cell of MiniLM on a whole split runs for up to an hour on a CPU)."""
    from engine.results import ResultsStore

    store = ResultsStore(results_dir)
    report = SweepReport(run=run)
    todo = pending_cells(store, run, cells, report.skipped)
    total = len(todo)

    def finished(i, key, error=None):
        if error is None:
            report.done.append(key)
        else:
            report.fail(key, error, store.root)
        if progress is not None:
            progress(i, total, key)

    if ray_address is not None and todo:
        import ray  # optional dependency: pip install ray

        ray.init(address=None if ray_address == "local" else ray_address, ignore_reinit_error=True)
        options = ray_task_options(ray.cluster_resources().get("GPU", 0))
        remote = ray.remote(**options)(run_cell_on_ray) if options else ray.remote(run_cell_on_ray)
        refs = {remote.remote(cell, str(store.root), run, None, command): cell for cell in todo}
        pending, i = list(refs), 0
        while pending:
            ready, pending = ray.wait(pending, num_returns=1)
            i += 1
            try:
                finished(i, ray.get(ready[0]))
            except Exception as err:  # a failed cell is reported; the others go on
                finished(i, refs[ready[0]].key(), err)
    elif workers > 1:
        import multiprocessing as mp
        from concurrent.futures import ProcessPoolExecutor, as_completed

        # Workers share the cores: each takes its part instead of every worker taking all cores.
        settings.set_threads_for_workers(workers)
        # Fit each (checkpoint, dataset) MaSF once, here, instead of in every worker that starts a cell of it at once.
        ensure_masf(sorted({(cell.model, cell.dataset) for cell in todo if cell.masf}))
        with ProcessPoolExecutor(max_workers=workers, mp_context=mp.get_context("spawn")) as pool:
            futures = {pool.submit(run_cell, cell, str(store.root), run, None, command): cell for cell in todo}
            for i, fut in enumerate(as_completed(futures), 1):
                try:
                    finished(i, fut.result())
                except Exception as err:
                    finished(i, futures[fut].key(), err)
    else:
        for i, cell in enumerate(todo, 1):
            within = None if cell_progress is None else (lambda done, n, _cell=cell: cell_progress(_cell, done, n))
            try:
                finished(i, run_cell(cell, str(store.root), run, progress=within, command=command))
            except Exception as err:
                finished(i, cell.key(), err)
    return report
