"""The error raised for unreadable or inconsistent run/sweep outputs."""

from __future__ import annotations


class AnalysisInputError(ValueError):
    """An output file is missing, malformed or inconsistent with the output contract.

    The message names the file, the column or field and the offending value, and says what to
    do (e.g. re-run the experiment, or point at the run directory rather than a file).
    """
