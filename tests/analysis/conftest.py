"""Fixtures shared by the analysis tests (helpers live in analysis_helpers.py)."""

from __future__ import annotations

import pytest
from analysis_helpers import FIXTURES


@pytest.fixture
def fixtures_dir():
    """tests/fixtures: committed sample run and sweep directories."""
    return FIXTURES
