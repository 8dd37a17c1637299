"""Faithfulness-optimised explanations under a forward-pass budget, as measures
(docs/methods.md#optimal-explanations-within-a-budget): `greedy-loo`, `beam-budget` and `anytime-aopc` wrap the searches of engine/importance/aopc_search.py (the AOPC
objective J of a masking order, and how each search maximises it) for `Explainer`, each with `budget` (forward
passes per input) and `seconds` options. Importance = a token's position in the order found (N = masked first).
"""
from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np
import torch

from engine.errors import InvalidInputError
from engine.importance.aopc_search import (
    CURVES,
    SCORES,
    BudgetSpent,
    SearchResult,
    SetScores,
    beam_search,
    curve_weights,
    exact_bounds,
    loo_order,
    widening_search,
)
from engine.importance.explainer import Explainer
from engine.importance.registry import register
from engine.importance.types import Call

# -- the registered measures ------------------------------------------------------------------------------------


class _BudgetedSearch(Explainer):
    """Common machinery: per input, a `SetScores` over its maskable tokens fed by batched forwards, the budget,
    progress (done/total in forward passes over the batch) and cancellation."""

    uses_replacement = True
    signed = True
    computed_once = True
    base_defaults = {"budget": 0, "seconds": 0.0, "score": "probability", "curve": "full"}
    choices = {"score": SCORES, "curve": CURVES}
    reports_start = False  # extras['start_objective']: J of the starting ranking (NaN when never evaluated)
    # A sweep over widths and budgets on the same inputs (scripts/experiments/budget_pareto.py) sets one dict here for all its
    # searches: {(input ids, positions, target, score): {mask: s}}. A masked set another search already ran is then
    # read from it instead of recomputed; every search still counts it as its own forward (its SetScores does not
    # know the dict), so the reported passes are those it would spend alone.
    shared_cache: dict | None = None

    def _check_options(self) -> None:
        if self.options["budget"] < 0:
            raise InvalidInputError(f"budget must be >= 0 forward passes per input (0: unlimited), got {self.options['budget']}")
        if self.options["seconds"] < 0:
            raise InvalidInputError(f"seconds must be >= 0 (0: no time limit), got {self.options['seconds']}")
        if self.options["seconds"] > 0:
            self.deterministic = False  # a time limit makes the result depend on the machine: never memoise it

    def _min_budget(self, n: int) -> int:
        """The fewest passes this search needs on an n-token input."""
        return n + 1

    def _estimate(self, n: int) -> int:
        """Passes this search spends on an n-token input without a budget (for progress totals)."""
        raise NotImplementedError

    def _search(self, scores: SetScores, w: np.ndarray, call: Call, row: int, positions: list[int]) -> SearchResult:
        raise NotImplementedError

    def _scores(self, call: Call):
        b = call.batch
        B, T = b.input_ids.shape
        mask_id = self.classifier.mask_token_id
        budget = self.options["budget"] or None
        seconds = self.options["seconds"]
        deadline = time.monotonic() + seconds if seconds > 0 else None
        candidates = b.maskable & (b.input_ids != mask_id)
        positions = [candidates[i].nonzero().flatten().tolist() for i in range(B)]
        for i, pos in enumerate(positions):
            need = self._min_budget(len(pos))
            if budget is not None and budget < need:
                raise InvalidInputError(f"budget {budget} is below the {need} forward passes measure {self.name!r} needs "
                                        f"on input {i} ({len(pos)} tokens); raise it, or use 0 (unlimited)")
        per_input = [budget if budget is not None else self._estimate(len(p)) for p in positions]
        total = int(sum(per_input))
        done = [0]
        if call.progress is not None:
            call.progress(0, total)

        def spend(k: int) -> None:
            done[0] += k
            if call.progress is not None:
                call.progress(min(done[0], total), total)

        out = torch.zeros(B, T, dtype=torch.float64, device=b.device)
        forwards, values, start_values, complete = [], [], [], []
        for i in range(B):
            pos = positions[i]
            n = len(pos)
            if n == 0:
                forwards.append(0)
                values.append(float("nan"))
                start_values.append(float("nan"))
                complete.append(True)
                continue
            scores = SetScores(n, self.set_evaluator(call, i, pos), budget=budget, deadline=deadline, on_spend=spend)
            result = self._search(scores, curve_weights(n, self.options["curve"]), call, i, pos)
            for rank, t in enumerate(result.order):
                out[i, pos[t]] = float(n - rank)
            forwards.append(scores.spent)
            values.append(result.value)
            start_values.append(result.start_value)
            complete.append(result.complete)
        extras = {"forwards": torch.tensor(forwards, dtype=torch.long),
                  "objective": torch.tensor(values, dtype=torch.float64),
                  "complete": torch.tensor(complete, dtype=torch.bool)}
        if self.reports_start:
            extras["start_objective"] = torch.tensor(start_values, dtype=torch.float64)
        if call.progress is not None:
            call.progress(total, total)
        return out, extras

    def set_evaluator(self, call: Call, row: int, positions: list[int]) -> Callable[[list[int]], list[float]]:
        """masks -> the score s of input `row` with each mask's tokens (local indices into `positions`) masked.

        A mask is an int whose bit t masks token positions[t]; the scores are batched and chunked as the search's
        own (the NAOPC bounds score subsets through it, engine.faithfulness.naopc)."""
        b = call.batch
        mask_id = self.classifier.mask_token_id
        target = int(call.target[row])
        base = b.input_ids[row]
        pos_t = torch.tensor(positions, dtype=torch.long, device=b.device)
        use_logit = self.options["score"] == "logit"
        store = None
        if self.shared_cache is not None:
            key = (tuple(base.tolist()), tuple(positions), target, self.options["score"])
            store = self.shared_cache.setdefault(key, {})

        def evaluate(masks: list[int]) -> list[float]:
            if store is not None:
                missing = list(dict.fromkeys(m for m in masks if m not in store))
                if missing:
                    store.update(zip(missing, compute(missing)))
                return [store[m] for m in masks]
            return compute(masks)

        def compute(masks: list[int]) -> list[float]:
            call.check_stop()
            bits = torch.tensor([[m >> t & 1 for t in range(len(positions))] for m in masks], dtype=torch.bool,
                                device=b.device)
            ids = base[None].repeat(len(masks), 1)
            cols = ids[:, pos_t]
            ids[:, pos_t] = torch.where(bits, torch.full_like(cols, mask_id), cols)
            rows = torch.full((len(masks),), row, dtype=torch.long, device=b.device)
            logits = self.forward_logits(call, ids, rows).double()
            if use_logit:
                picked = logits[:, target]
            else:
                picked = torch.softmax(logits, -1)[:, target]
            return picked.tolist()

        return evaluate


@register
class GreedyLeaveOneOut(_BudgetedSearch):
    """greedy-loo: recursive (greedy) leave-one-out: mask the token whose removal most lowers the target's score, repeat.

    Importance = position in that order (N = masked first, ..., 1 = last), as `beam`. Equals `beam-budget` with
    width 1. Options: budget (forward passes per input, 0 = unlimited; at least N + 1), seconds (0 = none),
    score (probability | logit of the target class), curve (full | eraser: which AOPC the order optimises).
    A time limit (seconds) is checked between steps; the first step (leave-one-out, N + 1 passes) always runs.
    Costs N(N+1)/2 + 1 passes; reports them in extras['forwards']; streams progress, cancellable."""

    name = "greedy-loo"
    cost_tier = 5
    defaults = dict(_BudgetedSearch.base_defaults)

    def _estimate(self, n: int) -> int:
        return n * (n + 1) // 2 + 1

    def _search(self, scores, w, call, row, positions):
        return beam_search(scores, w, width=1)


@register
class BudgetedBeam(_BudgetedSearch):
    """beam-budget: the AOPC-maximising masking order by beam search, within a forward-pass budget.

    Option width (B, default 5; 0 = unbounded, i.e. exact at 2^N passes); the search keeps one order per
    masked set (FMM). Objective: the AOPC curve (full | eraser) of p_c (or the logit, option score), unlike
    `beam` (sum of logit drops, no budget). When the budget runs out mid-search the best order found is
    completed by leave-one-out. Importance = position in the order (N = first). Passes in extras['forwards']."""

    name = "beam-budget"
    cost_tier = 5
    defaults = {**_BudgetedSearch.base_defaults, "width": 5}

    def _check_options(self) -> None:
        super()._check_options()
        if self.options["width"] < 0:
            raise InvalidInputError(f"width must be >= 0 (0: unbounded), got {self.options['width']}")

    def _estimate(self, n: int) -> int:
        width = self.options["width"]
        if not width:
            return 2 ** n
        return min(2 ** n, n + 1 + width * n * (n - 1) // 2)

    def _search(self, scores, w, call, row, positions):
        return beam_search(scores, w, width=self.options["width"] or None)


STARTS = ("auto", "greedy", "loo-sign", "x-grad-sign", "grad-l2")
GRADIENT_PASSES = 2  # a gradient start costs one forward and one backward, counted as 2 forward passes


@register
class AnytimeAopc(_BudgetedSearch):
    """anytime-aopc: a cheap ranking improved by pair swaps while the budget lasts (never worse than the ranking).

    Option start (the starting ranking; its passes count; not called 'seed', which names a random seed throughout
    the engine): auto (default: loo-sign when the budget is below greedy's cost N(N+1)/2 + 1, else greedy), greedy
    (greedy recursive LOO, `greedy-loo`, as far as the budget allows; the swaps start once it is complete, from its
    order, whose J is then known at no cost), loo-sign (the drop in the objective's score when each token alone is
    masked: N + 1 passes, then N - 1 to evaluate its J), x-grad-sign or grad-l2 (2 passes, then N - 1);
    exact_tokens (default 10; 0 = never): on inputs of at most that many tokens whose 2^N - 1 masked sets fit
    the remaining budget, return the exact optimum (dynamic programming) instead.
    Then J(start order) is evaluated and polished by swaps of tokens at most 2 apart while J rises (one pass per
    swap of neighbours); then, option max_width (default 32; 0 = swaps only), beams of width 2, 3, 5, 8, ... reuse
    every set evaluated so far, each better order is polished likewise, and the budget left goes to swaps of any
    distance on the best order (`widening_search`). extras: forwards, objective (J of the result),
    start_objective (J of the start order), complete (stopped at a local optimum rather than by the budget)."""

    name = "anytime-aopc"
    cost_tier = 5
    defaults = {**_BudgetedSearch.base_defaults, "start": "auto", "exact_tokens": 10, "max_width": 32}
    choices = {**_BudgetedSearch.choices, "start": STARTS}
    reports_start = True

    def _check_options(self) -> None:
        super()._check_options()
        if self.options["max_width"] < 0:
            raise InvalidInputError(f"max_width must be >= 0 (0: swaps only, no beams), got {self.options['max_width']}")
        if not 0 <= self.options["exact_tokens"] <= 20:
            raise InvalidInputError(f"exact_tokens must be in 0..20 (2^20 forwards at most), got {self.options['exact_tokens']}")

    def _min_budget(self, n: int) -> int:
        return n + 1 if self.options["start"] in ("auto", "greedy", "loo-sign") else 1 + GRADIENT_PASSES

    def _scores(self, call: Call):
        self._start = None  # the gradient start's scores for the whole batch, computed on first need
        try:
            return super()._scores(call)
        finally:
            self._start = None

    def _estimate(self, n: int) -> int:
        return 2 ** n if n <= self.options["exact_tokens"] else (self.options["max_width"] + 3) * n * n

    def _start_scores(self, call: Call) -> torch.Tensor:
        from engine.importance.registry import get_explainer

        first = get_explainer(self.options["start"], self.classifier, memo=self.memo, memory_mb=self.memory_mb,
                              max_rows=self.max_rows)
        return first.attribute(call.batch, call.target, should_stop=call.should_stop).scores

    def _search(self, scores, w, call, row, positions):
        n = scores.n
        if n <= self.options["exact_tokens"] and 2 ** n - 1 <= scores.remaining():
            try:
                value, order, _, _ = exact_bounds(scores, w)
                return SearchResult(order=order, value=value, complete=True)
            except BudgetSpent:  # out of time
                pass
        start_kind = self.options["start"]
        if start_kind == "auto":
            # below greedy's own cost the greedy phase would be cut short and completed by LOO; starting from LOO
            # and polishing by swaps did better there on rt (docs/budgeted-search.md)
            short = scores.budget is not None and scores.budget < n * (n + 1) // 2 + 1
            start_kind = "loo-sign" if short else "greedy"
        if start_kind == "greedy":
            first = beam_search(scores, w, width=1)
            if not first.complete:  # the budget ran out inside the greedy phase: that is the answer
                return SearchResult(order=first.order, value=first.value, complete=False, start_value=first.value)
            start = first.order
        elif start_kind == "loo-sign":
            scores.fetch([1 << t for t in range(n)], force=True)
            start = loo_order(scores)
        else:
            if self._start is None:
                self._start = self._start_scores(call)
            key = self._start[row, positions].double()
            start = sorted(range(n), key=lambda t: (-float(key[t]), t))
            scores.spent += GRADIENT_PASSES
            if scores.on_spend is not None:
                scores.on_spend(GRADIENT_PASSES)
        return widening_search(scores, w, start, self.options["max_width"])
