"""Simulability runs: one cell per (teacher, dataset, student, explainer, budget, seed) in the results store
under `<results>/simulability/<run>/cells/`, with provenance; resumable (finished cells are skipped),
cancellable, with step-level progress. The frozen teacher's predictions, head scores and static explanations
are computed once per call for every example any cell needs.

Data: the student trains on `budget` examples drawn (per seed, nested across budgets) from a pool of the
first `pool_size` examples of the training split (default 2 x the largest budget; part of each cell's key, so
calls with other pools never resume each other's cells), labelled with the teacher's predictions; it is
validated (early stopping, and SMaT's outer loss) on the first `validation_limit` examples of the validation
split, and its simulation accuracy is measured on the test split (first `test_limit`). On datasets with
rationales (bAbI), the teacher explainers' plausibility is measured on the first `plausibility_limit` test
stories (sentence-level AUC against the supporting facts), also for every single head.

The cells run on engine.sweeps (in this process, on a local process pool or on a Ray cluster; the same bits
whatever the back end): the driver precomputes the teacher and sends each cell its own training examples (the
budget's rows of the pool) with the shared validation, test and plausibility data; the cell trains its student
and returns its rows; the driver writes them, and stores SMaT's learned head weights beside the checkpoint.

Rows (tidy, one per value): metric "simulation accuracy" (test, step = the best epoch), "validation simulation
accuracy" (per epoch), "head weight" (SMaT: lambda per layer/head at each snapshot step), "sentence AUC"
(bAbI). The store's columns plus student, budget, beta, layer, head, split.
"""
from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, replace

import numpy as np
import pandas as pd
import torch

import engine.settings as settings
from engine.errors import InvalidInputError
from engine.importance.head_scores import head_weighted
from engine.simulability.explainers import EXPLAINERS, MEASURE_EXPLAINERS, check_explainer
from engine.simulability.training import StudentConfig, max_steps, simulation_accuracy, train_student

METHOD = "simulability"
SINGLE_HEADS = "single heads"  # the measure name of the cell holding every head's own plausibility
DEFAULT_EXPLAINERS = ("none", "grad-l2", "x-grad-sign", "ig-sign", "attention-all", "attention-last", "smat")


def simulability_store(results_dir: str | os.PathLike | None = None):
    """The results store of simulability runs (a sub-folder, so the Benchmarks page never mixes them in)."""
    from pathlib import Path

    from engine.results import ResultsStore

    root = Path(results_dir) if results_dir is not None else settings.results_dir()
    return ResultsStore(root / "simulability")


@dataclass(frozen=True)
class SimulabilityCell:
    teacher: str
    dataset: str
    student: str
    explainer: str
    budget: int
    seed: int
    validation_limit: int | None
    test_limit: int | None
    config: tuple[tuple[str, object], ...] = ()
    pool_size: int = 0

    def key(self) -> dict:
        d = asdict(self)
        d["model"] = d.pop("teacher")
        d["measure"] = d.pop("explainer")
        d["config"] = dict(self.config)
        d["method"] = METHOD
        return d


def _pool_subset(pool_size: int, budget: int, seed: int) -> np.ndarray:
    """The budget examples of a seed: the first `budget` of a seeded permutation of the pool (nested)."""
    if budget > pool_size:
        raise InvalidInputError(f"budget {budget} exceeds the {pool_size} training examples available")
    return np.random.default_rng(seed).permutation(pool_size)[:budget]


def _base_row(cell: SimulabilityCell, strategy, beta: float) -> dict:
    return {"model": cell.teacher, "seed": cell.seed, "dataset": cell.dataset, "measure": cell.explainer,
            "strategy": strategy, "ratio": float("nan"), "p_value": float("nan"), "student": cell.student,
            "budget": cell.budget, "beta": beta, "method": METHOD, "layer": -1, "head": -1}


@dataclass
class TeacherView:
    """What every cell of one call needs from the frozen teacher, computed once by the driver (CPU tensors, so it
    pickles to workers). validation / test: SimSplits without head scores; plausible: the stories whose sentence
    AUC is measured (head scores and static explanations) with their sentence `table`, or None."""

    teacher: str
    dataset: str
    student: str
    source: str
    num_classes: int
    strategy: str | None
    config: StudentConfig
    validation: object
    test: object
    plausible: object | None
    table: list | None
    layers: int
    heads: int
    record: dict = field(default_factory=dict)  # checkpoint fields of every cell's provenance


@dataclass(frozen=True, eq=False)
class SimulabilityTask:
    """A SimulabilityCell with its share of the teacher's precomputation: `train`, the budget's examples of the
    pool (only the explanation the cell uses, head scores only for smat). key(): the cell's."""

    cell: SimulabilityCell
    view: TeacherView
    train: object | None = None

    def key(self) -> dict:
        return self.cell.key()


def _provenance(task: SimulabilityTask, context, started: float, extra: dict) -> dict:
    from engine.sweeps import provenance

    record = provenance(getattr(context, "command", None) or "engine.simulability.runner.run_simulability", started,
                        torch_threads=torch.get_num_threads(), **extra)
    # The teacher is not loaded where the cell runs, so its checkpoint fields (hash, code version, runtime) come
    # from the driver, which had it loaded.
    return {**record, **task.view.record}


def compute_simulability_cell(task: SimulabilityTask, context=None):
    """One student (engine.sweeps' compute function): trained on the cell's budget with its explainer, its
    simulation accuracy on the test split, its validation curve, SMaT's head weights, and the sentence AUC of the
    explainer on bAbI. The SINGLE_HEADS cell: every teacher head's own sentence AUC."""
    from engine.runtime import configure, seed_everything
    from engine.simulability.plausibility import sentence_auc
    from engine.simulability.student import new_student
    from engine.sweeps import CellResult

    configure()
    started = time.time()
    cell, view = task.cell, task.view
    layers, heads, plausible = view.layers, view.heads, view.plausible
    if cell.explainer == SINGLE_HEADS:
        rows = []
        for h in range(layers * heads):
            one = torch.zeros(layers * heads)
            one[h] = 1.0
            auc = sentence_auc(head_weighted(plausible.teacher_scores, one, plausible.attention_mask), view.table)
            rows.append({**_base_row(cell, view.strategy, 0.0), "step": 0, "metric": "sentence AUC", "split": "test",
                         "value": auc, "layer": h // heads, "head": h % heads})
        return CellResult(pd.DataFrame(rows), _provenance(task, context, started, {"n_plausibility": len(plausible)}))
    config = view.config
    progress = getattr(context, "progress", None)
    total = max_steps(cell.budget, config)
    done = [0]

    def step_done(n):
        done[0] += n
        if progress is not None:
            progress(min(done[0], total), total)

    seed_everything(cell.seed)
    model = new_student(view.source, view.num_classes, cell.seed)
    beta = config.beta_for(cell.explainer)
    result = train_student(model, task.train, view.validation, cell.explainer, config, cell.seed, progress=step_done,
                           should_stop=getattr(context, "should_stop", None))
    accuracy = simulation_accuracy(model, view.test, config.eval_batch_size)
    base = _base_row(cell, view.strategy, beta)
    rows = [{**base, "step": result.best_epoch, "metric": "simulation accuracy", "split": "test", "value": accuracy}]
    rows += [{**base, "step": h["epoch"], "metric": "validation simulation accuracy", "split": "validation",
              "value": h["validation_simulability"]} for h in result.history]
    for step, weights in result.head_weights:
        rows += [{**base, "step": step, "metric": "head weight", "split": "train", "value": w,
                  "layer": h // heads, "head": h % heads} for h, w in enumerate(weights)]
    extra = {"best_epoch": result.best_epoch, "best_validation": result.best_validation, "steps": result.steps,
             "epochs": len(result.history), "beta": beta, "student_device": result.device}
    learned = result.teacher_weights
    if learned is not None:
        rows += [{**base, "step": -1, "metric": "learned head weight", "split": "train", "value": float(w),
                  "layer": h // heads, "head": h % heads} for h, w in enumerate(learned.tolist())]
        extra["heads_kept"] = int((learned > 0).sum())
        extra["learned_phi"] = result.teacher_phi.tolist()  # the driver stores the explainer beside the checkpoint
    if plausible is not None and cell.explainer != "none":
        if cell.explainer == "smat":
            dist = head_weighted(plausible.teacher_scores, learned.detach().float(), plausible.attention_mask)
        else:
            dist = plausible.explanations.get(cell.explainer)
        if dist is not None:
            rows.append({**base, "step": 0, "metric": "sentence AUC", "split": "test", "value": sentence_auc(dist, view.table)})
    return CellResult(pd.DataFrame(rows), _provenance(task, context, started, extra))


def _train_rows(pool, cell: SimulabilityCell, pool_size: int):
    """The cell's training examples: its budget's rows of the pool, with only what its explainer reads."""
    train = pool.rows(_pool_subset(pool_size, cell.budget, cell.seed))
    keep = {k: v for k, v in train.explanations.items() if k == cell.explainer}
    return replace(train, explanations=keep, teacher_scores=train.teacher_scores if cell.explainer == "smat" else None)


def run_simulability(teacher: str, student: str = "tiny", dataset: str | None = None,
                     budgets: Sequence[int] = (250, 500, 1000), seeds: Sequence[int] = (0, 1, 2),
                     explainers: Sequence[str] = DEFAULT_EXPLAINERS, run: str | None = None,
                     results_dir: str | None = None, config: StudentConfig | None = None,
                     validation_limit: int | None = 500, test_limit: int | None = None, pool_size: int | None = None,
                     plausibility_limit: int = 200, command: str = "engine.simulability.runner.run_simulability",
                     save_head_weights: bool = True, progress: Callable[[int, int], None] | None = None,
                     status: Callable[[str], None] | None = None,
                     should_stop: Callable[[], bool] | None = None, workers: int = 1, ray: str | None = None):
    """Run every cell of budgets x seeds x explainers that the store does not hold yet, on the back end `workers`
    / `ray` ask for (engine.sweeps.Backend.from_options). Returns the engine.sweeps.SweepReport.

    teacher: a checkpoint id or folder (engine.models.load_classifier); student: an encoder key or folder
    (engine.models.resolve_encoder) sharing the teacher's vocabulary; dataset: default the teacher's.
    pool_size: training examples the budgets are drawn from (default 2 x the largest budget).
    progress(done, total): student steps (a run that stops early counts its remaining steps as done; within a
    cell in this process only, else per finished cell); status(text): what is being computed. Raises
    SimulabilityCancelled when should_stop() turns True (finished cells stay; polled in this process only)."""
    from engine.data import get_dataset
    from engine.models import load_classifier, resolve_encoder
    from engine.models.loading import check_weights
    from engine.runtime import configure
    from engine.simulability.plausibility import sentence_table
    from engine.simulability.teacher import check_shared_vocabulary, precompute
    from engine.sweeps import Backend, SweepReport, pending_cells, run_cells

    configure()
    config = config or StudentConfig()
    explainers = [check_explainer(e) for e in explainers]
    budgets = sorted({int(b) for b in budgets})
    if not budgets or budgets[0] < 1:
        raise InvalidInputError(f"budgets must be positive numbers of training examples, got {list(budgets)}")
    classifier = load_classifier(teacher)
    for p in classifier.model.parameters():
        p.requires_grad_(False)  # the teacher is frozen: nothing may ever update it
    meta = classifier.meta
    dataset_name = dataset or meta.dataset
    data = get_dataset(dataset_name, meta.split_seed)
    data = classifier.check_dataset(data)
    source = resolve_encoder(student)
    check_weights(source)  # a student folder with pickled weights only is refused now, not after the teacher's work
    check_shared_vocabulary(classifier, source)
    run = run or f"{classifier.id}-{dataset_name}"
    store = simulability_store(results_dir)
    config_items = tuple(sorted(asdict(config).items()))
    train_split = data.split("train")
    pool_size = min(len(train_split), int(pool_size or 2 * budgets[-1]))
    if budgets[-1] > pool_size:
        raise InvalidInputError(f"budget {budgets[-1]} exceeds the pool of {pool_size} training examples")
    if plausibility_limit < 0:
        raise InvalidInputError(f"plausibility_limit must be >= 0, got {plausibility_limit}")

    cells = [SimulabilityCell(classifier.id, dataset_name, student, e, b, s, validation_limit, test_limit, config_items,
                              pool_size) for s in seeds for b in budgets for e in explainers]
    # 0 stories: no plausibility at all (the split's first stories would otherwise be an empty batch)
    has_rationales = plausibility_limit > 0 and any(e.rationale_spans for e in data.split("test")[:10])
    if has_rationales:
        cells.append(SimulabilityCell(classifier.id, dataset_name, student, SINGLE_HEADS, 0, 0, None,
                                      plausibility_limit, ()))
    report = SweepReport(run=run)
    todo = pending_cells(store, run, cells, report.skipped, check_weights=False)
    if not todo:
        return report

    def say(text):
        if status is not None:
            status(text)

    students = [c for c in todo if c.explainer != SINGLE_HEADS]
    steps = {id(c): max_steps(c.budget, config) for c in students}
    total = sum(steps.values())
    finished = [0]

    # -- the frozen teacher, once --------------------------------------------------------------------------
    static = sorted({c.explainer for c in students} - {"none", "smat"})
    learn = any(c.explainer == "smat" for c in students)
    say(f"teacher {classifier.id}: predictions, head scores and {', '.join(static) or 'no'} explanations "
        f"of {pool_size} training examples")
    teacher_started = time.time()
    pool = precompute(classifier, train_split[:pool_size], static, head_scores=learn, should_stop=should_stop)
    validation = precompute(classifier, data.split("validation")[:validation_limit], should_stop=should_stop)
    test = precompute(classifier, data.split("test")[:test_limit], should_stop=should_stop)
    plausible = table = None
    if has_rationales:
        say(f"teacher {classifier.id}: explanations of {plausibility_limit} test stories for plausibility")
        shown = [e for e in data.split("test") if e.rationale_spans][:plausibility_limit]
        plausible = precompute(classifier, shown, sorted(set(static) | {"attention-all", "attention-last"}),
                               head_scores=True, should_stop=should_stop)
        table = sentence_table(classifier.batch_of(shown).to("cpu"), shown)
    sha = classifier.weights_sha256
    layers = heads = 0
    if plausible is not None or learn:
        from engine.importance.head_scores import head_count

        layers, heads = head_count(classifier.model)
    view = TeacherView(
        teacher=classifier.id, dataset=dataset_name, student=student, source=source,
        num_classes=classifier.num_classes, strategy=meta.strategy, config=config, validation=validation,
        test=test, plausible=plausible, table=table, layers=layers, heads=heads,
        record={"checkpoint": classifier.id, "checkpoint_sha256": sha, "checkpoint_code_version": meta.code_version,
                "model_runtime": classifier.runtime, "student_source": source,
                "teacher_precompute_seconds": round(time.time() - teacher_started, 1),
                "n_validation": len(validation), "n_test": len(test), "pool_size": pool_size})
    tasks = [SimulabilityTask(c, view, None if c.explainer == SINGLE_HEADS else _train_rows(pool, c, pool_size))
             for c in todo]
    by_key = {_text(t.key()): t.cell for t in tasks}

    def within(task, done, n):
        if progress is not None:
            progress(min(finished[0] + done, total), total)

    def cell_done(i, n, key):
        cell = by_key[_text(key)]
        finished[0] += steps.get(id(cell), 0)
        if progress is not None:
            progress(min(finished[0], total), total)
        if i < n:
            say(f"cell {i}/{n} done: {cell.explainer}, budget {cell.budget}, seed {cell.seed}")

    result = run_cells(tasks, compute_simulability_cell, store, run, backend=Backend.from_options(workers, ray),
                       command=command, progress=cell_done, cell_progress=within, should_stop=should_stop,
                       check_weights=False)
    for name in ("done", "failed", "tracebacks", "retried"):
        getattr(report, name).extend(getattr(result, name))
    report.backend = result.backend
    if save_head_weights:
        _store_head_weights(store, run, result.done, view, classifier.folder, command)
    return report


def _store_head_weights(store, run: str, done: list[dict], view: TeacherView, folder, command: str) -> None:
    """SMaT's learned head weights of this call's cells beside the teacher's checkpoint (the `smat` measure reads
    them), written by the driver: the largest budget, then the smallest seed, wins (should_replace), whatever order
    the workers finished in."""
    import json

    from engine.importance.head_weights import should_replace, write_head_weights
    from engine.results.store import cell_key
    from engine.sweeps import provenance

    learned = sorted((k for k in done if k["measure"] == "smat"), key=lambda k: (k["budget"], -k["seed"]))
    rows = store.load(run) if learned else None
    for key in learned:
        if not should_replace(folder, key["budget"], key["seed"], view.dataset):
            continue
        record = json.loads((store.root / run / "cells" / f"{cell_key(key)}.json").read_text(encoding="utf-8"))
        record = record["provenance"]
        weights = rows[(rows["measure"] == "smat") & (rows["budget"] == key["budget"]) & (rows["seed"] == key["seed"])
                       & (rows["metric"] == "learned head weight")].sort_values(["layer", "head"])["value"]
        # The one provenance record; its `seconds` are those of the cell that learned the weights.
        write_head_weights(folder, weights.tolist(), record["learned_phi"], view.layers, view.heads, provenance(
            command, time.time() - float(record.get("seconds") or 0), checkpoint_sha256=view.record["checkpoint_sha256"],
            run=run, dataset=view.dataset, student=view.student, budget=key["budget"], seed=key["seed"],
            best_epoch=record["best_epoch"]))


def _text(key: dict) -> str:
    import json

    return json.dumps(key, sort_keys=True, default=str)


__all__ = ["DEFAULT_EXPLAINERS", "EXPLAINERS", "MEASURE_EXPLAINERS", "SimulabilityCell", "TeacherView",
           "compute_simulability_cell", "run_simulability", "simulability_store"]
