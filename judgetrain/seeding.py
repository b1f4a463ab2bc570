"""Hash-based seeding: the same parts give the same seed in every process and
on every machine (never Python's built-in string hashing, which is salted per process).
Docs: "reference/development.md".
"""

from __future__ import annotations

import hashlib

import numpy as np

__all__ = ["derive_seed", "rng_for"]


def derive_seed(*parts) -> int:
    """Stable 63-bit seed from ``parts`` (each turned into ``str``, NUL-joined,
    sha256). ``1`` and ``"1"`` give the same seed. Fits numpy, torch and ``random``."""
    digest = hashlib.sha256("\x00".join(str(p) for p in parts).encode()).digest()
    return int.from_bytes(digest[:8], "big") >> 1


def rng_for(*parts) -> np.random.Generator:
    """A numpy generator seeded by :func:`derive_seed` of ``parts``."""
    return np.random.default_rng(derive_seed(*parts))
