"""Deterministic seed derivation.

Every random draw in a run comes from a generator whose seed is derived from the experiment seed
and a path of keys (e.g. ``("agent", 17, "memory")``). Keys are hashed with sha256, so derived
seeds are stable across processes and Python versions (Python's ``hash`` of strings is salted).
"""

from __future__ import annotations

import hashlib

import numpy as np


def child_seed(root_seed: int, *keys: object) -> int:
    """Return a 63-bit integer seed derived from ``root_seed`` and ``keys``.

    Args:
        root_seed: The experiment seed (non-negative integer).
        *keys: Any values with a stable ``repr`` (ints, strings); order matters.

    Returns:
        A non-negative integer below 2**63, identical for identical inputs on every platform.
    """
    text = "\x1f".join([str(int(root_seed))] + [repr(k) for k in keys])
    digest = hashlib.sha256(text.encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") >> 1


def child_rng(root_seed: int, *keys: object) -> np.random.Generator:
    """Return a numpy ``Generator`` (PCG64) seeded with ``child_seed(root_seed, *keys)``."""
    return np.random.default_rng(np.random.SeedSequence(child_seed(root_seed, *keys)))
