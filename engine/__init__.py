"""Faithfulness engine: models that support masking, importance measures, and the measurements
that say whether an explanation is true to the model. Never imports streamlit.

What a notebook needs is importable from here (`from engine import load_classifier, explain_text`):

    classifier = load_classifier("tiny-rt-masked-s0")          # a checkpoint id, a registered id or a folder
    result = explain_text(classifier, "a gripping, funny film")   # scores of several measures, their agreement
    curve = recursive_masking(classifier, batch, get_explainer("loo-sign", classifier))
    erasure = erasure_metrics(classifier, batch, scores)          # comprehensiveness, sufficiency, ...
    data = get_dataset("rt", split_seed=0)
    store = ResultsStore()                                        # the shipped and your own results

The names load on first use (PEP 562), so `import engine` stays as fast as before (no torch until a
name that needs it is used). Everything else stays importable from its module (`engine.faithfulness.erasure`
and so on); the names here are the ones kept stable.
"""
from __future__ import annotations

# `import engine` changes nothing in the caller's process (no environment variable): the offline policy is set by
# the entry points through `engine.offline()` (engine/settings.py), which a notebook can call too.

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (a cost on every import), as type checkers accept

from engine.lazy_exports import lazy_face  # noqa: E402
from engine.version import __version__  # noqa: E402 (set in engine/version.py, which modules below import)

#: public name -> the module it is read from (the one callers imported it from before)
_EXPORTS = {
    # models
    "offline": "engine.settings",
    "load_classifier": "engine.models",
    "list_checkpoints": "engine.models",
    "save_classifier": "engine.models",
    "Classifier": "engine.models.classifier",
    "CheckpointMeta": "engine.models.metadata",
    "STRATEGIES": "engine.models.metadata",
    "TrainConfig": "engine.models.training",
    "train_classifier": "engine.models.training",
    # explaining one input
    "explain_text": "engine.explain",
    "Explanation": "engine.explain",
    "get_explainer": "engine.importance",
    "measure_availability": "engine.importance",
    "MEASURES": "engine.importance",
    "explanation_record": "engine.export",
    # recursive masking
    "recursive_masking": "engine.faithfulness.recursive",
    "dataset_masking_curve": "engine.faithfulness.recursive",
    "MaskingResult": "engine.faithfulness.recursive",
    "mask_single_input": "engine.faithfulness.single",
    "acu": "engine.faithfulness.metrics",
    "racu": "engine.faithfulness.metrics",
    "load_or_fit_masf": "engine.ood",
    # erasure metrics
    "erasure_metrics": "engine.faithfulness.erasure",
    "ErasureResult": "engine.faithfulness.erasure",
    "ERASURE_METRICS": "engine.faithfulness.registry",
    "FAITHFULNESS_METRICS": "engine.faithfulness.registry",
    # data
    "get_dataset": "engine.data",
    "dataset_names": "engine.data",
    "Dataset": "engine.data",
    "PACKAGED_DATASETS": "engine.data",
    # results
    "ResultsStore": "engine.results",
    # errors
    "EngineError": "engine.errors",
}
#: names exported under another name than their module's
_RENAMED = {"FAITHFULNESS_METRICS": "METRICS"}

__all__ = sorted(_EXPORTS) + ["__version__"]


# Looked up each time (not cached): a module replaced in sys.modules (a test's stand-in) is honoured, as it was when
# callers imported from the module itself.
__getattr__, __dir__ = lazy_face(__name__, _EXPORTS, cache=False, renamed=_RENAMED)


if TYPE_CHECKING:  # for type checkers and editors: the same names, eagerly
    from engine.data import PACKAGED_DATASETS, Dataset, dataset_names, get_dataset
    from engine.errors import EngineError
    from engine.explain import Explanation, explain_text
    from engine.export import explanation_record
    from engine.faithfulness.erasure import ErasureResult, erasure_metrics
    from engine.faithfulness.metrics import acu, racu
    from engine.faithfulness.recursive import MaskingResult, dataset_masking_curve, recursive_masking
    from engine.faithfulness.registry import ERASURE_METRICS
    from engine.faithfulness.registry import METRICS as FAITHFULNESS_METRICS
    from engine.faithfulness.single import mask_single_input
    from engine.importance.registry import MEASURES, get_explainer, measure_availability
    from engine.models.checkpoint import list_checkpoints, load_classifier, save_classifier
    from engine.models.classifier import Classifier
    from engine.models.metadata import STRATEGIES, CheckpointMeta
    from engine.models.training import TrainConfig, train_classifier
    from engine.ood import load_or_fit_masf
    from engine.results.store import ResultsStore
