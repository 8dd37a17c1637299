"""Datasets: seeded stratified splits, the packaged sentiment data, and the bAbI generator."""
from __future__ import annotations

import re
from collections import Counter

import numpy as np
import pytest

from engine.data import DATASET_NAMES, UnknownDatasetError, get_dataset, score
from engine.data.babi import LOCATIONS, generate_stories, load_babi
from engine.data.sentiment import clean_imdb


def test_unknown_dataset_is_a_clear_error():
    with pytest.raises(UnknownDatasetError, match="known datasets: rt, imdb"):
        get_dataset("sst2")


def test_rt_split_is_stratified_disjoint_and_seeded():
    d = get_dataset("rt", 0)
    sizes = {k: len(v) for k, v in d.splits.items()}
    assert sum(sizes.values()) == 8530
    uids = [e.uid for split in d.splits.values() for e in split]
    assert len(set(uids)) == len(uids), "an example sits in two splits"
    for split in d.splits.values():
        frac = np.mean([e.label for e in split])
        assert abs(frac - 0.5) < 0.01, "stratification keeps the 50/50 balance"
    again = get_dataset.__wrapped__("rt", 0)
    assert [e.uid for e in again.splits["test"]] == [e.uid for e in d.splits["test"]]
    other = get_dataset.__wrapped__("rt", 1)
    assert [e.uid for e in other.splits["test"]] != [e.uid for e in d.splits["test"]]
    assert d.majority_baseline() == pytest.approx(max(Counter(e.label for e in d.splits["test"]).values()) / sizes["test"], abs=0.01)


def test_imdb_is_cleaned_and_deduplicated():
    d = get_dataset("imdb", 0)
    texts = [e.primary for split in d.splits.values() for e in split]
    assert len(texts) == len(set(texts))
    # 96 exact duplicates in the package, a couple more once <br /> and spacing are normalised
    assert 25000 - 100 <= len(texts) <= 25000 - 96
    assert not any("<br" in t for t in texts)
    assert d.metric == "macro_f1"
    # predicting one class of a balanced binary set: F1 = 2p/(1+p) for it, 0 for the other, halved
    assert d.majority_baseline() == pytest.approx(1 / 3, abs=0.01)
    assert clean_imdb("good.<br /><br />Bad &amp; ugly") == "good. Bad & ugly"


def test_metrics_hand_computed():
    y = np.array([0, 0, 1, 1])
    p = np.array([0, 1, 1, 1])
    assert score("accuracy", y, p, 2) == 0.75
    # class 0: tp 1 fp 0 fn 1 -> 2/3; class 1: tp 2 fp 1 fn 0 -> 4/5
    assert score("macro_f1", y, p, 2) == pytest.approx((2 / 3 + 4 / 5) / 2)
    assert score("micro_f1", y, p, 2) == pytest.approx(0.75)


# --- bAbI: an independent reader of the generated text is the oracle --------------------------------

_MOVE = re.compile(r"^(\w+) (?:moved to|went to|journeyed to|travelled to|went back to) the (\w+)\.$")
_GRAB = re.compile(r"^(\w+) (?:picked up|got|grabbed|took) the (\w+)\.$")
_DROP = re.compile(r"^(\w+) (?:dropped|discarded|put down|left) the (\w+)\.$")


def read_story(sentences, question):
    """Answer a bAbI question by reading the sentences, knowing nothing of the generator."""
    where, holder, lies, trail = {}, {}, {}, {}
    for s in sentences:
        if m := _MOVE.match(s):
            who, loc = m.groups()
            where[who] = loc
            for obj, h in holder.items():
                if h == who and trail[obj][-1] != loc:
                    trail[obj].append(loc)
        elif m := _GRAB.match(s):
            who, obj = m.groups()
            holder[obj] = who
            trail[obj] = [where.get(who)]
        elif m := _DROP.match(s):
            who, obj = m.groups()
            holder.pop(obj, None)
            lies[obj] = where.get(who)
        else:
            raise AssertionError(f"unparsed sentence {s!r}")
    if m := re.match(r"^Where is (\w+)\?$", question):
        return where.get(m.group(1))
    if m := re.match(r"^Where is the (\w+)\?$", question):
        obj = m.group(1)
        return where.get(holder[obj]) if obj in holder else lies.get(obj)
    if m := re.match(r"^Where was the (\w+) before the (\w+)\?$", question):
        obj, last = m.groups()
        assert trail[obj][-1] == last
        return trail[obj][-2] if len(trail[obj]) >= 2 else None
    raise AssertionError(f"unparsed question {question!r}")


@pytest.mark.parametrize("task", [1, 2, 3])
def test_babi_answers_and_supporting_facts_are_correct(task):
    stories = generate_stories(task, 300, seed=7)
    for story in stories:
        assert read_story(story.sentences, story.question) == story.answer, "answer correct by construction"
        support = [story.sentences[i] for i in story.supporting]
        assert len(support) == min(task, len(set(story.supporting)))
        assert read_story(support, story.question) == story.answer, "supporting facts alone decide the answer"
        assert story.answer in LOCATIONS


def test_babi_is_reproducible_by_seed_and_sized_like_fmm():
    a = generate_stories(2, 50, seed=3)
    assert a == generate_stories(2, 50, seed=3)
    assert a != generate_stories(2, 50, seed=4)
    d = load_babi(1)
    assert {k: len(v) for k, v in d.splits.items()} == {"train": 8000, "validation": 2000, "test": 1000}
    assert d.paired and all(e.auxiliary.endswith("?") for e in d.splits["test"])


def test_babi_rationale_spans_point_at_supporting_sentences():
    d = load_babi(3, sizes={"train": 5, "validation": 5, "test": 20})
    for e in d.splits["test"]:
        assert len(e.rationale_spans) == 3
        for start, end in e.rationale_spans:
            sentence = e.primary[start:end]
            assert sentence.endswith(".") and (start == 0 or e.primary[start - 2] == ".")


def test_every_registered_dataset_loads():
    for name in DATASET_NAMES:
        d = get_dataset(name)
        assert d.num_classes >= 2 and 0 < d.majority_baseline() < 1
