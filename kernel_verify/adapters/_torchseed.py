"""Seeding libraries that draw from torch's global generator, without leaking the state."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import numpy as np


@contextlib.contextmanager
def torch_seeded(seed: int) -> Iterator[None]:
    """Run the block with torch's global CPU generator seeded by ``seed``, then restore it."""
    import torch

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(int(seed) % 2**63)
        yield


def as_torch(*arrays: np.ndarray):
    import torch

    return tuple(torch.as_tensor(np.asarray(a)) for a in arrays)
