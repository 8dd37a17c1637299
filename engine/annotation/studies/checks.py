"""Attention checks: where in an annotator's list they come, the check items built from a study's tasks
(instructed or gold), and whether an answer passes one."""
from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import replace

from engine.annotation.studies.records import CheckItem, StudyConfig
from engine.annotation.task_words import task_words
from engine.errors import InvalidInputError
from engine.plausibility.tasks import AnonymisedExplanation, Task


def check_positions(participant_id: int, n_tasks: int, n_checks: int) -> frozenset[int]:
    """The 1-based sequence numbers at which this participant gets attention checks: random but fixed per
    participant, never first (the first task teaches the interface) when there is room."""
    total = n_tasks + n_checks
    candidates = list(range(2, total + 1)) if total - 1 >= n_checks else list(range(1, total + 1))
    return frozenset(random.Random(f"checks:{participant_id}").sample(candidates, n_checks))


def make_checks(tasks: Sequence[Task], config: StudyConfig, n: int, seed: int = 0) -> list[CheckItem]:
    """`n` attention-check items built from the study's tasks.

    instructed: a copy of a real task with a note naming the explanation to put first (ranking) or the one
        word to mark (rationale-only studies).
    gold: the task's gold rationale as one explanation against a random set of as many tokens (ranking:
        the gold one must come first; rationale-only: the marks must overlap the gold rationale with F1 >= 0.5).
    Raises InvalidInputError when 'gold' is asked for tasks without gold rationales.
    """
    rng = random.Random(f"checks:{seed}")
    if n == 0:
        return []
    if config.check_kind == "gold":
        pool = [t for t in tasks if t.gold_rationale and len(t.gold_rationale) < len(t.tokens)]
        if not pool:
            raise InvalidInputError("check_kind 'gold' needs examples with gold rationales (e.g. a bAbI dataset or a "
                                    "data file with rationales); none of the study's examples has one: use 'instructed'")
    else:
        pool = [t for t in tasks if len(t.tokens) >= 1 and ("ranking" not in config.kinds or len(t.explanations) >= 2)]
        if not pool:
            raise InvalidInputError("no task can carry an instructed attention check (each needs tokens and 2+ explanations)")
    checks = []
    for i in range(n):
        # bases spread over the task list, so that most annotators' seats (runs of consecutive tasks) miss some
        base = pool[(i * len(pool)) // n if n <= len(pool) else i % len(pool)]
        if config.check_kind == "instructed":
            if "ranking" in config.kinds:
                slot = rng.choice(base.slots)
                note = (f"Attention check: for this task only, put explanation {slot} first, whatever you think of it, "
                        "and rank the others as you like.")
                expected = {"first": slot}
            elif config.shown_as == "word":  # the word as shown; marking it marks all of its pieces
                words = task_words(base.primary, base.tokens)
                index = rng.randrange(len(words))
                note = (f"Attention check: for this task only, mark only word number {index + 1} "
                        f"(\u201c{words[index].text}\u201d) and nothing else.")
                expected = {"tokens": list(words[index].tokens)}
            else:
                index = rng.randrange(len(base.tokens))
                note = (f"Attention check: for this task only, mark only word number {index + 1} "
                        f"(\u201c{base.tokens[index]}\u201d) and nothing else.")
                expected = {"tokens": [index]}
            checks.append(CheckItem("instructed", replace(base, created_at=None), expected, note))
        else:
            gold = sorted(base.gold_rationale)
            others = [j for j in range(len(base.tokens)) if j not in set(gold)]
            decoy = sorted(rng.sample(others, min(len(gold), len(others))))
            slots = ["A", "B"]
            rng.shuffle(slots)
            scores = {"gold": [1.0 if j in set(gold) else 0.0 for j in range(len(base.tokens))],
                      "random": [1.0 if j in set(decoy) else 0.0 for j in range(len(base.tokens))]}
            explanations = tuple(sorted((AnonymisedExplanation(slot=slot, measure=f"attention-check:{m}", scores=tuple(scores[m]))
                                         for slot, m in zip(slots, ("gold", "random"))), key=lambda e: e.slot))
            task = replace(base, explanations=explanations, created_at=None)
            expected = {"first": slots[0]} if "ranking" in config.kinds else {"tokens": gold, "min_f1": 0.5}
            checks.append(CheckItem("gold", task, expected, None))
    return checks


def check_passed(expected: dict, ordering: Sequence[Sequence[str]], cannot_decide: bool,
                 rationale: Sequence[int] | None) -> bool:
    """Whether an answer passes a check. {"first": slot}: that slot alone in the first group (a tie or
    'cannot decide' fails). {"tokens": [...]} : exactly these tokens marked, or with "min_f1", token F1 >= it."""
    if "first" in expected:
        return not cannot_decide and bool(ordering) and tuple(ordering[0]) == (expected["first"],)
    marked = set(rationale or ())
    want = set(expected["tokens"])
    if "min_f1" not in expected:
        return marked == want
    overlap = len(marked & want)
    if overlap == 0:
        return False
    precision, recall = overlap / len(marked), overlap / len(want)
    return 2 * precision * recall / (precision + recall) >= expected["min_f1"]
