"""A seeded generator of bAbI tasks 1-3 (Weston et al. 2015), which cannot be downloaded offline.

The paragraph is the primary (masked, explained) sequence, the question the auxiliary one, the answer
(a location) the label. The world is simulated while the story is written, so answers are correct by
construction, and the sentences that determine the answer (the supporting facts) are recorded as
rationale spans. Split sizes follow FMM: 8,000 train / 2,000 validation / 1,000 test.

Task 1, single supporting fact: "Where is Mary?" after people move around.
Task 2, two supporting facts: "Where is the apple?": who carries it, and where they are (or where it was dropped).
Task 3, three supporting facts: "Where was the apple before the kitchen?": the pick-up and the two last
places it was carried to.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from engine.data.types import Dataset, Example
from engine.errors import InvalidInputError

PEOPLE = ("Mary", "John", "Sandra", "Daniel")
LOCATIONS = ("bathroom", "bedroom", "garden", "hallway", "kitchen", "office")
OBJECTS = ("apple", "football", "milk")
MOVE_VERBS = ("moved to", "went to", "journeyed to", "travelled to", "went back to")
GRAB_VERBS = ("picked up", "got", "grabbed", "took")
DROP_VERBS = ("dropped", "discarded", "put down", "left")

SPLIT_SIZES = {"train": 8000, "validation": 2000, "test": 1000}
# Fixed offsets so each split of each task draws from its own random stream.
_SPLIT_STREAM = {"train": 0, "validation": 1, "test": 2}


@dataclass
class _World:
    """The state a story describes; updated sentence by sentence."""

    person_location: dict = field(default_factory=dict)  # person -> location
    person_last_move: dict = field(default_factory=dict)  # person -> sentence index
    holder: dict = field(default_factory=dict)  # object -> person (absent when not held)
    grab_sentence: dict = field(default_factory=dict)  # object -> sentence index of current holding
    dropped_at: dict = field(default_factory=dict)  # object -> (location, drop idx, holder's move idx)
    # object -> list of (location, evidence sentence indices) since the current pick-up
    history: dict = field(default_factory=dict)


@dataclass(frozen=True)
class BabiStory:
    sentences: tuple[str, ...]
    question: str
    answer: str
    supporting: tuple[int, ...]  # sentence indices, ascending


def _move(world: _World, rng, sentences: list[str], allow_people=PEOPLE) -> None:
    person = allow_people[rng.integers(len(allow_people))]
    here = world.person_location.get(person)
    choices = [loc for loc in LOCATIONS if loc != here]
    loc = choices[rng.integers(len(choices))]
    idx = len(sentences)
    sentences.append(f"{person} {MOVE_VERBS[rng.integers(len(MOVE_VERBS))]} the {loc}.")
    world.person_location[person] = loc
    world.person_last_move[person] = idx
    for obj, who in world.holder.items():
        if who == person:
            world.history.setdefault(obj, []).append((loc, (idx,)))


def _grab(world: _World, rng, sentences: list[str]) -> bool:
    """A located person picks up an object lying in their room (or never placed yet)."""
    located = [p for p in PEOPLE if p in world.person_location]
    rng.shuffle(located)
    for person in located:
        loc = world.person_location[person]
        free = [
            o for o in OBJECTS
            if o not in world.holder and (o not in world.dropped_at or world.dropped_at[o][0] == loc)
        ]
        if not free:
            continue
        obj = free[rng.integers(len(free))]
        idx = len(sentences)
        sentences.append(f"{person} {GRAB_VERBS[rng.integers(len(GRAB_VERBS))]} the {obj}.")
        world.holder[obj] = person
        world.grab_sentence[obj] = idx
        world.dropped_at.pop(obj, None)
        world.history[obj] = [(loc, (world.person_last_move[person],))]
        return True
    return False


def _drop(world: _World, rng, sentences: list[str]) -> bool:
    held = sorted(world.holder)
    if not held:
        return False
    obj = held[rng.integers(len(held))]
    person = world.holder.pop(obj)
    idx = len(sentences)
    sentences.append(f"{person} {DROP_VERBS[rng.integers(len(DROP_VERBS))]} the {obj}.")
    world.dropped_at[obj] = (world.person_location[person], idx, world.person_last_move[person])
    world.grab_sentence.pop(obj, None)
    world.history.pop(obj, None)
    return True


def _task1(rng) -> BabiStory | None:
    world, sentences = _World(), []
    for _ in range(int(rng.integers(2, 11))):
        _move(world, rng, sentences)
    person = sorted(world.person_location)[rng.integers(len(world.person_location))]
    return BabiStory(
        tuple(sentences), f"Where is {person}?", world.person_location[person], (world.person_last_move[person],)
    )


def _objects_story(rng, n_min: int, n_max: int) -> tuple[_World, list[str]]:
    world, sentences = _World(), []
    _move(world, rng, sentences)
    for _ in range(int(rng.integers(n_min, n_max + 1)) - 1):
        action = rng.random()
        if action < 0.55 or not (
            (action < 0.8 and _grab(world, rng, sentences)) or (action >= 0.8 and _drop(world, rng, sentences))
        ):
            _move(world, rng, sentences)
    return world, sentences


def _task2(rng) -> BabiStory | None:
    world, sentences = _objects_story(rng, 4, 14)
    known = sorted(set(world.holder) | set(world.dropped_at))
    if not known:
        return None
    obj = known[rng.integers(len(known))]
    if obj in world.holder:
        person = world.holder[obj]
        answer = world.person_location[person]
        supporting = {world.grab_sentence[obj], world.person_last_move[person]}
    else:
        answer, drop_idx, move_idx = world.dropped_at[obj]
        supporting = {drop_idx, move_idx}
    return BabiStory(tuple(sentences), f"Where is the {obj}?", answer, tuple(sorted(supporting)))


def _task3(rng) -> BabiStory | None:
    world, sentences = _objects_story(rng, 6, 18)
    # Ask only about an object carried through two places since its current pick-up, so the three
    # supporting facts (pick-up, the place before, the last place) fully decide the answer.
    candidates = sorted(o for o in world.holder if len(world.history.get(o, [])) >= 2)
    if not candidates:
        return None
    obj = candidates[rng.integers(len(candidates))]
    (before, ev_before), (last, ev_last) = world.history[obj][-2:]
    supporting = {world.grab_sentence[obj], *ev_before, *ev_last}
    return BabiStory(
        tuple(sentences), f"Where was the {obj} before the {last}?", before, tuple(sorted(supporting))
    )


_TASKS = {1: _task1, 2: _task2, 3: _task3}


def generate_stories(task: int, n: int, seed: int) -> list[BabiStory]:
    """`n` stories of bAbI task `task`, identical for the same (task, n, seed)."""
    if task not in _TASKS:
        raise InvalidInputError(f"bAbI task must be 1, 2 or 3, got {task}")
    rng = np.random.default_rng([seed, task])
    out: list[BabiStory] = []
    while len(out) < n:
        story = _TASKS[task](rng)
        if story is not None:
            out.append(story)
    return out


def story_to_example(story: BabiStory, uid: str) -> Example:
    spans, start = [], 0
    for i, sentence in enumerate(story.sentences):
        if i in story.supporting:
            spans.append((start, start + len(sentence)))
        start += len(sentence) + 1  # joined by one space
    return Example(
        primary=" ".join(story.sentences),
        auxiliary=story.question,
        label=LOCATIONS.index(story.answer),
        rationale_spans=tuple(spans),
        uid=uid,
    )


def load_babi(task: int, split_seed: int = 0, sizes: dict[str, int] | None = None) -> Dataset:
    sizes = sizes or SPLIT_SIZES
    splits = {}
    for split, n in sizes.items():
        stories = generate_stories(task, n, seed=split_seed * 10 + _SPLIT_STREAM[split])
        splits[split] = [story_to_example(s, f"babi{task}-{split}-{i}") for i, s in enumerate(stories)]
    return Dataset(
        name=f"babi-{task}",
        classes=LOCATIONS,
        metric="accuracy",
        splits=splits,
        split_seed=split_seed,
        description=f"bAbI task {task}, generated here (seeded); paragraph = masked primary sequence, "
        "question = auxiliary sequence, answer = location; supporting facts kept as rationales.",
        paired=True,
        max_length=192 if task == 3 else 160,
    )
