"""Plausibility: do explanations agree with people? Annotation tasks (anonymised explanations to rank, tokens to
mark), ratings of measures from rankings (TrueSkill, Bradley-Terry), annotator agreement, and ERASER metrics against
rationales, annotated or bAbI's supporting facts (docs/methods.md#plausibility-and-simulability). The platform that
collects the annotations (store, studies, invitations) is `engine.annotation`, one layer above."""
from engine.plausibility.agreement import (
    cohens_kappa,
    kendalls_w,
    krippendorff_alpha_nominal,
    ranking_agreement,
    rationale_agreement,
)
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
from engine.plausibility.supporting_facts import supporting_fact_metrics
from engine.plausibility.tasks import AnonymisedExplanation, Task, anonymise, build_tasks, make_task

__all__ = [
    "AnonymisedExplanation", "Task", "anonymise", "average_precision", "bradley_terry", "build_tasks", "cohens_kappa",
    "compare_with_rationales", "iou_f1", "kendalls_w", "krippendorff_alpha_nominal", "make_task", "measure_rankings",
    "measures_against_rationales", "pairwise_wins", "ranking_agreement", "rationale_agreement",
    "rationale_token_indices", "spans_of", "supporting_fact_metrics", "token_prf", "top_k", "trueskill_ratings",
]
