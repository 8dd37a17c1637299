"""Faithfulness engine: models that support masking, importance measures, and the measurements
that say whether an explanation is true to the model. Never imports streamlit."""

__version__ = "0.1.0"
