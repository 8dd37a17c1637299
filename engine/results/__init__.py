"""Results store: tidy parquet cells with provenance, read by the benchmark pages."""
from engine.results.store import TIDY_COLUMNS, ResultsStore, cell_key, default_results_dir

__all__ = ["ResultsStore", "TIDY_COLUMNS", "cell_key", "default_results_dir"]
