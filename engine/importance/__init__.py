"""Token-importance measures, one module per family, one common signature (captum style):

    from engine.importance import get_explainer
    importance = get_explainer("loo-sign", classifier).attribute(batch, target=None)
    importance.scores      # [B, T] float32, 0 on positions that are not maskable

`MEASURES` maps every measure id to its class (see each class's docstring for what exactly is
computed, its options and unit). Definitions: docs/methods.md#importance-measures.
"""
from engine.errors import ExplanationCancelled, NoMaskableTokenError
from engine.importance import (  # noqa: E402,F401  (registration)
    attention,
    attnlrp,
    beam,
    budgeted_search,
    captum_extras,  # noqa: E402,F401
    gradient,
    integrated_gradients,
    interactions,
    leave_one_out,
    noise_tunnel,
    random_baseline,
    self_attribution,
    smat,
    value_zeroing,
)
from engine.importance.explainer import Explainer
from engine.importance.memo import clear_memo
from engine.importance.registry import (
    MEASURES,
    applicable_measures,
    builtin_measures,
    cost_tier,
    describe,
    get_explainer,
    is_model_independent,
    measure_availability,
    measure_formula,
    measure_label,
    register,
    seed_options,
)
from engine.importance.types import Importance

__all__ = ["applicable_measures", "builtin_measures", "measure_availability", "MEASURES", "Explainer", "ExplanationCancelled", "Importance", "NoMaskableTokenError",
           "clear_memo", "cost_tier", "describe", "get_explainer", "is_model_independent", "measure_formula", "measure_label", "register",
           "seed_options"]
