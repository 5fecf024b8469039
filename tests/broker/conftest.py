"""Fixtures of the broker tests (builders live in broker_helpers.py)."""

from __future__ import annotations

import pytest

from governed_broker.broker.governed import GovernedBroker


@pytest.fixture
def close_brokers():
    """Collects brokers and closes them after the test."""
    brokers: list[GovernedBroker] = []
    yield brokers
    for b in brokers:
        b.close()
