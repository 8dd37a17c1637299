"""The datasets that ship with the project, by name (their loaders); `engine.data.get_dataset` looks names up
here first, then among the user's registered datasets (`engine.data.user_registry`)."""
from __future__ import annotations

from functools import partial

from engine.data.babi import load_babi
from engine.data.sentiment import load_imdb, load_rt
from engine.data.toy import load_toy

LOADERS = {
    "rt": load_rt,
    "imdb": load_imdb,
    "babi-1": partial(load_babi, 1),
    "babi-2": partial(load_babi, 2),
    "babi-3": partial(load_babi, 3),
    "toy": load_toy,
}
#: the datasets that ship with the project; `engine.data.dataset_names()` adds the user's registered ones
PACKAGED_DATASETS = tuple(LOADERS)
