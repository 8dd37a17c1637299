"""Integrated gradients on the word embeddings (Sundararajan et al. 2017): ig-sign and ig-abs.

    IG_t = sum_h (e_t - b_t)_h * sum_i w_i g_t(b + alpha_i (e - b))_h

e: the word embeddings of the input [T, H]; b: the baseline; g_t: gradient of the target logit w.r.t. the
word embedding at position t. Only the word embeddings of *maskable* tokens move along the path: special
tokens, padding and the auxiliary sequence keep their own embedding in the baseline too (b_t = e_t there),
and position/type embeddings are added by the model and never scaled. So completeness reads

    sum over maskable t of IG_t  ~=  f_c(x) - f_c(b)

and the gap (left minus right, in logits) is reported per input in `extras['completeness_gap']`, with
f_c(x) and f_c(b) in `extras['f_input']`, `extras['f_baseline']`.

Convergence (engine.importance.completeness): an input whose |gap| exceeds max(tolerance * |f_c(x) - f_c(b)|,
abs_tolerance) (defaults 5% and 0.01 logits) is recomputed with Gauss-Legendre nodes at 3x, 9x, ... the steps,
until it is within or the step budget `max_steps` (default 180) is spent; `extras` records per input the steps and
rule used, the path points computed over all attempts (`path_points`: the cost), the first and the final gap and
whether it is `complete`. Progress (`attribute(progress=...)`) is reported after every forward+backward pass in path
points per input: (points computed, the budget: the configured steps plus every escalation stage's), so a UI can show
the budget spent and stop between passes (`should_stop`, or its own exception from the callback); a converged input
ends it at (budget, budget). An input already within the tolerance keeps
the configured rule's scores, so the numbers of a model whose IG converges at 20 midpoint steps (the encoders)
do not change. `max_steps=steps` turns the escalation off (the check is still reported).

Quadrature over alpha in [0, 1] (option `rule`):
  midpoint (default)  alpha_i = (i + 1/2) / k, w_i = 1/k: the "mean of k gradients" of docs/methods.md#importance-measures
                      formula; error O(1/k^2). Same as captum's method='riemann_middle'.
  trapezoid           alpha_i = i / (k - 1), w = 1/(k - 1) with the two ends halved (a true trapezoid rule;
                      captum's 'riemann_trapezoid' weights every step 1/k instead, so it sums to (k-1)/k).
  gausslegendre       Gauss-Legendre nodes and weights on [0, 1] (captum's default method).
All k path points of all inputs go through one batched forward+backward, chunked only to the memory budget
(and, on a CPU, to 4096 tokens per pass, `batching.CPU_PASS_TOKENS`, where throughput peaks:
`Explainer.rows_per_pass`): the 20 default steps of an input of up to 204 tokens are one pass.
Not offered: the seed repositories' variant that multiplies by x instead of x - b.
"""
from __future__ import annotations

import numpy as np
import torch

from engine.errors import InvalidInputError, NotApplicableError
from engine.importance.completeness import (
    ABSOLUTE_TOLERANCE,
    DEFAULT_MAX_STEPS,
    RELATIVE_TOLERANCE,
    allowed_gap,
    completeness_extras,
    escalation,
)
from engine.importance.explainer import Explainer, PassEstimate
from engine.importance.registry import register
from engine.importance.types import Call

BASELINES = ("zero", "mask", "pad")
RULES = ("midpoint", "trapezoid", "gausslegendre")


def quadrature(rule: str, k: int) -> tuple[list[float], list[float]]:
    """Nodes alpha_i in [0, 1] and weights w_i (summing to 1) of the k-point rule."""
    if rule == "midpoint":
        return [(i + 0.5) / k for i in range(k)], [1.0 / k] * k
    if rule == "trapezoid":
        if k < 2:
            raise InvalidInputError("the trapezoid rule needs at least 2 steps")
        w = [1.0 / (k - 1)] * k
        w[0] /= 2
        w[-1] /= 2
        return [i / (k - 1) for i in range(k)], w
    if rule == "gausslegendre":
        x, w = np.polynomial.legendre.leggauss(k)
        return list(0.5 * (x + 1)), list(0.5 * w)
    raise InvalidInputError(f"unknown quadrature rule {rule!r}; use one of {', '.join(RULES)}")


class _IntegratedGradients(Explainer):
    bf16_ok = True  # rankings within tolerance under bf16 autocast (bench/importance.py --bf16-agreement)

    defaults = {"steps": 20, "baseline": "zero", "rule": "midpoint", "tolerance": RELATIVE_TOLERANCE,
                "abs_tolerance": ABSOLUTE_TOLERANCE, "max_steps": DEFAULT_MAX_STEPS}
    choices = {"baseline": BASELINES, "rule": RULES}

    def passes(self, n_tokens: int) -> PassEstimate:
        """Its steps, and up to every escalation stage's steps besides where completeness does not hold (each stage
        recomputes the whole path: 20, then 60, then 180 by default, 260 rows in all)."""
        k, total = int(self.options["steps"]), self.budget()
        return PassEstimate(forward=k, backward=k, up_to_forward=total, up_to_backward=total)

    def _check_options(self) -> None:
        k = self.options["steps"]
        if not 1 <= k <= 1000:
            raise InvalidInputError(f"steps must be between 1 and 1000, got {k}")
        if not k <= self.options["max_steps"] <= 5000:
            raise InvalidInputError(f"max_steps (the step budget) must be between steps ({k}) and 5000, got "
                                    f"{self.options['max_steps']}")
        if self.options["tolerance"] < 0 or self.options["abs_tolerance"] < 0:
            raise InvalidInputError("tolerance and abs_tolerance must be >= 0")
        if self.options["rule"] == "trapezoid" and k < 2:
            raise InvalidInputError("the trapezoid rule needs at least 2 steps")
        if self.options["baseline"] == "mask" and self.classifier.replacement_token_id is None:
            raise NotApplicableError(f"model {self.classifier.id!r} has no mask token and no chosen replacement token: "
                                     "use baseline 'zero' or 'pad'")

    def baseline_embeddings(self, batch) -> torch.Tensor:
        """b [B, T, H]: the baseline word embedding on maskable positions, the input's own elsewhere."""
        e = self.classifier.word_embeddings(batch.input_ids).detach()
        kind = self.options["baseline"]
        if kind == "zero":
            base = torch.zeros_like(e)
        else:
            tok = self.classifier.mask_token_id if kind == "mask" else self.classifier.tokenizer.pad_token_id
            if tok is None:
                raise InvalidInputError(f"the tokenizer has no {kind} token for the {kind!r} baseline")
            base = self.classifier.word_embeddings(torch.full_like(batch.input_ids, int(tok))).detach()
        return torch.where(batch.maskable[..., None], base, e)

    def budget(self) -> int:
        """Path points per input at most: the configured steps plus every escalation stage's (20 + 60 + 180)."""
        k = int(self.options["steps"])
        return k + sum(steps for _, steps in escalation(self.options["rule"], k, int(self.options["max_steps"])))

    def _path_integral(self, call: Call, rows_of: torch.Tensor, rule: str, k: int, e: torch.Tensor,
                       base: torch.Tensor, spent: int = 0) -> torch.Tensor:
        """IG [B, T] (float64) with `rule` and `k` steps for the batch rows `rows_of` (others: 0); progress is
        reported as `spent` (points per input before this stage) plus this stage's points so far."""
        alphas, weights = quadrature(rule, k)
        diff = e - base
        dev = e.device
        n = len(rows_of)
        alpha = torch.tensor(alphas, dtype=e.dtype, device=dev).repeat(n)  # row-major: input, then step
        weight = torch.tensor(weights, dtype=torch.float64, device=dev).repeat(n)
        rows = rows_of.repeat_interleave(k)
        target = call.target[rows_of].repeat_interleave(k)

        def make(sl):
            r = rows[sl]
            return base[r] + alpha[sl, None, None] * diff[r]

        on_rows = None
        if call.progress is not None:
            budget = self.budget()

            def on_rows(done: int) -> None:
                call.progress(spent + done // max(n, 1), budget)
        gsum, _ = self.embedding_gradients(call, n * k, make, rows, target, weight, on_rows=on_rows)
        return (diff.to(torch.float64) * gsum.to(torch.float64)).sum(-1)

    def _integrated(self, call: Call) -> tuple[torch.Tensor, dict]:
        def compute():
            b = call.batch
            B = b.input_ids.shape[0]
            k, rule = self.options["steps"], self.options["rule"]
            e = self.classifier.word_embeddings(b.input_ids).detach()
            base = self.baseline_embeddings(b)
            dev = e.device
            # completeness: f_c(x) and f_c(b) in one no-grad forward of 2B rows
            logits = self.embedding_logits(call, torch.cat([e, base]), torch.arange(B, device=dev).repeat(2))
            f = logits.gather(1, call.target.repeat(2)[:, None]).squeeze(1).to(torch.float64)
            f_x, f_b = f[:B], f[B:]
            allowed = allowed_gap(f_x - f_b, self.options["tolerance"], self.options["abs_tolerance"])
            ig = self._path_integral(call, torch.arange(B, device=dev), rule, k, e, base)
            gap = (ig * b.maskable).sum(1) - (f_x - f_b)
            initial_gap = gap.clone()
            steps_used = torch.full((B,), k, dtype=torch.long)
            path_points = torch.full((B,), k, dtype=torch.long)  # forward+backward rows spent, all attempts
            rules_used = [rule] * B
            # Inputs whose scores do not add up are recomputed with more (Gauss-Legendre) steps, until they do or
            # the step budget is spent; inputs already within the tolerance keep the configured rule's scores.
            spent = k
            for next_rule, next_k in escalation(rule, k, self.options["max_steps"]):
                todo = (gap.abs() > allowed).nonzero().flatten()
                if not len(todo):
                    break
                finer = self._path_integral(call, todo, next_rule, next_k, e, base, spent)
                spent += next_k
                ig[todo] = finer[todo]
                gap[todo] = (finer[todo] * b.maskable[todo]).sum(1) - (f_x - f_b)[todo]
                steps_used[todo.cpu()] = next_k
                path_points[todo.cpu()] += next_k
                for i in todo.tolist():
                    rules_used[i] = next_rule
            if call.progress is not None:
                call.progress(self.budget(), self.budget())  # done: converged, or the budget spent
            extras = completeness_extras(gap, f_x, f_b, allowed)
            extras.update({"initial_gap": initial_gap.cpu(), "steps_used": steps_used, "rule_used": rules_used,
                           "path_points": path_points})
            return ig, extras
        key = ("ig", self.options["steps"], self.options["baseline"], self.options["rule"], self.options["tolerance"],
               self.options["abs_tolerance"], self.options["max_steps"])
        return self._shared(key, compute, call)


@register
class IntegratedGradientsSign(_IntegratedGradients):
    """ig-sign: integrated gradients on word embeddings, summed over the hidden dimension (signed).

    Options: steps (k, default 20), baseline 'zero' (default) | 'mask' | 'pad' embedding, rule 'midpoint'
    (default) | 'trapezoid' | 'gausslegendre'; tolerance (relative, default 0.05), abs_tolerance (logits, default
    0.01) and max_steps (the step budget, default 180) of the completeness check (module docstring).
    Unit: logit; completeness gap, steps used and whether it converged reported in extras."""

    name = "ig-sign"
    cost_tier = 2
    signed = True

    def _scores(self, call: Call):
        ig, extras = self._integrated(call)
        return ig, dict(extras)


@register
class IntegratedGradientsAbs(_IntegratedGradients):
    """ig-abs: |IG_t|, the absolute value of ig-sign (same options). Unit: logit; unsigned."""

    name = "ig-abs"
    cost_tier = 2
    signed = False

    def _scores(self, call: Call):
        ig, extras = self._integrated(call)
        return ig.abs(), dict(extras)
