"""The report card: a sweep (engine.sweeps) that scores every importance measure, faithfulness metric and masking
operator against the truth of a planted model (docs/ground-truth.md).

A card runs in three steps, each in a module of its own:

    plan     engine.groundtruth.card_plan: per model, what its cells share, resolved once (the model, its planted
             spec, weights hash, truth by intervention, operators' classifiers, self-explanation kinds)
    cells    engine.groundtruth.card_cells: the cells the card has (truth, measure x operator, self-explanations,
             interactions) and their keys; engine.groundtruth.card_compute computes each from the plan
    run      here: the cells as one resumable sweep into `<results>/groundtruth/<run>/cells/` (the ResultsStore format)

Its options are one `CardConfig` (engine.groundtruth.card_config).
"""
from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path

import engine.settings as settings
from engine.groundtruth.card_cells import card_cells
from engine.groundtruth.card_compute import compute_cell
from engine.groundtruth.card_config import CardConfig
from engine.groundtruth.card_plan import CardPlan, plan_card
from engine.sweeps import Backend, SweepReport, run_cells


def card_store(results_dir: str | os.PathLike | None = None):
    """The ResultsStore of report cards: `<results>/groundtruth`."""
    from engine.results import ResultsStore

    return ResultsStore(Path(results_dir) if results_dir is not None else settings.results_dir() / "groundtruth")


def run_report_card(models: Sequence[str | CardPlan] | str, config: CardConfig | None = None, *, run: str = "default",
                    results_dir: str | os.PathLike | None = None, backend: Backend | None = None,
                    command: str = "engine.groundtruth.run_report_card",
                    progress: Callable[[int, int, dict], None] | None = None,
                    cell_progress: Callable[[object, int, int], None] | None = None,
                    should_stop: Callable[[], bool] | None = None, **options) -> SweepReport:
    """Run the report card of one or more planted models as a resumable sweep into `<results>/groundtruth/<run>`.

    Args:
        models: planted checkpoint id(s), each planned first (loaded, checked learned and supporting the operators)
            so that a card that cannot run is refused before any cell does, or their plans made with `config`.
        config: the card's options (CardConfig; default: its defaults). options: CardConfig fields replacing
            config's, e.g. `run_report_card(model, run="r", measures=("loo-sign",), limit=50)`.
        run: the run folder; results_dir: the store's root (default `<results>/groundtruth`).
        backend: engine.sweeps.Backend (default: this process, where the cells are handed the plans built here;
            a pool's or Ray's workers build each model's plan once each).
        command, progress, cell_progress, should_stop: as engine.sweeps.run_cells.

    Returns:
        The SweepReport (cells done, skipped, failed).

    Raises:
        MechanismNotLearned: a model did not learn its mechanism (the message gives its flip rate).
        InvalidInputError, NotApplicableError: as engine.groundtruth.card_plan.plan_card and card_cells.
    """
    config = CardConfig.of(config, **options)
    models = [models] if isinstance(models, str) else list(models)
    plans, cells = [], []
    for model in models:
        plan = model if isinstance(model, CardPlan) else plan_card(model, config)
        plans.append(plan)
        cells += card_cells(plan, config)
    in_process = backend is None or backend.kind == "process"
    # plans hold loaded models: handed to the cells in this process, never sent to a worker
    compute = partial(compute_cell, plans={plan.model: plan for plan in plans}) if in_process else compute_cell
    return run_cells(cells, compute, card_store(results_dir), run, backend=backend, command=command,
                     progress=progress, cell_progress=cell_progress, should_stop=should_stop)


__all__ = ["card_store", "run_report_card"]
