"""Every built-in importance measure's name in words, by measure id: the one home of each label, read by the measure
classes (`engine.importance.registry.register` gives each registered class its `label` from here) and by readers that
should not import torch for a name (the dashboard's Home, `app.trust.measure_words`). Plain data, no import: it sits in
engine's bottom layer. A measure not named here (scores read from a file) keeps the label its class declares, or none.
"""
from __future__ import annotations

MEASURE_LABELS: dict[str, str] = {
    "attention-cls-last": "attention of the last layer",
    "attention-mean": "attention (mean over layers and heads)",
    "attention-rollout": "attention rollout",
    "attention": "BiLSTM attention",
    "attnlrp": "AttnLRP (relevance propagation)",
    "beam": "beam search of the masking order",
    "greedy-loo": "greedy leave one out",
    "beam-budget": "beam search within a budget",
    "anytime-aopc": "anytime AOPC search",
    "random": "random (the baseline)",
    "kernel-shap": "KernelSHAP",
    "lime": "LIME",
    "shapley-sampling": "Shapley value sampling",
    "occlusion": "occlusion (3-token windows)",
    "gradient-shap": "GradientSHAP",
    "deeplift": "DeepLift",
    "grad-l2": "gradient (L2 norm)",
    "grad-l1": "gradient (L1 norm)",
    "x-grad-sign": "input x gradient (signed)",
    "x-grad-abs": "input x gradient (magnitude)",
    "ig-sign": "integrated gradients (signed)",
    "ig-abs": "integrated gradients (magnitude)",
    "shapley-interactions": "Shapley interactions (pairs)",
    "loo-sign": "leave one out (signed)",
    "loo-abs": "leave one out (magnitude)",
    "smoothgrad": "SmoothGrad (input x gradient)",
    "squaregrad": "SquareGrad (input x gradient)",
    "vargrad": "VarGrad (input x gradient)",
    "self-attribution": "the model's own attribution",
    "smat": "SMaT head-weighted attention",
    "value-zeroing": "value zeroing (cosine distance)",
    "value-zeroing-sign": "value zeroing (logit drop)",
}


def measure_words(name: str) -> str:
    """A built-in measure's name in words; the id itself for a name not in the table."""
    return MEASURE_LABELS.get(name) or name
