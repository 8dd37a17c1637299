"""The annotation platform: one SQLite file (`store`, its `schema` and migrations) holding annotators, annotation
tasks (`engine.plausibility.tasks`: anonymised explanations to rank, tokens to mark), rankings and rationales; its
JSONL / CSV exchange (`io`); the summary the Annotate page draws (`summary`); and studies (`studies`: invitations,
consent, seats, attention checks, quality, results).

Layer: above `engine.plausibility`, whose metrics (ratings, agreement, rationale scores) it feeds with what people
answered; nothing below imports it.
"""
from engine.annotation.io import export_jsonl, export_text, import_jsonl, rankings_csv
from engine.annotation.records import MAX_NAME_LENGTH, Ranking, Rationale, new_submission_id, ordering_from_ranks
from engine.annotation.schema import SCHEMA_VERSION
from engine.annotation.store import AnnotationStore, default_db_path
from engine.annotation.summary import summary
from engine.errors import AnnotationStoreError

__all__ = [
    "AnnotationStore", "AnnotationStoreError", "MAX_NAME_LENGTH", "Ranking", "Rationale", "SCHEMA_VERSION",
    "default_db_path", "export_jsonl", "export_text", "import_jsonl", "new_submission_id", "ordering_from_ranks",
    "rankings_csv", "summary",
]
