"""Cascading model randomisation (Adebayo et al. 2018, "Sanity checks for saliency maps"), for text classifiers.

Stages, cumulative, on a copy of the model: re-initialise the classification head (and the pooler), then the
layers from the top down, then the embeddings. After each stage every measure explains the same inputs for the
same classes again, and its scores are compared with those on the trained model by Spearman's rank correlation
over each input's maskable tokens (the mean over inputs, with a BCa bootstrap CI after the last stage). A
measure whose scores still correlate strongly with the trained model's after every weight is random explains
the input, not the model. For signed measures the correlation of |scores| is reported too (Adebayo et al. show
both).

Re-initialisation follows the encoders' own scheme (BERT: normal(0, initializer_range) for linear and embedding
weights, zero biases, LayerNorm 1 and 0); modules with their own `reset_parameters` (LSTMs) use it. Seeded.

Pass rule (ours, labelled wherever shown; Adebayo et al. judge the curves by eye): a measure passes when the upper
end of the 95% CI of its mean Spearman after full randomisation is below PASS_THRESHOLD = 0.5.
"""
from __future__ import annotations

import copy
from collections.abc import Callable, Sequence

import numpy as np
import pandas as pd
import torch
from scipy import stats

from engine.errors import Cancelled, InvalidInputError
from engine.models import Batch, Classifier

PASS_THRESHOLD = 0.5


def randomisation_stages(model: torch.nn.Module) -> list[tuple[str, list[torch.nn.Module]]]:
    """[(stage name, modules re-initialised at that stage)], in cascading order: head, top layer ... bottom layer,
    embeddings. Transformers (a base model with `encoder.layer`) and the BiLSTM-attention model are recognised."""
    base = getattr(model, "base_model", None)
    layers = getattr(getattr(base, "encoder", None), "layer", None) if base is not None and base is not model else None
    if isinstance(layers, torch.nn.ModuleList) and hasattr(base, "embeddings"):
        head = [m for m in model.children() if m is not base]
        if getattr(base, "pooler", None) is not None:
            head.append(base.pooler)
        stages = [("head", head)]
        stages += [(f"layer {i}", [layers[i]]) for i in reversed(range(len(layers)))]
        stages.append(("embeddings", [base.embeddings]))
        return stages
    embeddings = model.get_input_embeddings()
    children = [m for m in model.children() if m is not embeddings and any(True for _ in m.parameters())]
    recurrent = [m for m in children if isinstance(m, (torch.nn.LSTM, torch.nn.GRU, torch.nn.RNN))]
    head = [m for m in children if m not in recurrent]
    if not head or not recurrent:
        raise InvalidInputError(f"cannot tell the head, layers and embeddings of a {type(model).__name__} apart: "
                                "cascading randomisation knows transformer encoders and the BiLSTM-attention model")
    return [("head", head), ("encoder", recurrent), ("embeddings", [embeddings])]


@torch.no_grad()
def reinitialise(modules: Sequence[torch.nn.Module], std: float, generator: torch.Generator) -> None:
    """Fresh weights for every parameter of `modules`, in place (see the module docstring for the scheme)."""
    for root in modules:
        for m in root.modules():
            if isinstance(m, (torch.nn.Linear, torch.nn.Embedding)):
                m.weight.copy_(torch.randn(m.weight.shape, generator=generator, dtype=torch.float64).to(m.weight) * std)
                if getattr(m, "bias", None) is not None:
                    m.bias.zero_()
                if isinstance(m, torch.nn.Embedding) and m.padding_idx is not None:
                    m.weight[m.padding_idx].zero_()
            elif isinstance(m, torch.nn.LayerNorm):
                if m.weight is not None:
                    m.weight.fill_(1.0)
                if m.bias is not None:
                    m.bias.zero_()
            elif hasattr(m, "reset_parameters") and any(True for _ in m.parameters(recurse=False)):
                state = torch.get_rng_state()
                torch.manual_seed(int(torch.randint(0, 2**31 - 1, (1,), generator=generator)))
                m.reset_parameters()
                torch.set_rng_state(state)


def rank_similarity(a: torch.Tensor, b: torch.Tensor, maskable: torch.Tensor) -> tuple[np.ndarray, np.ndarray]:
    """(Spearman of the scores, Spearman of |scores|) [B] of two score tensors [B, T] over each input's maskable
    tokens; NaN where either is constant (no ranking to compare)."""
    out = np.full((2, a.shape[0]), np.nan)
    for i in range(a.shape[0]):
        x, y = a[i][maskable[i]].double().numpy(), b[i][maskable[i]].double().numpy()
        for j, (u, v) in enumerate(((x, y), (np.abs(x), np.abs(y)))):
            if len(u) >= 2 and np.ptp(u) > 0 and np.ptp(v) > 0:
                out[j, i] = stats.spearmanr(u, v).statistic
    return out[0], out[1]


def explain_in_batches(classifier: Classifier, measure: str, batch: Batch, target: torch.Tensor, batch_size: int,
                       options: dict) -> torch.Tensor:
    """Scores [B, T] of `measure` (its options: options[measure]) on `batch` for `target` [B], batch_size inputs at
    a time (a fresh explainer, no memo: every sanity check explains a model it has just changed)."""
    from engine.importance import get_explainer

    explainer = get_explainer(measure, classifier, memo=False, **options.get(measure, {}))
    parts = [explainer.attribute(batch.select(range(s, min(s + batch_size, len(batch)))), target[s:s + batch_size]).scores
             for s in range(0, len(batch), batch_size)]
    return torch.cat(parts)


def cascading_randomisation(
    classifier: Classifier,
    measures: Sequence[str],
    batch: Batch,
    target: torch.Tensor | Sequence[int] | None = None,
    seed: int = 0,
    batch_size: int = 32,
    options: dict | None = None,
    progress: Callable[[int, int], None] | None = None,
    should_stop: Callable[[], bool] | None = None,
) -> pd.DataFrame:
    """Tidy rows, one per (stage, measure, input): stage_index (0 = trained model, then 1..S cumulative),
    stage, measure, input, spearman, spearman_abs (of the scores against the trained model's, same target).

    target: the classes explained, the same on every model (default: the trained model's predictions).
    options: measure -> its options (e.g. {"random": {"seed": 3}}). The classifier itself is not modified."""
    options = dict(options or {})
    batch = batch.to(classifier.device)
    target = classifier.targets_for(batch, target)
    model = copy.deepcopy(classifier.model).eval()
    copy_clf = Classifier(model, classifier.tokenizer, classifier.classes, classifier.max_length,
                          {**classifier.metadata, "id": f"{classifier.id}-randomised"}, device=classifier.device)
    stages = randomisation_stages(model)
    std = float(getattr(getattr(model, "config", None), "initializer_range", 0.02) or 0.02)
    generator = torch.Generator().manual_seed(seed)
    trained = {m: explain_in_batches(classifier, m, batch, target, batch_size, options) for m in measures}
    total, done = len(stages) * len(measures), 0
    rows = []
    maskable = batch.maskable.cpu()
    for m in measures:
        rho, rho_abs = rank_similarity(trained[m], trained[m], maskable)
        rows += [{"stage_index": 0, "stage": "trained", "measure": m, "input": i, "spearman": rho[i],
                  "spearman_abs": rho_abs[i]} for i in range(len(batch))]
    for s, (name, modules) in enumerate(stages, 1):
        reinitialise(modules, std, generator)
        for m in measures:
            if should_stop is not None and should_stop():
                raise Cancelled("the sanity check was cancelled")
            scores = explain_in_batches(copy_clf, m, batch, target, batch_size, options)
            rho, rho_abs = rank_similarity(trained[m], scores, maskable)
            rows += [{"stage_index": s, "stage": name, "measure": m, "input": i, "spearman": rho[i],
                      "spearman_abs": rho_abs[i]} for i in range(len(batch))]
            done += 1
            if progress is not None:
                progress(done, total)
    return pd.DataFrame(rows)


def sanity_summary(rows: pd.DataFrame, seed: int = 0) -> pd.DataFrame:
    """Per measure and stage: the mean Spearman (and of |scores|) over inputs; at the last stage (every weight
    random) with a 95% BCa bootstrap CI over inputs and whether the measure passes (see PASS_THRESHOLD)."""
    from engine.stats import bootstrap_ci

    out = []
    last = rows["stage_index"].max()
    for (measure, s, stage), part in rows.groupby(["measure", "stage_index", "stage"], sort=True):
        row = {"measure": measure, "stage_index": int(s), "stage": stage, "spearman": float(np.nanmean(part["spearman"])),
               "spearman_abs": float(np.nanmean(part["spearman_abs"])), "n_inputs": int(part["spearman"].notna().sum())}
        if s == last:
            mean, low, high, method = bootstrap_ci(part["spearman"].to_numpy(float), seed=seed, with_method=True)
            row.update({"ci_low": low, "ci_high": high, "ci_method": method,
                        "passes": bool(high < PASS_THRESHOLD) if not np.isnan(high) else bool(mean < PASS_THRESHOLD)})
        out.append(row)
    return pd.DataFrame(out)
