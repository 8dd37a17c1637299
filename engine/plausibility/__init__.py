"""Plausibility: do explanations agree with people? An SQLite annotation store, annotation tasks
(anonymised explanations to rank, tokens to mark), ratings of measures from rankings (TrueSkill,
Bradley-Terry), annotator agreement, and ERASER metrics against rationales (docs/methods.md#plausibility-and-simulability)."""
from engine.plausibility.agreement import (
    cohens_kappa,
    kendalls_w,
    krippendorff_alpha_nominal,
    ranking_agreement,
    rationale_agreement,
)
from engine.plausibility.io import export_jsonl, export_text, import_jsonl, rankings_csv
from engine.plausibility.ranking import bradley_terry, measure_rankings, pairwise_wins, trueskill_ratings
from engine.plausibility.rationales import (
    average_precision,
    compare_with_rationales,
    iou_f1,
    measures_against_rationales,
    rationale_token_indices,
    spans_of,
    token_prf,
    top_k,
)
from engine.plausibility.report import summary
from engine.plausibility.store import (
    MAX_NAME_LENGTH,
    SCHEMA_VERSION,
    AnnotationStore,
    AnnotationStoreError,
    Ranking,
    Rationale,
    default_db_path,
    new_submission_id,
    ordering_from_ranks,
)
from engine.plausibility.supporting_facts import supporting_fact_metrics
from engine.plausibility.tasks import AnonymisedExplanation, Task, anonymise, build_tasks, make_task

__all__ = [name for name in dir() if not name.startswith("_")]
