"""How a study's answer slots are cut into seats (one annotator's share of the tasks): the count and each seat's tasks."""
from __future__ import annotations

import math


def seat_count(n_tasks: int, overlap: int, tasks_per_annotator: int) -> int:
    """How many annotators' shares (seats) the study has: ceil(n_tasks * overlap / min(tasks_per_annotator, n_tasks))."""
    return math.ceil(n_tasks * overlap / min(tasks_per_annotator, n_tasks)) if n_tasks else 0


def seat_positions(seat: int, n_tasks: int, overlap: int, tasks_per_annotator: int) -> list[int]:
    """The task positions (0-based) of one seat.

    Why seats: handing out "any task still short of its overlap" greedily can strand the last slots of a task
    with annotators who have all seen it already, so some task ends one answer short. Instead the n_tasks *
    overlap answer slots are laid out as the task positions repeated `overlap` times (slot s is task
    s mod n_tasks) and cut into consecutive seats of `tasks_per_annotator` slots. Every task then appears in
    exactly `overlap` seats, and a seat never holds a task twice (its slots are consecutive and at most
    n_tasks long). An annotator claims one free seat when they arrive; a released seat's unanswered tasks go
    to the next annotator who arrives, who cannot have seen them (they hold no other seat)."""
    per = min(tasks_per_annotator, n_tasks)
    return [s % n_tasks for s in range(seat * per, min((seat + 1) * per, n_tasks * overlap))]
