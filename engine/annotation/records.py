"""The annotation store's records and the rules for what goes in them: a ranking (groups of anonymised slots,
best first), a rationale (marked token indices), an annotator's name, a submission id and the store's clock."""
from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from engine.annotation.text_fields import check_text
from engine.errors import InvalidInputError

KINDS = ("ranking", "rationale")
MAX_NAME_LENGTH = 200


def utc_now() -> str:
    return datetime.now(UTC).isoformat(timespec="microseconds")


def new_submission_id() -> str:
    return uuid.uuid4().hex


@dataclass(frozen=True)
class Ranking:
    """One annotator's ordering of a task's anonymised explanations.

    ordering: groups of slots, best first; slots in one group are tied. Empty when `cannot_decide`.
    """

    submission_id: str
    task_id: str
    annotator: str
    ordering: tuple[tuple[str, ...], ...]
    cannot_decide: bool
    created_at: str

    def slot_ranks(self) -> dict[str, int]:
        """slot -> rank (0 = best; tied slots share a rank)."""
        return {slot: rank for rank, group in enumerate(self.ordering) for slot in group}


@dataclass(frozen=True)
class Rationale:
    """The token indices (into the task's tokens) an annotator marked as justifying the label."""

    submission_id: str
    task_id: str
    annotator: str
    tokens: tuple[int, ...]
    created_at: str


def normalise_ordering(ordering: Sequence[Sequence[str] | str]) -> tuple[tuple[str, ...], ...]:
    """Groups of slots best first; a bare slot string is a group of one."""
    groups = []
    for group in ordering:
        group = (group,) if isinstance(group, str) else tuple(group)
        if not group:
            raise InvalidInputError("an ordering has an empty group")
        groups.append(tuple(sorted(group)))
    return tuple(groups)


def ordering_from_ranks(ranks: dict[str, int]) -> tuple[tuple[str, ...], ...]:
    """{slot: rank number} (1 = best, equal numbers tie) -> groups of slots, best first."""
    by_rank: dict[int, list[str]] = {}
    for slot, rank in ranks.items():
        by_rank.setdefault(int(rank), []).append(slot)
    return tuple(tuple(sorted(by_rank[r])) for r in sorted(by_rank))


def check_annotator_name(name: str) -> str:
    """Names are stored verbatim (markup and odd characters included: they are escaped on display); an empty or
    over-long name, or one holding a control character (engine.annotation.text_fields), is refused."""
    if not isinstance(name, str) or not name.strip():
        raise InvalidInputError("type your name (any text) before annotating")
    if len(name) > MAX_NAME_LENGTH:
        raise InvalidInputError(f"the annotator name is {len(name)} characters long; at most {MAX_NAME_LENGTH} are allowed")
    return check_text(name, "the annotator name")
