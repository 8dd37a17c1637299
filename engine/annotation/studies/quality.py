"""Annotator quality in a study: attention checks, time per task, straight-lining, and the flags they raise.

- Attention checks: items whose right answer is known (see `studies.make_checks`); failing more than
  `max_failed_checks` of them flags the annotator.
- Time per task: seconds from the item being given to its answer being stored (server clock). A median
  under `min_median_seconds` says the annotator clicked through without reading.
- Straight-lining: giving the same answer pattern whatever the item. Slots are shuffled per task, so
  always ranking "A, then B, then C" (or always "cannot decide", or always marking the same token positions)
  is a position habit, not a judgement. The share of an annotator's answers equal to their most common
  pattern is reported; at or above `straightline_share` (with at least `straightline_min_answers` answers)
  it flags them.

Flags are advice: `StudyStore.set_excluded` records the organiser's decision, and results take
`exclude='marked'` (only those), `'flagged'` (those plus every flagged annotator) or `'none'`.
"""
from __future__ import annotations

import statistics
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import asdict, dataclass

EXCLUDE_CHOICES = ("marked", "flagged", "none")


@dataclass(frozen=True)
class QualityThresholds:
    """When an annotator is flagged (see the module docstring)."""

    max_failed_checks: int = 0
    min_median_seconds: float = 2.0
    straightline_share: float = 0.9
    straightline_min_answers: int = 5


@dataclass(frozen=True)
class AnnotatorQuality:
    """One annotator's quality figures.

    answers: real-task answers; checks / checks_failed: attention checks answered / failed;
    median_seconds: median seconds per answer (checks included; NaN without answers);
    straightline_share: share of real answers equal to their most common pattern (NaN without answers);
    flags: why they are flagged (empty: not flagged); excluded: the organiser excluded them.
    """

    annotator: str
    answers: int
    checks: int
    checks_failed: int
    median_seconds: float
    straightline_share: float
    flags: tuple[str, ...]
    excluded: bool

    @property
    def flagged(self) -> bool:
        return bool(self.flags)

    def as_dict(self) -> dict:
        return {**asdict(self), "flags": list(self.flags), "flagged": self.flagged}


def answer_pattern(answer) -> tuple:
    """What straight-lining compares: the slot ordering, 'cannot decide', and the marked token positions."""
    return (answer.ordering, answer.cannot_decide, answer.rationale)


def annotator_quality(answers: Sequence, excluded: Sequence[str] = (),
                      thresholds: QualityThresholds | None = None) -> list[AnnotatorQuality]:
    """Quality per annotator from a study's `StudyAnswer`s (checks included), in the order annotators
    first answered. `excluded`: labels the organiser excluded (reported, not computed)."""
    t = thresholds or QualityThresholds()
    by_annotator: dict[str, list] = defaultdict(list)
    for a in answers:
        by_annotator[a.annotator].append(a)
    rows = []
    for name, mine in by_annotator.items():
        real = [a for a in mine if a.check_kind is None]
        checks = [a for a in mine if a.check_kind is not None]
        failed = sum(1 for a in checks if a.passed is False)
        median = statistics.median(a.seconds for a in mine) if mine else float("nan")
        share = float("nan")
        if real:
            share = Counter(answer_pattern(a) for a in real).most_common(1)[0][1] / len(real)
        flags = []
        if failed > t.max_failed_checks:
            flags.append(f"failed {failed} of {len(checks)} attention checks")
        if mine and median < t.min_median_seconds:
            flags.append(f"median {median:.1f} s per task (under {t.min_median_seconds:g} s)")
        if len(real) >= t.straightline_min_answers and share >= t.straightline_share:
            flags.append(f"straight-lining: {share:.0%} of answers identical")
        rows.append(AnnotatorQuality(annotator=name, answers=len(real), checks=len(checks), checks_failed=failed,
                                     median_seconds=float(median), straightline_share=share, flags=tuple(flags),
                                     excluded=name in set(excluded)))
    return rows


def excluded_annotators(quality: Sequence[AnnotatorQuality], exclude: str = "marked") -> list[str]:
    """Who is left out of results: 'marked' (the organiser's exclusions), 'flagged' (those and every
    flagged annotator) or 'none'."""
    from engine.errors import InvalidInputError

    if exclude not in EXCLUDE_CHOICES:
        raise InvalidInputError(f"exclude must be one of {', '.join(EXCLUDE_CHOICES)}; got {exclude!r}")
    if exclude == "none":
        return []
    return [q.annotator for q in quality if q.excluded or (exclude == "flagged" and q.flagged)]
