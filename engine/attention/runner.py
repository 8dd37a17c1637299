"""`python -m engine attention`: all four W&P diagnostics for one dataset, as cells of the results store under
`<results>/attention/<run>/cells/` (engine.sweeps: in this process, on a local process pool or on Ray; resumable).

The sweep runs in three waves, each a set of independent cells, because later cells need what earlier ones
trained (models are shared through models_cache, never trained twice at once):

1. `base` (the seed-0 BiLSTM: trained or loaded, its test metrics) and `uniform` (the same model with attention
   frozen to 1/n);
2. `seed variance` (one cell per other seed: that model trained or loaded, JSD of its attention and TVD of its
   predictions to the base model's, per test instance), `adversary` (one per lambda, saved in models_cache) and
   `guided mlp` with the uniform, trained and base-LSTM guides;
3. `guided mlp` guided by the best adversary (W&P Table 4's rule, `best_adversary`), whose lambda is part of the
   cell's key.

engine.attention.results reads the cells back as W&P's summary, seed-variance and adversary tables (and still
reads runs written before, as `<dataset>_summary.json` with two parquet files).
"""
from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass

import pandas as pd

from engine.errors import InvalidInputError

METHOD = "attention diagnostics"
BASE, UNIFORM, SEED_VARIANCE, ADVERSARY, GUIDED_MLP = "base", "uniform", "seed variance", "adversary", "guided mlp"
GUIDES = ("uniform", "trained", "base_lstm", "adversary")  # W&P Table 3's rows, in their order
JSD_THRESHOLD = 0.4  # W&P Table 4 keeps adversaries whose attention moved this far (mean JSD, natural log)


def attention_store(results_dir=None):
    """The ResultsStore of the attention diagnostics: `<results>/attention` (a sub-folder, so the Benchmarks page
    never mixes them in)."""
    from pathlib import Path

    from engine.results import ResultsStore, default_results_dir

    return ResultsStore(Path(results_dir or default_results_dir()) / "attention")


@dataclass(frozen=True)
class AttentionCell:
    """One diagnostic of one dataset. part: base, uniform, seed variance (`seed`: the other model's), adversary
    (`lam`), guided mlp (`guide`; with the adversary guide, `lam` names the adversary)."""

    dataset: str
    part: str
    seed: int = 0
    lam: float | None = None
    guide: str | None = None
    epochs: int = 6
    adversary_epochs: int = 3
    mlp_epochs: int = 4

    def config(self, seed: int | None = None, attention: str = "additive"):
        """The TrainConfig of the BiLSTM with `seed` (default: the base model's, seed 0)."""
        from engine.models import TrainConfig

        return TrainConfig(base_model="bilstm", dataset=self.dataset, strategy="plain", epochs=self.epochs, lr=1e-3,
                           seed=0 if seed is None else seed, attention=attention)

    @property
    def base_id(self) -> str:
        from engine.models import default_model_id

        return default_model_id(self.config())

    def key(self) -> dict:
        d = asdict(self)
        d["model"] = self.base_id
        d["measure"] = self.part
        d["method"] = METHOD
        return d


def best_adversary(adversaries: pd.DataFrame) -> dict | None:
    """W&P Table 4's adversary: among those whose attention moved furthest than JSD_THRESHOLD from the base
    model's, the one that changed the predictions least (smallest mean TVD; the smallest lambda on a tie).
    adversaries: one row per lambda with columns lambda, tvd, jsd (and the test metrics). Returns that row as a
    dict without `model` and `final_loss`, or None when no adversary qualifies."""
    moved = adversaries[adversaries["jsd"] > JSD_THRESHOLD].sort_values(["tvd", "lambda"], kind="stable")
    if moved.empty:
        return None
    row = moved.iloc[0].to_dict()
    return {k: (float(v) if k != "model" else v) for k, v in row.items() if k not in ("model", "final_loss")}


def _row(cell: AttentionCell, model: str, metric: str, value: float, step: int = 0, **extra) -> dict:
    return {"model": model, "seed": cell.seed, "dataset": cell.dataset, "measure": cell.part, "strategy": "plain",
            "step": step, "ratio": float("nan"), "metric": metric, "value": float(value), "p_value": float("nan"),
            "method": METHOD, "split": "test", **extra}


def _metric_rows(cell: AttentionCell, model: str, metrics: dict, **extra) -> list[dict]:
    return [_row(cell, model, name, value, **extra) for name, value in metrics.items()]


def compute_attention_cell(cell: AttentionCell, context=None):
    """Compute one diagnostic (engine.sweeps' compute function). Every part seeds itself (the trainings by their
    config's seed, the adversary and the MLP by seed 0), so the numbers do not depend on where or in which order
    the cells run."""
    from engine.attention.diagnostics import (
        attention_and_probs,
        attention_guide,
        evaluate_metrics,
        seed_variance,
        train_adversary,
        train_guided_mlp,
        uniform_baseline,
    )
    from engine.data import get_dataset
    from engine.models import load_classifier, save_classifier
    from engine.models.reuse import load_or_train
    from engine.runtime import configure
    from engine.sweeps import CellResult, provenance
    from engine.sweeps.cells import shared_lock

    configure()
    started = time.time()
    command = getattr(context, "command", None) or "engine.attention.runner.run_attention_diagnostics"
    dataset = get_dataset(cell.dataset)
    test = dataset.split("test")
    quiet = lambda message: None  # noqa: E731 (the driver reports progress by cell)
    extra = {"metric_note": "f1_positive = F1 of the positive class (W&P)", "jsd": "natural log, in [0, ln 2]",
             "epochs": cell.epochs, "adversary_epochs": cell.adversary_epochs, "mlp_epochs": cell.mlp_epochs}
    if cell.part == UNIFORM:
        config = cell.config(attention="uniform")
        rows = _metric_rows(cell, f"{cell.base_id}-uniform", uniform_baseline(config))
        return CellResult(pd.DataFrame(rows), provenance(command, started, **extra))
    with shared_lock(f"train {cell.base_id}"):  # the first cell to need the base model trains it, the others load it
        base = load_or_train(cell.config(), cell.base_id, log=quiet)
    if cell.part == BASE:
        _, probs, _ = attention_and_probs(base, test)
        rows = _metric_rows(cell, base.id, evaluate_metrics(dataset, probs, test))
    elif cell.part == SEED_VARIANCE:
        other_config = cell.config(seed=cell.seed)
        from engine.models import default_model_id

        other = load_or_train(other_config, default_model_id(other_config), log=quiet)
        rows = []
        for r in seed_variance(base, [other], test):
            shared = {k: r[k] for k in ("instance", "max_attention", "predicted", "label")}
            rows += [_row(cell, other.id, "jsd", r["jsd"], step=r["instance"], **shared),
                     _row(cell, other.id, "tvd", r["tvd"], step=r["instance"], **shared)]
    elif cell.part == ADVERSARY:
        adversary, metrics = train_adversary(base, dataset, cell.lam, epochs=cell.adversary_epochs)
        adversary_id = adversary_model_id(base.id, cell.lam)
        adversary.metadata.update({"adversary_of": base.id, "lambda": cell.lam, "strategy": "adversary"})
        save_classifier(adversary, adversary_id, overwrite=True)
        values = {k: v for k, v in metrics.items() if k not in ("losses", "lambda")}
        rows = _metric_rows(cell, adversary_id, {**values, "final_loss": metrics["losses"][-1]}, **{"lambda": cell.lam})
        extra["losses"] = metrics["losses"]
    elif cell.part == GUIDED_MLP:
        if cell.guide in ("uniform", "trained"):
            guide = cell.guide
        elif cell.guide == "base_lstm":
            guide = attention_guide(base)
        elif cell.guide == "adversary":
            guide = attention_guide(load_classifier(adversary_model_id(base.id, cell.lam)))
        else:
            raise InvalidInputError(f"unknown guide {cell.guide!r}; use one of {', '.join(GUIDES)}")
        rows = _metric_rows(cell, base.id, train_guided_mlp(base, dataset, guide, epochs=cell.mlp_epochs),
                            guide=cell.guide, **({"lambda": cell.lam} if cell.lam is not None else {}))
    else:
        raise InvalidInputError(f"unknown attention diagnostic {cell.part!r}; use one of "
                                f"{', '.join((BASE, UNIFORM, SEED_VARIANCE, ADVERSARY, GUIDED_MLP))}")
    return CellResult(pd.DataFrame(rows), provenance(command, started, base, **extra))


def adversary_model_id(base_id: str, lam: float) -> str:
    """The models_cache id of the adversary of `base_id` trained with `lam`."""
    return f"{base_id}-adversary-l{lam:g}"


def run_attention_diagnostics(dataset_name: str = "rt", seeds: int = 8, lambdas: Sequence[float] = (0.001, 0.01, 0.03, 0.1, 0.3),
                              epochs: int = 6, adversary_epochs: int = 3, mlp_epochs: int = 4, run: str = "default",
                              results_dir: str | None = None, log: Callable[[str], None] = print,
                              command: str | None = None, workers: int = 1, ray: str | None = None,
                              progress: Callable[[int, int, dict], None] | None = None):
    """Every diagnostic cell of one dataset not yet in the store (three waves, see the module docstring).

    seeds: models with seeds 0..seeds-1 (seed 0 is the base); lambdas: the adversary sweep; workers / ray: the back
    end (engine.sweeps.Backend.from_options). Returns the SweepReport of all three waves."""
    from engine.data import get_dataset
    from engine.sweeps import Backend, SweepReport, run_cells

    if seeds < 1:
        raise InvalidInputError(f"seeds must be at least 1 (seed 0 is the base model), got {seeds}")
    get_dataset(dataset_name)  # an unknown dataset fails here, before any training
    store = attention_store(results_dir)
    backend = Backend.from_options(workers=workers, ray=ray)
    settings = {"dataset": dataset_name, "epochs": epochs, "adversary_epochs": adversary_epochs, "mlp_epochs": mlp_epochs}
    report = SweepReport(run=run)

    def wave(cells, label):
        log(f"{label}: {len(cells)} cell(s)")
        part = run_cells(cells, compute_attention_cell, store, run, backend=backend, command=command, progress=progress)
        for name in ("done", "skipped", "failed", "tracebacks", "retried"):
            getattr(report, name).extend(getattr(part, name))
        report.backend = part.backend
        return part

    first = wave([AttentionCell(part=BASE, **settings), AttentionCell(part=UNIFORM, **settings)],
                 "base model and uniform-attention baseline")
    if any(key["part"] == BASE for key, _ in first.failed):
        return report  # every other diagnostic needs the base model
    wave([AttentionCell(part=SEED_VARIANCE, seed=s, **settings) for s in range(1, seeds)]
         + [AttentionCell(part=ADVERSARY, lam=float(lam), **settings) for lam in lambdas]
         + [AttentionCell(part=GUIDED_MLP, guide=g, **settings) for g in GUIDES[:3]],
         "seed variance, adversaries and guided MLPs")
    adversaries = adversary_table(store.load(run), dataset_name, lambdas)
    best = best_adversary(adversaries) if not adversaries.empty else None
    if best is not None:
        wave([AttentionCell(part=GUIDED_MLP, guide="adversary", lam=best["lambda"], **settings)],
             f"guided MLP with the best adversary's attention (lambda {best['lambda']:g})")
    return report


def adversary_table(data: pd.DataFrame, dataset: str, lambdas: Sequence[float] | None = None) -> pd.DataFrame:
    """One row per adversary of `dataset` in a run's rows (ResultsStore.load): accuracy, [f1_positive,] lambda,
    tvd, jsd, model, final_loss (the columns of the adversary table written before the store), in lambda order.
    lambdas: keep only these (a run extended with other lambdas keeps them all otherwise)."""
    part = data[(data["measure"] == ADVERSARY) & (data["dataset"] == dataset)] if not data.empty else data
    if part.empty:
        return pd.DataFrame(columns=["accuracy", "lambda", "tvd", "jsd", "model", "final_loss"])
    if lambdas is not None:
        part = part[part["lambda"].isin([float(x) for x in lambdas])]
    wide = part.pivot_table(index=["lambda", "model"], columns="metric", values="value", aggfunc="first").reset_index()
    order = [c for c in ("accuracy", "f1_positive", "lambda", "tvd", "jsd", "model", "final_loss") if c in wide.columns]
    wide = wide[order].sort_values("lambda", kind="stable").reset_index(drop=True)
    wide.columns.name = None
    return wide
