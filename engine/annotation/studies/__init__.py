"""Plausibility studies: many annotators, invited, each given their own tasks, every task answered by exactly
`overlap` of them, with attention checks and the answers kept through any crash (the design and the guarantees:
`engine/annotation/studies/store.py`).

Modules: `errors` (every refusal), `records` (the twelve record types and their JSON form), `seats` and `checks`
(who gets which task, attention checks), `schema` (the study tables and their migrations), `tasks` (a study's
tasks from its dataset and measures), `reader` and `store` (`StudyStore`: reading, then every operation that
changes a study), `quality`, `results` (ratings, agreement, exports) and `drills` (load and crash drills).
"""
from engine.annotation.studies.checks import check_passed, check_positions, make_checks
from engine.annotation.studies.errors import (
    InvitationError,
    ParticipantReleasedError,
    StudyClosedError,
    StudyError,
    StudyFullError,
    StudyTimeUpError,
    TokenUsedError,
    UnknownStudyError,
    UnknownTokenError,
)
from engine.annotation.studies.reader import StudyReader
from engine.annotation.studies.records import (
    CHECK_KINDS,
    DEFAULT_CONSENT,
    DEFAULT_INSTRUCTIONS,
    DEFAULT_WORKER_PARAM,
    KINDS,
    MAX_COMMENT_LENGTH,
    MAX_TEXT_LENGTH,
    STATES,
    AnnotatorTask,
    Assignment,
    CheckItem,
    IssuedInvitation,
    ParticipantStatus,
    Progress,
    Session,
    SlotScores,
    Study,
    StudyAnswer,
    StudyConfig,
    StudyStatus,
    annotator_task,
)
from engine.annotation.studies.schema import STUDY_MIGRATIONS, STUDY_SCHEMA_VERSION, migrate_studies
from engine.annotation.studies.seats import seat_count, seat_positions
from engine.annotation.studies.store import StudyStore
from engine.annotation.studies.tasks import build_study_tasks, study_examples

__all__ = [
    "CHECK_KINDS", "KINDS", "STATES", "DEFAULT_WORKER_PARAM", "DEFAULT_INSTRUCTIONS", "DEFAULT_CONSENT",
    "MAX_TEXT_LENGTH", "MAX_COMMENT_LENGTH", "STUDY_MIGRATIONS", "STUDY_SCHEMA_VERSION", "migrate_studies",
    "StudyError", "UnknownStudyError", "InvitationError", "UnknownTokenError", "TokenUsedError", "StudyClosedError",
    "StudyTimeUpError", "ParticipantReleasedError", "StudyFullError", "seat_count", "seat_positions",
    "StudyConfig", "Study", "IssuedInvitation", "Session", "SlotScores", "AnnotatorTask", "Assignment", "Progress",
    "StudyAnswer", "ParticipantStatus", "StudyStatus", "CheckItem",
    "StudyReader", "StudyStore", "build_study_tasks", "study_examples", "make_checks", "check_passed", "check_positions",
    "annotator_task",
]
