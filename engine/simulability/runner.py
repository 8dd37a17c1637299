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

Rows (tidy, one per value): metric "simulation accuracy" (test, step = the best epoch), "validation simulation
accuracy" (per epoch), "head weight" (SMaT: lambda per layer/head at each snapshot step), "sentence AUC"
(bAbI). The store's columns plus student, budget, beta, layer, head, split.
"""
from __future__ import annotations

import os
import platform
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field

import numpy as np
import pandas as pd
import torch

from engine import settings
from engine.errors import InvalidInputError
from engine.simulability.explainers import EXPLAINERS, MEASURE_EXPLAINERS, check_explainer, head_weighted
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


@dataclass
class SimulabilityReport:
    run: str
    done: list[dict] = field(default_factory=list)
    skipped: list[dict] = field(default_factory=list)
    seconds: float = 0.0


def _pool_subset(pool_size: int, budget: int, seed: int) -> np.ndarray:
    """The budget examples of a seed: the first `budget` of a seeded permutation of the pool (nested)."""
    if budget > pool_size:
        raise InvalidInputError(f"budget {budget} exceeds the {pool_size} training examples available")
    return np.random.default_rng(seed).permutation(pool_size)[:budget]


def _base_row(cell: SimulabilityCell, strategy, beta: float) -> dict:
    return {"model": cell.teacher, "seed": cell.seed, "dataset": cell.dataset, "measure": cell.explainer,
            "strategy": strategy, "ratio": float("nan"), "p_value": float("nan"), "student": cell.student,
            "budget": cell.budget, "beta": beta, "method": METHOD, "layer": -1, "head": -1}


def run_simulability(teacher: str, student: str = "tiny", dataset: str | None = None,
                     budgets: Sequence[int] = (250, 500, 1000), seeds: Sequence[int] = (0, 1, 2),
                     explainers: Sequence[str] = DEFAULT_EXPLAINERS, run: str | None = None,
                     results_dir: str | None = None, config: StudentConfig | None = None,
                     validation_limit: int | None = 500, test_limit: int | None = None, pool_size: int | None = None,
                     plausibility_limit: int = 200, command: str = "engine.simulability.runner.run_simulability",
                     save_head_weights: bool = True, progress: Callable[[int, int], None] | None = None,
                     status: Callable[[str], None] | None = None,
                     should_stop: Callable[[], bool] | None = None) -> SimulabilityReport:
    """Run every cell of budgets x seeds x explainers that the store does not hold yet.

    teacher: a checkpoint id or folder (engine.models.load_classifier); student: an encoder key or folder
    (engine.models.resolve_encoder) sharing the teacher's vocabulary; dataset: default the teacher's.
    pool_size: training examples the budgets are drawn from (default 2 x the largest budget).
    progress(done, total): student steps (a run that stops early counts its remaining steps as done);
    status(text): what is being computed (precomputation, the current cell). Raises SimulabilityCancelled
    when should_stop() turns True (finished cells stay)."""
    from engine.data import get_dataset
    from engine.models import load_classifier, resolve_encoder
    from engine.models.checkpoint import weights_sha256
    from engine.models.loading import check_weights
    from engine.runtime import code_version, configure, seed_everything
    from engine.simulability.learned import should_replace, write_head_weights
    from engine.simulability.plausibility import sentence_auc, sentence_table
    from engine.simulability.student import new_student
    from engine.simulability.teacher import check_shared_vocabulary, precompute

    started = time.time()
    configure()
    config = config or StudentConfig()
    explainers = [check_explainer(e) for e in explainers]
    budgets = sorted({int(b) for b in budgets})
    if not budgets or budgets[0] < 1:
        raise InvalidInputError(f"budgets must be positive numbers of training examples, got {list(budgets)}")
    classifier = load_classifier(teacher)
    for p in classifier.model.parameters():
        p.requires_grad_(False)  # the teacher is frozen: nothing may ever update it
    meta = classifier.metadata
    dataset_name = dataset or meta["dataset"]
    data = get_dataset(dataset_name, meta.get("split_seed", 0))
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

    cells = [SimulabilityCell(classifier.id, dataset_name, student, e, b, s, validation_limit, test_limit, config_items,
                              pool_size) for s in seeds for b in budgets for e in explainers]
    report = SimulabilityReport(run=run)
    todo = []
    for cell in cells:
        (report.skipped if store.has_cell(run, cell.key()) else todo).append(cell)
    if plausibility_limit < 0:
        raise InvalidInputError(f"plausibility_limit must be >= 0, got {plausibility_limit}")
    # 0 stories: no plausibility at all (the split's first stories would otherwise be an empty batch)
    has_rationales = plausibility_limit > 0 and any(e.rationale_spans for e in data.split("test")[:10])
    heads_cell = SimulabilityCell(classifier.id, dataset_name, student, SINGLE_HEADS, 0, 0, None, plausibility_limit, ())
    need_heads_cell = has_rationales and not store.has_cell(run, heads_cell.key())
    if not todo and not need_heads_cell:
        report.seconds = round(time.time() - started, 1)
        return report

    def say(text):
        if status is not None:
            status(text)

    total = sum(max_steps(c.budget, config) for c in todo)
    done_steps = 0

    def step_done(n):
        nonlocal done_steps
        done_steps += n
        if progress is not None:
            progress(min(done_steps, total), total)

    # -- the frozen teacher, once --------------------------------------------------------------------------
    static = sorted({c.explainer for c in todo} - {"none", "smat"})
    learn = any(c.explainer == "smat" for c in todo)
    say(f"teacher {classifier.id}: predictions, head scores and {', '.join(static) or 'no'} explanations "
        f"of {pool_size} training examples")
    teacher_started = time.time()
    pool = precompute(classifier, train_split[:pool_size], static, head_scores=learn, should_stop=should_stop)
    validation = precompute(classifier, data.split("validation")[:validation_limit], should_stop=should_stop)
    test = precompute(classifier, data.split("test")[:test_limit], should_stop=should_stop)
    plausible = None
    if has_rationales:
        say(f"teacher {classifier.id}: explanations of {plausibility_limit} test stories for plausibility")
        shown = [e for e in data.split("test") if e.rationale_spans][:plausibility_limit]
        plausible = precompute(classifier, shown, sorted(set(static) | {"attention-all", "attention-last"}),
                               head_scores=True, should_stop=should_stop)
        table = sentence_table(classifier.batch_of(shown).to("cpu"), shown)
    teacher_seconds = round(time.time() - teacher_started, 1)
    sha = weights_sha256(classifier.folder)

    def provenance(cell_started: float, extra: dict) -> dict:
        return {"command": command, "code_version": code_version(), "checkpoint": classifier.id,
                "checkpoint_sha256": sha, "checkpoint_code_version": meta.get("code_version"),
                "student_source": source, "teacher_precompute_seconds": teacher_seconds,
                "n_validation": len(validation), "n_test": len(test), "pool_size": pool_size,
                "seconds": round(time.time() - cell_started, 1), "torch_threads": torch.get_num_threads(),
                "machine": f"{platform.machine()} {os.cpu_count()} cpus, {classifier.device}",
                "model_runtime": classifier.runtime,
                "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), **extra}

    layers = heads = 0
    if plausible is not None or learn:
        from engine.simulability.head_scores import head_count

        layers, heads = head_count(classifier.model)

    if need_heads_cell:
        cell_started = time.time()
        rows = []
        for h in range(layers * heads):
            one = torch.zeros(layers * heads)
            one[h] = 1.0
            auc = sentence_auc(head_weighted(plausible.teacher_scores, one, plausible.attention_mask), table)
            rows.append({**_base_row(heads_cell, meta.get("strategy"), 0.0), "step": 0, "metric": "sentence AUC",
                         "split": "test", "value": auc, "layer": h // heads, "head": h % heads})
        store.write_cell(run, heads_cell.key(), pd.DataFrame(rows),
                         provenance(cell_started, {"n_plausibility": len(plausible)}))

    for i, cell in enumerate(todo, 1):
        say(f"cell {i}/{len(todo)}: {cell.explainer}, budget {cell.budget}, seed {cell.seed}")
        cell_started = time.time()
        seed_everything(cell.seed)
        model = new_student(source, classifier.num_classes, cell.seed)
        train = pool.rows(_pool_subset(pool_size, cell.budget, cell.seed))
        beta = config.beta_for(cell.explainer)
        result = train_student(model, train, validation, cell.explainer, config, cell.seed, progress=step_done,
                               should_stop=should_stop)
        accuracy = simulation_accuracy(model, test, config.eval_batch_size)
        base = _base_row(cell, meta.get("strategy"), beta)
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
        if plausible is not None and cell.explainer != "none":
            if cell.explainer == "smat":
                dist = head_weighted(plausible.teacher_scores, learned.detach().float(), plausible.attention_mask)
            else:
                dist = plausible.explanations.get(cell.explainer)
            if dist is not None:
                rows.append({**base, "step": 0, "metric": "sentence AUC", "split": "test", "value": sentence_auc(dist, table)})
        store.write_cell(run, cell.key(), pd.DataFrame(rows), provenance(cell_started, extra))
        if learned is not None and save_head_weights and should_replace(classifier.folder, cell.budget, cell.seed,
                                                                         dataset_name):
            write_head_weights(classifier.folder, learned.tolist(), result.teacher_phi.tolist(), layers, heads,
                               {"run": run, "dataset": dataset_name, "student": student, "budget": cell.budget,
                                "seed": cell.seed, "best_epoch": result.best_epoch, "checkpoint_sha256": sha,
                                "code_version": code_version(), "command": command,
                                "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())})
        report.done.append(cell.key())
    report.seconds = round(time.time() - started, 1)
    return report


__all__ = ["DEFAULT_EXPLAINERS", "EXPLAINERS", "MEASURE_EXPLAINERS", "SimulabilityCell", "SimulabilityReport",
           "run_simulability", "simulability_store"]
