"""Dataset registry: `get_dataset(name, split_seed)` is the one lookup, for the packaged datasets (rt, imdb,
babi-1..3, toy) and for the user's registered files (`engine.data.user`; `python -m engine datasets add`);
`dataset_sha256` is the digest of a split's inputs that keys what depends on them."""
from engine.data.digest import dataset_sha256
from engine.data.lookup import DATASET_NAMES, dataset_names, get_dataset, load_dataset
from engine.data.metrics import METRICS, score
from engine.data.packaged import PACKAGED_DATASETS
from engine.data.types import SPLITS, Dataset, Example
from engine.errors import UnknownDatasetError

__all__ = ["Dataset", "Example", "SPLITS", "METRICS", "score", "get_dataset", "load_dataset", "dataset_names",
           "dataset_sha256", "DATASET_NAMES", "PACKAGED_DATASETS", "UnknownDatasetError"]
