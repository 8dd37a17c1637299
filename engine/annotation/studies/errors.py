"""Every refusal of a study operation: one `StudyError` base (an `EngineError`), subclassed by what was refused."""
from __future__ import annotations

from engine.errors import EngineError, UnknownNameError


class StudyError(EngineError):
    """A study operation refused (nothing was written and no study data is returned)."""


class UnknownStudyError(StudyError, UnknownNameError):
    """No study by that id; the message lists the existing ones."""


class InvitationError(StudyError):
    """A link that does not admit its holder."""


class UnknownTokenError(InvitationError):
    """A token that matches no invitation (mistyped, truncated or made up)."""


class TokenUsedError(InvitationError):
    """A single-use link opened a second time, or a revoked link."""


class StudyClosedError(InvitationError):
    """The study is closed: no new sessions, tasks or answers."""


class StudyFullError(StudyError):
    """Every place (seat) in the study is taken by an active annotator; a place frees up if one is released."""


class StudyTimeUpError(StudyError):
    """The annotator's time limit has passed (their unanswered tasks went back to the pool)."""


class ParticipantReleasedError(StudyError):
    """The organiser released this annotator from the study (their unanswered tasks went back to the pool)."""
