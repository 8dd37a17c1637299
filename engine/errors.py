"""One error base for everything a user can cause.

The CLI and the pages catch `EngineError` (and only it) and show its message as one line: a user
mistake reads as a user mistake. Anything else that escapes is a bug and keeps its traceback.
Messages name the thing that was wrong and, where there is a closed list, the valid alternatives.

The typed subclasses also derive from the built-in exception that the same mistake raised before
this module existed (ValueError, RuntimeError), so callers that catch those keep working.
"""
from __future__ import annotations


class EngineError(Exception):
    """Base of every error a user can cause (bad name, bad file, bad option, a cancelled job)."""


class InvalidInputError(EngineError, ValueError):
    """An argument, option or input text that cannot be used as given."""


class UnknownNameError(InvalidInputError):
    """A name (model, dataset, measure, metric, run) that is not registered; the message lists the valid ones."""


class UnknownModelError(UnknownNameError):
    """No checkpoint, registered model, packaged encoder or folder by that name."""


class UnknownDatasetError(UnknownNameError):
    """No packaged or registered dataset by that name."""


class UnknownMeasureError(UnknownNameError):
    """No importance measure by that name."""


class EmptyInputError(InvalidInputError):
    """A text with nothing to explain or classify (empty, or only special tokens)."""


class LabelMismatchError(InvalidInputError):
    """The data's labels do not match the model's classes."""


class NoMaskableTokenError(InvalidInputError):
    """The input has no token that a measure may score or mask."""


class NotApplicableError(InvalidInputError):
    """A measure, metric or option that the chosen model cannot support (the message says why)."""


class DataFileError(InvalidInputError):
    """A user's data file that cannot be read or registered (names the file, row or column)."""


class DataLabelMismatchError(DataFileError, LabelMismatchError):
    """A dataset whose labels are not among a model's classes (names the labels, and for a registered
    file its column and first rows). Both a DataFileError and a LabelMismatchError."""


class CheckpointError(EngineError, RuntimeError):
    """A model folder that cannot be loaded (missing or inconsistent files, pickled weights)."""


class AnnotationStoreError(EngineError):
    """The annotation database cannot be opened, written or merged."""


class Cancelled(EngineError, RuntimeError):
    """Long work stopped at the user's request; nothing half-done was saved."""


class TrainingCancelled(Cancelled):
    """Fine-tuning stopped at the user's request."""


class ExplanationCancelled(Cancelled):
    """An explanation stopped at the user's request."""


class MaskingCancelled(Cancelled):
    """Recursive masking stopped at the user's request."""


class SimulabilityCancelled(Cancelled):
    """A simulability run stopped at the user's request; finished cells stay in the store."""
