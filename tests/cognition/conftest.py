"""Cognition tests share the situation builders of tests/broker/broker_helpers.py."""

from __future__ import annotations

import sys
from pathlib import Path

_BROKER_TESTS = str(Path(__file__).resolve().parents[1] / "broker")
if _BROKER_TESTS not in sys.path:
    sys.path.insert(0, _BROKER_TESTS)
