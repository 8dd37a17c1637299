"""The results of annotation in one dictionary of plain data: what the Annotate page draws and
`python -m engine annotations stats` prints."""
from __future__ import annotations

from engine.plausibility.agreement import ranking_agreement, rationale_agreement
from engine.plausibility.ranking import bradley_terry, measure_rankings, trueskill_ratings
from engine.plausibility.rationales import measures_against_rationales


def summary(store, model_id: str | None = None) -> dict:
    """Counts; TrueSkill and Bradley-Terry ratings of measures from the rankings (each annotator's
    latest per task, cannot-decide left out); Kendall's W; rationale agreement; ERASER metrics of each
    measure against annotated rationales and against gold rationales (bAbI supporting facts)."""
    tasks = {t.id: t for t in store.tasks(model_id)}
    rankings = store.rankings(model_id)
    rationales = store.rationales(model_id)
    ranked = measure_rankings(rankings, tasks)
    marks: dict[str, list] = {}
    for r in rationales:
        marks.setdefault(r.task_id, []).append(r.tokens)
    agreement = ranking_agreement(rankings, tasks)
    return {
        "db": str(store.path),
        "model_id": model_id,
        "counts": store.counts(),
        "tasks": len(tasks),
        "annotators": len({r.annotator for r in rankings} | {r.annotator for r in rationales}),
        "rankings_used": len(ranked),
        "cannot_decide": sum(r.cannot_decide for r in rankings),
        "rationales": len(rationales),
        "trueskill": trueskill_ratings(ranked),
        "bradley_terry": bradley_terry(ranked),
        "kendalls_w": {k: v for k, v in agreement.items() if k != "per_task"},
        "kendalls_w_per_task": agreement["per_task"],
        "rationale_agreement": rationale_agreement(rationales, tasks),
        "against_annotated_rationales": measures_against_rationales(list(tasks.values()), marks),
        "against_gold_rationales": measures_against_rationales(list(tasks.values())),
    }
