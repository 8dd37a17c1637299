"""`python -m engine attention`: all four W&P diagnostics for one dataset, written to
results/attention/<run>/ (summary.json with provenance, seed_variance.parquet, adversaries.parquet)."""
from __future__ import annotations

import json
import os
import platform
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import pandas as pd

from engine.atomic import atomic_path, write_text
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
from engine.models import TrainConfig, default_model_id, save_classifier
from engine.models.reuse import load_or_train
from engine.results import default_results_dir
from engine.runtime import code_version


def _base_model(config: TrainConfig, log) -> object:
    return load_or_train(config, default_model_id(config), log=log)


def run_attention_diagnostics(dataset_name: str = "rt", seeds: int = 8, lambdas: Sequence[float] = (0.001, 0.01, 0.03, 0.1, 0.3),
                              epochs: int = 6, adversary_epochs: int = 3, mlp_epochs: int = 4, run: str = "default",
                              results_dir: str | None = None, log: Callable[[str], None] = print,
                              command: str | None = None) -> Path:
    started = time.time()
    dataset = get_dataset(dataset_name)
    configs = [TrainConfig(base_model="bilstm", dataset=dataset_name, strategy="plain", epochs=epochs, lr=1e-3, seed=s)
               for s in range(seeds)]
    models = [_base_model(c, log) for c in configs]
    base = models[0]
    test = dataset.split("test")
    _, p0, _ = attention_and_probs(base, test)
    summary = {"dataset": dataset_name, "base_model": base.id, "base": evaluate_metrics(dataset, p0, test)}
    log("uniform-attention baseline")
    summary["uniform"] = uniform_baseline(configs[0])
    log("seed variance")
    variance = pd.DataFrame(seed_variance(base, models[1:], test))
    adversaries, best = [], None
    for lam in lambdas:
        log(f"adversary lambda={lam:g}")
        adversary, metrics = train_adversary(base, dataset, lam, epochs=adversary_epochs)
        adversary_id = f"{base.id}-adversary-l{lam:g}"
        adversary.metadata.update({"adversary_of": base.id, "lambda": lam, "strategy": "adversary"})
        save_classifier(adversary, adversary_id, overwrite=True)
        adversaries.append({**{k: v for k, v in metrics.items() if k != "losses"}, "model": adversary_id,
                            "final_loss": metrics["losses"][-1]})
        # W&P Table 4 keeps the adversary that moves attention most (JSD > 0.4) at the smallest cost in predictions
        if metrics["jsd"] > 0.4 and (best is None or metrics["tvd"] < best[1]["tvd"]):
            best = (adversary, metrics)
    summary["best_adversary"] = None if best is None else {k: v for k, v in best[1].items() if k != "losses"}
    guides = {"uniform": "uniform", "trained": "trained", "base_lstm": attention_guide(base)}
    if best is not None:
        guides["adversary"] = attention_guide(best[0])
    summary["guided_mlp"] = {}
    for name, guide in guides.items():
        log(f"guided MLP: {name}")
        summary["guided_mlp"][name] = train_guided_mlp(base, dataset, guide, epochs=mlp_epochs)
    out = Path(results_dir or default_results_dir()) / "attention" / run
    summary["provenance"] = {
        "command": command or "engine.attention.runner.run_attention_diagnostics",
        "code_version": code_version(), "seeds": seeds, "lambdas": list(lambdas), "epochs": epochs,
        "adversary_epochs": adversary_epochs, "mlp_epochs": mlp_epochs, "metric_note": "f1_positive = F1 of the positive class (W&P)",
        "jsd": "natural log, in [0, ln 2]", "machine": f"{platform.machine()} {os.cpu_count()} cpus",
        "seconds": round(time.time() - started, 1), "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    write_outputs(out, dataset_name, variance, pd.DataFrame(adversaries), summary)
    return out


def write_outputs(out: Path, dataset_name: str, variance: pd.DataFrame, adversaries: pd.DataFrame, summary: dict) -> None:
    """The three files of one dataset's run, each replaced whole (a run killed while writing leaves every
    file old or new, never truncated); the summary goes last because listings find runs by it."""
    with atomic_path(out / f"{dataset_name}_seed_variance.parquet") as tmp:
        variance.to_parquet(tmp, index=False)
    with atomic_path(out / f"{dataset_name}_adversaries.parquet") as tmp:
        adversaries.to_parquet(tmp, index=False)
    write_text(out / f"{dataset_name}_summary.json", json.dumps(summary, indent=2))
