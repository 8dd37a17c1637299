"""Completeness checks for the measures that have the property (docs/methods.md#completeness): the scores of
ig-sign, deeplift and gradient-shap should sum, over the maskable tokens, to f_c(x) - f_c(b), the explained
logit of the input minus that of the baseline. The gap is

    gap = sum_t score_t - (f_c(x) - f_c(b))          (logits; per input)

and an input's explanation is *complete* when |gap| <= allowed, with

    allowed = max(relative * |f_c(x) - f_c(b)|, absolute)

(relative to the difference it should add up to, with an absolute floor for inputs where f_c(x) ~ f_c(b)).

    ig-sign / ig-abs   a quadrature error: the gap shrinks with more steps. Default tolerance 5% relative, 0.01
                       logits absolute; an input outside it is recomputed with Gauss-Legendre nodes at 3x, 9x ...
                       the steps until it is within, or the step budget `max_steps` is spent (`escalation`).
    deeplift           exact by construction for the rescale rule; captum applies the rule only to the
                       nonlinearities it knows, so on a transformer the sum can miss. Same tolerance; nothing to
                       raise: a miss is reported.
    gradient-shap      holds in expectation only (IG with random path points): with n samples, the gap is a mean of
                       n per-sample gaps, so it is judged against three standard errors of that mean (plus the
                       absolute floor): a larger gap is more than sampling noise.

Every such Importance carries, in `extras`, per input: completeness_gap, f_input, f_baseline, allowed_gap, complete
(bool) and, for IG, steps_used, rule_used and initial_gap (the gap with the configured rule and steps).
`completeness_warning` turns a miss into one line with its fix (CLI, Explain page, exports, curves' provenance).
"""
from __future__ import annotations

from collections.abc import Mapping

import torch

RELATIVE_TOLERANCE = 0.05
ABSOLUTE_TOLERANCE = 0.01
DEFAULT_MAX_STEPS = 180  # 20 midpoint steps, then 60 and 180 Gauss-Legendre nodes
ESCALATION_RULE = "gausslegendre"
ESCALATION_FACTOR = 3
GRADIENT_SHAP_STANDARD_ERRORS = 3.0

COMPLETENESS_MEASURES = ("ig-sign", "ig-abs", "deeplift", "gradient-shap")


def allowed_gap(delta: torch.Tensor, relative: float = RELATIVE_TOLERANCE,
                absolute: float = ABSOLUTE_TOLERANCE) -> torch.Tensor:
    """The largest |gap| [B] that counts as complete, for f_c(x) - f_c(b) = `delta` [B] (logits)."""
    return torch.clamp(relative * delta.abs(), min=absolute)


def escalation(rule: str, steps: int, max_steps: int) -> list[tuple[str, int]]:
    """The (rule, steps) tried after the configured (`rule`, `steps`) misses, in order: Gauss-Legendre with
    3x, 9x, ... the steps, the last one capped at `max_steps` (empty when max_steps <= steps).

    Why Gauss-Legendre: its nodes crowd towards both ends of the path, where a prompted LM's f_c changes fastest
    (docs/llm.md#ig-completeness-on-the-llm); its error falls faster than the midpoint rule's on smooth paths."""
    out: list[tuple[str, int]] = []
    k = steps
    while k < max_steps:
        k = min(k * ESCALATION_FACTOR, max_steps)
        out.append((ESCALATION_RULE, k))
    return out


def completeness_extras(gap: torch.Tensor, f_input: torch.Tensor, f_baseline: torch.Tensor,
                        allowed: torch.Tensor) -> dict:
    """The per-input diagnostics every measure with completeness reports (tensors [B], on the CPU)."""
    delta = f_input - f_baseline
    return {"completeness_gap": gap.detach().cpu(), "f_input": f_input.detach().cpu(),
            "f_baseline": f_baseline.detach().cpu(),
            "relative_gap": (gap.abs() / delta.abs().clamp_min(1e-12)).detach().cpu(),
            "allowed_gap": allowed.detach().cpu(), "complete": (gap.abs() <= allowed).detach().cpu()}


def _at(extras: Mapping, key: str, i: int):
    value = extras[key]
    return value[i].item() if isinstance(value, torch.Tensor) else value[i]


_FIX = {
    "ig-sign": "raise the step budget (option max_steps, e.g. --option max_steps=800) or the starting steps "
               "(--option steps=100 --option rule=gausslegendre)",
    "deeplift": "captum's rescale rule does not cover this model's nonlinearities (its DeepLift falls back to "
                "gradients there): use ig-sign, whose gap closes with more steps",
    "gradient-shap": "raise n_samples (e.g. --option n_samples=200), or use ig-sign, which converges deterministically",
}
_FIX["ig-abs"] = _FIX["ig-sign"]


def completeness_warning(measure: str, extras: Mapping, i: int = 0) -> str | None:
    """One line saying that input `i`'s scores of `measure` do not add up to f(x) - f(baseline), and the fix;
    None when they do (or the measure reports no completeness). `extras`: an Importance's (tensors) or an
    Explanation's (lists)."""
    if "complete" not in extras or bool(_at(extras, "complete", i)):
        return None
    gap = float(_at(extras, "completeness_gap", i))
    delta = float(_at(extras, "f_input", i)) - float(_at(extras, "f_baseline", i))
    allowed = float(_at(extras, "allowed_gap", i))
    spent = ""
    if "steps_used" in extras:
        spent = (f" after {int(_at(extras, 'steps_used', i))} {_at(extras, 'rule_used', i)} steps "
                 f"(the step budget)")
    elif "n_samples_used" in extras:
        spent = f" with {int(_at(extras, 'n_samples_used', i))} samples"
    fix = _FIX.get(measure, "treat these scores with caution")
    return (f"{measure}: the scores do not add up: completeness gap {gap:+.3g} against f(x) - f(baseline) = "
            f"{delta:+.3g} (allowed {allowed:.2g}){spent}. Fix: {fix}.")


def completeness_summary(extras_list: list[Mapping], measure: str | None = None) -> dict | None:
    """Over many explanations (e.g. every masking step of a curve): how many were checked and how many missed
    the tolerance, the largest |gap| and relative gap, (IG) the largest number of steps used and, when some
    missed, a `warning` with the fix; None when none of them reports completeness."""
    rows = []
    for extras in extras_list:
        if "complete" not in extras:
            continue
        n = len(extras["complete"])
        for i in range(n):
            rows.append({"complete": bool(_at(extras, "complete", i)),
                         "gap": abs(float(_at(extras, "completeness_gap", i))),
                         "relative": float(_at(extras, "relative_gap", i)),
                         "steps": int(_at(extras, "steps_used", i)) if "steps_used" in extras else None})
    if not rows:
        return None
    steps = [r["steps"] for r in rows if r["steps"] is not None]
    out = {"explanations": len(rows), "incomplete": sum(not r["complete"] for r in rows),
           "max_abs_gap": max(r["gap"] for r in rows), "max_relative_gap": max(r["relative"] for r in rows),
           **({"max_steps_used": max(steps)} if steps else {})}
    if out["incomplete"] and measure:
        out["warning"] = (f"{out['incomplete']} of {out['explanations']} explanations of {measure} do not add up to "
                          f"f(x) - f(baseline) within the tolerance. Fix: {_FIX.get(measure, 'treat them with caution')}.")
    return out


class CompletenessMeter:
    """Collects the completeness extras of every `attribute` call of an explainer (wrap it like CostMeter), so a
    curve's provenance can say whether its explanations added up (`summary()`)."""

    def __init__(self, measure: str | None = None):
        self.measure = measure
        self.extras: list[Mapping] = []

    def wrap(self, attribute):
        def wrapped(*args, **kwargs):
            result = attribute(*args, **kwargs)
            if "complete" in result.extras:
                self.extras.append(dict(result.extras))
            return result
        return wrapped

    def summary(self) -> dict | None:
        return completeness_summary(self.extras, self.measure)
