"""Samples of one cell: warm-up untimed, then rounds that alternate the two versions.

A *sample* is the time of ``number`` consecutive calls divided by ``number``: CUDA events around
the calls on a CUDA device (the benchmark's own ``synchronize`` ends each call, the end event is
waited for), ``time.perf_counter`` on the CPU.  Warm-up calls run first and are not timed: they
fill Triton's and cuBLAS's caches and compile what compiles on first use; the last warm-up call
is timed once to choose ``number`` so that a sample lasts about :data:`SAMPLE_SECONDS` of the
device.  Each round times both versions once, in an order drawn by a seeded coin
(:mod:`.stats` explains why the coin makes the paired test exact).
"""

from __future__ import annotations

import math
import random
import time
from collections.abc import Callable
from dataclasses import dataclass

#: Target length of one sample, per device kind (seconds).
SAMPLE_SECONDS = {"cuda": 0.005, "cpu": 0.05}
WARMUP_CALLS = 3


class Timer:
    """Seconds per call of ``fn`` over ``number`` calls on ``device`` ("cuda" or "cpu")."""

    def __init__(self, device: str) -> None:
        if device not in SAMPLE_SECONDS:
            raise ValueError(f"device must be one of {sorted(SAMPLE_SECONDS)}, got {device!r}")
        self.device = device
        if device == "cuda":
            import torch

            if not torch.cuda.is_available():
                raise RuntimeError("device 'cuda' asked for, but torch.cuda.is_available() is "
                                   "False (use --device cpu for the rehearsal)")
            self._torch = torch

    def __call__(self, fn: Callable[[], object], number: int) -> float:
        if self.device == "cuda":
            torch = self._torch
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            torch.cuda.synchronize()
            start.record()
            for _ in range(number):
                fn()
            end.record()
            end.synchronize()
            return start.elapsed_time(end) / 1e3 / number
        t0 = time.perf_counter()
        for _ in range(number):
            fn()
        return (time.perf_counter() - t0) / number


@dataclass
class Samples:
    """Paired samples of a cell: ``base[i]`` and ``head[i]`` were taken in round ``i``."""

    base: list[float]
    head: list[float]
    number: int
    seconds: float  # wall time spent on the cell, warm-up and set-up included


def warm(timer: Timer, fn: Callable[[], object]) -> float:
    """Run the warm-up calls; return the time of the last one (seconds)."""
    for _ in range(WARMUP_CALLS - 1):
        fn()
    return timer(fn, 1)


def calls_per_sample(per_call: float, device: str) -> int:
    """``number`` such that one sample lasts about :data:`SAMPLE_SECONDS` (at least 1)."""
    if not per_call > 0:
        return 1
    return max(1, min(1000, math.ceil(SAMPLE_SECONDS[device] / per_call)))


def cell_cost(per_call: float, number: int, rounds: int) -> float:
    """Device seconds the timed rounds of one cell take: both versions, every round."""
    return 2 * rounds * number * per_call


def alternate(take_base: Callable[[], float], take_head: Callable[[], float], rounds: int,
              seed: int) -> tuple[list[float], list[float]]:
    """``rounds`` paired samples (each ``take_*`` returns one); the order inside each round is
    a seeded coin flip."""
    coin = random.Random(seed)
    out_base, out_head = [], []
    for _ in range(rounds):
        if coin.random() < 0.5:
            out_base.append(take_base())
            out_head.append(take_head())
        else:
            out_head.append(take_head())
            out_base.append(take_base())
    return out_base, out_head
