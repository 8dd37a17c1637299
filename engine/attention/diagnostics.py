"""The diagnostics of Wiegreffe & Pinter 2019, "Attention is not not Explanation", on the
BiLSTM-attention model (docs/methods.md#attention-diagnostics).

- uniform baseline: the same model trained with attention frozen to 1/n;
- seed variance: JSD between the attention of models trained with other seeds and the base model's,
  and TVD between their predictions, per test instance;
- guided diagnostic MLP: a token-wise MLP over the word vectors whose outputs are averaged with fixed
  per-instance weights (uniform, the base LSTM's attention, an adversary's), or with weights it learns;
- model-consistent adversary: a model trained to predict like the base model (small TVD) with
  attention far from it (large KL), L = TVD(y_adv, y_base) - lambda KL(alpha_adv || alpha_base).
"""
from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import torch
from torch import nn

from engine.attention.divergences import jsd, kl, tvd
from engine.data import Dataset, get_dataset, score
from engine.models import Classifier, TrainConfig, train_classifier
from engine.runtime import seed_everything


def positive_f1(y_true, y_pred) -> float:
    """F1 of the positive class (index 1), W&P's metric for binary tasks."""
    y_true, y_pred = np.asarray(y_true), np.asarray(y_pred)
    tp = np.sum((y_pred == 1) & (y_true == 1))
    denom = 2 * tp + np.sum((y_pred == 1) & (y_true == 0)) + np.sum((y_pred == 0) & (y_true == 1))
    return float(2 * tp / denom) if denom else 0.0


@torch.no_grad()
def attention_and_probs(classifier: Classifier, examples, batch_size: int = 128) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """alpha [N, T] (zero off the primary tokens), class probabilities [N, C] and maskable [N, T] for
    the examples in order (padded to the longest)."""
    classifier.model.eval()
    alphas, probs, masks = [], [], []
    for start in range(0, len(examples), batch_size):
        batch = classifier.batch_of(examples[start : start + batch_size])
        out = classifier.model(input_ids=batch.input_ids, attention_mask=batch.attention_mask,
                               token_type_ids=batch.token_type_ids, segments=batch.segments, output_attentions=True)
        alphas.append(out.attentions[0].double().cpu())
        probs.append(torch.softmax(out.logits.double(), -1).cpu())
        masks.append(batch.maskable.cpu())
    T = max(a.shape[1] for a in alphas)
    pad = lambda x, v: torch.nn.functional.pad(x, (0, T - x.shape[1]), value=v)  # noqa: E731
    return torch.cat([pad(a, 0.0) for a in alphas]), torch.cat(probs), torch.cat([pad(m, False) for m in masks])


def evaluate_metrics(dataset: Dataset, probs: torch.Tensor, examples) -> dict:
    y_true = np.array([e.label for e in examples])
    y_pred = probs.argmax(-1).numpy()
    out = {"accuracy": score("accuracy", y_true, y_pred, dataset.num_classes)}
    if dataset.num_classes == 2:
        out["f1_positive"] = positive_f1(y_true, y_pred)
    return out


def uniform_baseline(config: TrainConfig) -> dict:
    """Train the same BiLSTM with attention frozen to uniform; its test metrics."""
    classifier = train_classifier(TrainConfig(**{**config.__dict__, "attention": "uniform"}), show_progress_bar=False)
    dataset = get_dataset(config.dataset, config.split_seed)
    test = dataset.split("test")[: config.eval_limit]
    _, probs, _ = attention_and_probs(classifier, test)
    return evaluate_metrics(dataset, probs, test)


def seed_variance(base: Classifier, others: Sequence[Classifier], examples) -> list[dict]:
    """Per test instance and other seed: JSD of attention to the base model's, TVD of predictions,
    the base model's max attention and its predicted class (W&P Fig. 2's violins)."""
    a0, p0, _ = attention_and_probs(base, examples)
    rows = []
    for other in others:
        a, p, _ = attention_and_probs(other, examples)
        for i, (j, t) in enumerate(zip(jsd(a, a0), tvd(p, p0))):
            rows.append({"instance": i, "seed": other.meta.seed, "jsd": float(j), "tvd": float(t),
                         "max_attention": float(a0[i].max()), "predicted": int(p0[i].argmax()), "label": examples[i].label})
    return rows


class GuidedMLP(nn.Module):
    """W&P's diagnostic: a token-wise MLP over fixed word vectors, averaged with per-instance weights.

    weights given: the guide (uniform, base LSTM, adversary) is fixed; weights None: the MLP learns
    its own additive attention ("trained MLP")."""

    def __init__(self, embeddings: torch.Tensor, num_labels: int, hidden: int = 64):
        super().__init__()
        self.embeddings = nn.Embedding.from_pretrained(embeddings.clone(), freeze=True)
        self.mlp = nn.Sequential(nn.Linear(embeddings.shape[1], hidden), nn.Tanh())
        self.attn = nn.Linear(hidden, 1)
        self.output = nn.Linear(hidden, num_labels)

    def forward(self, input_ids, maskable, weights=None):
        h = self.mlp(self.embeddings(input_ids))  # [B, T, hidden]
        if weights is None:
            weights = torch.softmax(self.attn(h).squeeze(-1).masked_fill(~maskable, float("-inf")), -1)
        else:
            weights = weights * maskable
            weights = weights / weights.sum(1, keepdim=True).clamp(min=1e-12)
        return self.output((weights[..., None] * h).sum(1))


def _batches(classifier: Classifier, examples, batch_size: int, rng: np.random.Generator | None):
    order = rng.permutation(len(examples)) if rng is not None else np.arange(len(examples))
    for start in range(0, len(examples), batch_size):
        idx = order[start : start + batch_size]
        yield idx, classifier.batch_of([examples[i] for i in idx])


def train_guided_mlp(base: Classifier, dataset: Dataset, guide: Callable | str, epochs: int = 8, lr: float = 1e-3,
                     seed: int = 0, limit: int | None = None) -> dict:
    """Train the diagnostic MLP; `guide` is 'uniform', 'trained', or a function(batch) -> weights [B, T]
    (e.g. the base LSTM's attention). Returns test metrics."""
    seed_everything(seed)
    mlp = GuidedMLP(base.embedding_matrix.detach().cpu(), base.num_classes)
    opt = torch.optim.Adam([p for p in mlp.parameters() if p.requires_grad], lr=lr)
    rng = np.random.default_rng(seed)
    train = dataset.split("train")[:limit]
    test = dataset.split("test")

    def weights_for(batch):
        if guide == "trained":
            return None
        if guide == "uniform":
            return batch.maskable.double().float()
        return guide(batch)

    for _ in range(epochs):
        mlp.train()
        for _, batch in _batches(base, train, 32, rng):
            batch = batch.to("cpu")
            loss = nn.functional.cross_entropy(mlp(batch.input_ids, batch.maskable, weights_for(batch)), batch.target)
            opt.zero_grad()
            loss.backward()
            opt.step()
    mlp.eval()
    probs = []
    with torch.no_grad():
        for _, batch in _batches(base, test, 128, None):
            batch = batch.to("cpu")
            probs.append(torch.softmax(mlp(batch.input_ids, batch.maskable, weights_for(batch)), -1))
    return evaluate_metrics(dataset, torch.cat(probs), test)


def attention_guide(model_classifier: Classifier) -> Callable:
    """A guide function giving a trained model's attention weights for a batch."""
    @torch.no_grad()
    def guide(batch):
        out = model_classifier.model(input_ids=batch.input_ids.to(model_classifier.device),
                                     attention_mask=batch.attention_mask.to(model_classifier.device),
                                     token_type_ids=batch.token_type_ids.to(model_classifier.device),
                                     segments=batch.segments.to(model_classifier.device), output_attentions=True)
        return out.attentions[0].float().cpu()

    return guide


def train_adversary(base: Classifier, dataset: Dataset, lam: float, epochs: int = 4, lr: float = 1e-3, seed: int = 0,
                    limit: int | None = None, progress: Callable[[dict], None] | None = None) -> tuple[Classifier, dict]:
    """Model-consistent adversary: a copy of the base architecture trained from the base's weights to
    minimise TVD(y_adv, y_base) - lambda KL(alpha_adv || alpha_base). Returns it and its test metrics
    (F1/accuracy, mean TVD and JSD to the base model), plus the loss per epoch."""
    import copy

    seed_everything(seed)
    adv_model = copy.deepcopy(base.model).to(base.device)
    adversary = Classifier(adv_model, base.tokenizer, base.classes, base.max_length,
                           dict(base.metadata, id=f"{base.id}-adversary-l{lam:g}"), base.device)
    opt = torch.optim.Adam(adv_model.parameters(), lr=lr)
    rng = np.random.default_rng(seed)
    train = dataset.split("train")[:limit]
    losses = []
    for epoch in range(epochs):
        adv_model.train()
        epoch_loss = []
        for _, batch in _batches(base, train, 32, rng):
            with torch.no_grad():
                ref = base.model(input_ids=batch.input_ids, attention_mask=batch.attention_mask,
                                 token_type_ids=batch.token_type_ids, segments=batch.segments, output_attentions=True)
            out = adv_model(input_ids=batch.input_ids, attention_mask=batch.attention_mask,
                            token_type_ids=batch.token_type_ids, segments=batch.segments, output_attentions=True)
            loss = (tvd(torch.softmax(out.logits, -1), torch.softmax(ref.logits, -1))
                    - lam * kl(out.attentions[0], ref.attentions[0])).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            epoch_loss.append(loss.item())
        losses.append(float(np.mean(epoch_loss)))
        if progress is not None:
            progress({"epoch": epoch + 1, "epochs": epochs, "loss": losses[-1]})
    test = dataset.split("test")
    a0, p0, _ = attention_and_probs(base, test)
    a1, p1, _ = attention_and_probs(adversary, test)
    metrics = evaluate_metrics(dataset, p1, test)
    metrics.update({"lambda": lam, "tvd": float(tvd(p1, p0).mean()), "jsd": float(jsd(a1, a0).mean()), "losses": losses})
    return adversary, metrics
