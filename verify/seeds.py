"""One way to turn a seed into random streams: ``numpy.random.SeedSequence``.

A *seed* is a non-negative integer (a Hypothesis-drawn value, a CLI argument, a logged entropy).
Everything random in the suite is derived from it here, so a failure message that prints the seed
(and the key) reproduces the case:

* ``rng(seed)`` is ``numpy.random.default_rng(seed)`` exactly (NumPy seeds a generator from an
  integer through ``SeedSequence(seed)``), so code that used the plain form keeps its streams.
* ``rng(seed, *key)`` is a *child* stream: ``SeedSequence(seed, spawn_key=key)``, the stream that
  ``SeedSequence(seed).spawn`` hands out at that position (NumPy's documented mechanism for
  independent streams: children never overlap each other or the parent in practice). Key parts
  are non-negative integers (an index, a draw number) or short strings naming the use
  ("row_law.directions"); a string is mapped to an integer by CRC-32.
* ``child_seeds(seed, n, *key)`` gives ``n`` integer seeds (each < 2⁶³) for code that takes an
  integer rather than a generator (third-party ``sample_fn(x, seed)``, worker processes); child i
  is ``SeedSequence(seed, spawn_key=(*key, i))`` reduced to one 63-bit word.
* ``fresh_entropy()`` is a new random seed (for runs that must not repeat, e.g. calibration);
  print it so the run can be repeated.

Do not derive seeds by arithmetic (``seed + 1``, ``[seed, 7]``, hashing): related integers give
unrelated streams only by accident of the hash, and nothing documents which offsets are taken.
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence

import numpy as np

__all__ = ["child_seeds", "fresh_entropy", "key_code", "rng", "seed_sequence"]

KeyPart = int | str


def key_code(part: KeyPart) -> int:
    """A key part as a non-negative integer: itself, or the CRC-32 of a string."""
    if isinstance(part, bool) or not isinstance(part, int | np.integer | str):
        raise TypeError(f"seed key parts must be ints or strs, got {type(part).__name__}")
    if isinstance(part, str):
        return zlib.crc32(part.encode())
    if part < 0:
        raise ValueError(f"seed key parts must be >= 0, got {part}")
    return int(part)


def _entropy(seed: int | Sequence[int]) -> int | list[int]:
    if isinstance(seed, bool):
        raise TypeError("seed must be an integer, got bool")
    if isinstance(seed, int | np.integer):
        if seed < 0:
            raise ValueError(f"seed must be >= 0, got {seed}")
        return int(seed)
    return [key_code(int(s)) for s in seed]


def seed_sequence(seed: int | Sequence[int], *key: KeyPart) -> np.random.SeedSequence:
    """``SeedSequence(seed)`` itself (no key) or its child at ``key``."""
    codes = tuple(key_code(k) for k in key)
    return np.random.SeedSequence(_entropy(seed), spawn_key=codes)


def rng(seed: int | Sequence[int], *key: KeyPart) -> np.random.Generator:
    """A generator for ``seed`` (and ``key``); see the module docstring."""
    return np.random.default_rng(seed_sequence(seed, *key))


def child_seeds(seed: int | Sequence[int], n: int, *key: KeyPart) -> list[int]:
    """``n`` independent integer seeds derived from ``seed`` (and ``key``), each in ``[0, 2⁶³)``."""
    if isinstance(n, bool) or not isinstance(n, int) or n < 0:
        raise ValueError(f"n must be a non-negative int, got {n!r}")
    return [
        int(seed_sequence(seed, *key, i).generate_state(1, np.uint64)[0] >> np.uint64(1))
        for i in range(n)
    ]


def fresh_entropy() -> int:
    """A new, unpredictable seed in ``[0, 2⁶³)`` (from the operating system)."""
    return int(np.random.SeedSequence().entropy) % 2**63
