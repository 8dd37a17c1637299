"""Token-importance measures, one module per family, one common signature (captum style):

    from engine.importance import get_explainer
    importance = get_explainer("loo-sign", classifier).attribute(batch, target=None)
    importance.scores      # [B, T] float32, 0 on positions that are not maskable

`MEASURES` maps every measure id to its class (see each class's docstring for what exactly is
computed, its options and unit). Definitions: REFERENCE section 2.
"""
from engine.importance import (  # noqa: E402,F401  (registration)
    attention,
    beam,
    captum_extras,  # noqa: E402,F401
    gradient,
    integrated_gradients,
    leave_one_out,
    random_baseline,
    smat,
)
from engine.importance.base import (
    MEASURES,
    Explainer,
    ExplanationCancelled,
    Importance,
    NoMaskableTokenError,
    describe,
    get_explainer,
    register,
)
from engine.importance.memo import clear_memo

# Measures that never sample (cheap and deterministic: the "live" set the Explain page computes at once).
LIVE_MEASURES = ("random", "grad-l2", "grad-l1", "x-grad-sign", "x-grad-abs", "ig-sign", "ig-abs", "loo-sign",
                 "loo-abs", "attention-cls-last", "attention-mean", "attention-rollout", "occlusion", "deeplift")

__all__ = ["MEASURES", "LIVE_MEASURES", "Explainer", "ExplanationCancelled", "Importance", "NoMaskableTokenError",
           "clear_memo", "describe", "get_explainer", "register"]
