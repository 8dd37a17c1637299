"""Explaining one input with several measures at once (what the Explain page and `explain` show):
the prediction, every measure's scores on the maskable tokens, and how much the measures agree."""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import torch
from scipy.stats import spearmanr

from engine.errors import EngineError
from engine.importance.levels import DEFAULT_AGGREGATION, Unit, aggregate, group_tokens, maskable_offsets
from engine.models import Batch, Classifier
from engine.models.kinds import ModelKind

# Fast enough to run on every explain of a typed review on a small CPU (the "live bundle"): the Explain
# page's default and the CLI's `--measure live`.
LIVE_MEASURES = ("grad-l2", "x-grad-sign", "ig-sign", "loo-sign")


# A prompted language model's default: IG leaves it. Its 50 steps (and, on a causal LM whose f_c changes fastest at
# the path's ends, the escalation to 180 until the gap closes) are forward+backward passes of the whole prompt,
# several times what these three cost together (the gradient pass shared by grad-l2 and x-grad-sign; LOO's rows over
# the cached prompt prefix; docs/methods.md#notes-behind-the-code). IG stays offered, with its cost said.
PROMPTED_LIVE_MEASURES = ("grad-l2", "x-grad-sign", "loo-sign")


def default_measures(classifier: Classifier) -> tuple[str, ...]:
    """The measures Explain runs unless asked otherwise (the page's default, the CLI's `--measure live`):
    LIVE_MEASURES, or PROMPTED_LIVE_MEASURES for a prompted language model."""
    return PROMPTED_LIVE_MEASURES if classifier.kind is ModelKind.PROMPTED else LIVE_MEASURES


def by_cost(measures: Sequence[str]) -> list[str]:
    """`measures` cheapest first (each measure's declared `cost_tier`, engine/importance/explainer.py); measures of
    one tier keep their given order."""
    from engine.importance import cost_tier

    return sorted(measures, key=cost_tier)


@dataclass(frozen=True)
class CostEstimate:
    """What one measure will cost on one input, before it runs: `seconds` from its planned passes
    (`Explainer.passes`) at this machine's measured speed for this input, `up_to_seconds` where it can spend more
    (IG's escalation), the rows behind them; None where the cost depends on a search or a generation."""

    measure: str
    seconds: float | None
    up_to_seconds: float | None
    forward_rows: int | None
    backward_rows: int | None

    def words(self) -> str:
        """'about 4 s (up to 30 s)', 'under a second', or 'unknown: depends on its search'."""
        if self.seconds is None:
            return "unknown: depends on its search or generation"

        def fmt(t: float) -> str:
            return "under a second" if t < 1 else f"about {t:.0f} s" if t < 120 else f"about {t / 60:.0f} min"

        more = "" if self.up_to_seconds is None or self.up_to_seconds < max(1.0, 1.5 * self.seconds) else \
            f" (up to {fmt(self.up_to_seconds).removeprefix('about ')} if it escalates)"
        return fmt(self.seconds) + more


def pass_seconds(classifier: Classifier, batch: Batch, rows: int = 8) -> tuple[float, float]:
    """(seconds of one forward row, seconds of one backward row) of `batch`'s first input on this machine, timed
    now over `rows` copies of it after a warm-up pass (a measure's rows run batched like these; the prefix cache of a
    prompted LM applies as in the measures)."""
    import time

    def rep(t: torch.Tensor) -> torch.Tensor:
        return t[:1].repeat(rows, *[1] * (t.dim() - 1))

    many = Batch(input_ids=rep(batch.input_ids), attention_mask=rep(batch.attention_mask),
                 token_type_ids=rep(batch.token_type_ids), segments=rep(batch.segments), maskable=rep(batch.maskable),
                 target=None, truncated=rep(batch.truncated), offsets=[batch.offsets[0]] * rows)
    with torch.no_grad():
        classifier.logits(many)
        t = time.perf_counter()
        classifier.logits(many)
        forward = (time.perf_counter() - t) / rows
    with torch.enable_grad():
        embeds = classifier.word_embeddings(many.input_ids).detach().requires_grad_(True)
        t = time.perf_counter()
        classifier.logits_from_embeddings(embeds, many)[:, 0].sum().backward()
        both = (time.perf_counter() - t) / rows
    return forward, max(both - forward, 0.0)


def estimate_seconds(classifier: Classifier, measures: Sequence[str], text: str, auxiliary: str | None = None,
                     options: dict[str, dict] | None = None) -> dict[str, CostEstimate]:
    """Per measure, what explaining `text` will cost here (`CostEstimate`), from its planned passes and one timed
    forward and backward pass of this input (`pass_seconds`). Rough by design: a measure's own work beside the
    model's passes (captum's bookkeeping, a surrogate fit) is not counted; its use is to say before a slow run
    (a prompted LM's IG) how slow it will be."""
    from engine.importance import get_explainer

    batch = classifier.batch([text], [auxiliary] if auxiliary is not None else None)
    n = int(batch.maskable[0].sum())
    forward, backward = pass_seconds(classifier, batch)
    out = {}
    for m in measures:
        plan = get_explainer(m, classifier, memo=False, **(options or {}).get(m, {})).passes(n)
        if plan is None:
            out[m] = CostEstimate(m, None, None, None, None)
            continue
        seconds = plan.forward * forward + plan.backward * backward
        up_to = None if plan.up_to_forward is None else \
            plan.up_to_forward * forward + (plan.up_to_backward or 0) * backward
        out[m] = CostEstimate(m, seconds, up_to, plan.forward, plan.backward)
    return out


@dataclass
class Explanation:
    batch: Batch  # one input
    tokens: list[str]  # its maskable tokens, in text order
    probabilities: np.ndarray  # [C]
    target: int
    target_source: str
    truncated: bool
    scores: dict[str, np.ndarray] = field(default_factory=dict)  # measure -> [N] over the maskable tokens
    signed: dict[str, bool] = field(default_factory=dict)
    extras: dict[str, dict] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)
    text: str = ""  # the primary text as typed
    offsets: list[tuple[int, int]] = field(default_factory=list)  # [N] character spans of the tokens in `text`
    options: dict[str, dict] = field(default_factory=dict)  # measure -> the options it was computed with

    def units(self, level: str = "token") -> list[Unit]:
        """The tokens, words or sentences of the text (engine.importance.levels), in text order."""
        return group_tokens(self.offsets, self.text, level, self.tokens)

    def level_scores(self, level: str = "token", how: str = DEFAULT_AGGREGATION) -> tuple[list[Unit], dict[str, np.ndarray]]:
        """The units of `level` and every measure's scores aggregated over them by `how`: [G] per measure."""
        units = self.units(level)
        return units, {m: aggregate(v, units, how) for m, v in self.scores.items()}

    def table(self) -> pd.DataFrame:
        """One row per token, one column per measure."""
        frame = pd.DataFrame({"position": range(len(self.tokens)), "token": self.tokens})
        for measure, values in self.scores.items():
            frame[measure] = values
        return frame

    def agreement(self) -> pd.DataFrame:
        """Spearman rank correlation between every pair of measures over this input's tokens."""
        names = list(self.scores)
        out = pd.DataFrame(np.eye(len(names)), index=names, columns=names)
        for i, a in enumerate(names):
            for b in names[i + 1 :]:
                rho = spearmanr(self.scores[a], self.scores[b]).statistic if len(self.tokens) > 1 else np.nan
                out.loc[a, b] = out.loc[b, a] = rho
        return out


def _within_measure(measure: str, progress, on_steps) -> Callable[[int, int], None] | None:
    """The measure's own progress callback: to `progress` for beam search alone (it can take seconds; the others
    are one pass, or report to `on_steps`), and to `on_steps` for every measure that reports (IG, pass by pass)."""
    targets = [f for f in ((progress if measure == "beam" else None), on_steps) if f is not None]
    if not targets:
        return None

    def report(done: int, total: int) -> None:
        for f in targets:
            f(measure, done, total)
    return report


def explain_text(classifier: Classifier, text: str, auxiliary: str | None = None, measures: Sequence[str] = LIVE_MEASURES,
                 target: int | str | None = None, options: dict[str, dict] | None = None,
                 progress: Callable[[str, int, int], None] | None = None,
                 should_stop: Callable[[], bool] | None = None,
                 on_measure: Callable[[str, Explanation], None] | None = None,
                 on_steps: Callable[[str, int, int], None] | None = None) -> Explanation:
    """Predict and explain one input with each measure, in the order given. A measure that fails (e.g.
    attention on a model without it) is reported in `errors` instead of stopping the others.

    Args:
        classifier: the model (`engine.load_classifier`).
        text: the input; auxiliary: the second text of a paired task (never explained or masked).
        measures: importance measure ids (`engine.MEASURES`), run cheapest first.
        target: the class explained, by index or name (a prompted LM's label words too:
            `Classifier.check_target`); default: the predicted one.
        options: per measure, options for its explainer (e.g. {'ig-sign': {'steps': 50}}).
        progress(measure, done, total), should_stop(): for UIs.
        on_measure(measure, result): called as soon as each measure is done (its scores, or its error, are in
            `result`, which then holds every measure so far) so that a caller can show it at once (the Explain
            page streams its heatmaps so).
        on_steps(measure, done, total): within a measure that reports its own progress, in its units (IG: path
            points per input out of its step budget, after every pass; beam: steps), so that a caller can show the
            budget spent and stop between passes (an exception raised by the callback ends the call).

    Returns:
        An Explanation: the maskable tokens [N], the probabilities [C], the target, per measure the scores [N]
        and whether they are signed, and the errors of the measures that could not run.
    """
    from engine.importance import get_explainer

    batch = classifier.batch([text], [auxiliary] if auxiliary is not None else None)
    with torch.no_grad():
        probs = torch.softmax(classifier.logits(batch).float(), -1)[0].cpu().numpy()
    if target is None:
        target, source = int(probs.argmax()), "predicted"
    else:
        target, source = classifier.check_target(target), "given"
    result = Explanation(batch=batch, tokens=classifier.maskable_tokens(batch), probabilities=probs,
                         target=target, target_source=source, truncated=bool(batch.truncated[0]), text=text,
                         offsets=maskable_offsets(batch))
    for i, measure in enumerate(measures):
        if progress is not None:
            progress(measure, i, len(measures))
        stream = _within_measure(measure, progress, on_steps)
        try:
            explainer = get_explainer(measure, classifier, **(options or {}).get(measure, {}))
            imp = explainer.attribute(batch, [target], progress=stream, should_stop=should_stop)
        except EngineError as err:  # e.g. a measure this model cannot support; a bug still raises
            result.errors[measure] = str(err)
        else:
            result.scores[measure] = imp.token_scores(0).numpy()
            result.signed[measure] = bool(imp.signed)
            result.options[measure] = dict(imp.options)
            result.extras[measure] = {k: (v.tolist() if isinstance(v, torch.Tensor) else v) for k, v in imp.extras.items()}
        if on_measure is not None:
            on_measure(measure, result)
    return result
