"""Independent confirmation of the conformance findings, at realistic settings.

Each finding the property suite reports against a library is re-measured here by a second
route (an exact reference, a second method, a much larger sample) and its size given with a 95 %
confidence interval, at the settings people run (d = 64, m = 256, n = 4096, the library's
defaults). ``python -m kernel_verify.adapters.confirm NAME [--quick]`` prints one finding;
without NAME, every one whose library is installed. The conformance pages quote these numbers
(:mod:`kernel_verify.adapters.conformance`).

Intervals: a proportion gets the Wilson interval; a mean over independent seeds gets
``mean ± t_(0.975, S−1)·sd/√S`` (seeds are independent draws, S ≥ 8).
"""

from __future__ import annotations

import argparse
import importlib
import math
import sys
from collections.abc import Callable

import numpy as np
from scipy import stats

from kernel_verify.adapters._lazy import missing_reason
from kernel_verify.adapters.library import confirmation_owner, records


def wilson(k: int, n: int, z: float = 1.959964) -> tuple[float, float]:
    """95 % Wilson interval of a proportion ``k/n``."""
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return centre - half, centre + half


def mean_ci(x: np.ndarray) -> tuple[float, float, float]:
    """``(mean, low, high)``: the t interval of the mean of independent values."""
    x = np.asarray(x, dtype=np.float64)
    m, s = float(x.mean()), float(x.std(ddof=1))
    h = float(stats.t.ppf(0.975, len(x) - 1)) * s / math.sqrt(len(x))
    return m, m - h, m + h


def fmt_ci(m: float, lo: float, hi: float, digits: int = 3) -> str:
    return f"{m:.{digits}g} (95 % CI {lo:.{digits}g} … {hi:.{digits}g})"


def exact_softmax_attention(q, k, v, causal: bool = False):
    import torch

    s = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
    if causal:
        n = q.shape[-2]
        s = s.masked_fill(torch.ones(n, n, dtype=torch.bool).triu(1), float("-inf"))
    return torch.softmax(s, dim=-1) @ v


# ------------------------------------------------------------------------------ running them
def _in_subprocess(module: str, name: str, quick: bool) -> str:
    """``python -m <module> NAME [--quick]`` in a fresh process: fla's kernels and models need
    ``TRITON_INTERPRET=1`` before triton is imported, and this process may have imported it
    (the library check imports fla)."""
    import os
    import subprocess

    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    cmd = [sys.executable, "-m", module, name, *(["--quick"] if quick else [])]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
    if proc.returncode != 0:
        return f"failed (exit {proc.returncode}): {proc.stderr.strip()[-2000:]}"
    return proc.stdout.strip()


def names() -> list[str]:
    """Every independent measurement, in the order of the library records
    (:attr:`kernel_verify.adapters.library.Library.confirmations`)."""
    return [name for lib in records().values() for name in lib.confirmations]


def run(name: str, quick: bool = False) -> str:
    """The output of measurement ``name``, or why it was skipped (its library is missing)."""
    lib = confirmation_owner(name)
    reason = missing_reason(lib.key)
    if reason:
        return f"skipped: {reason}"
    if lib.confirm_in_subprocess:
        return _in_subprocess(lib.measurements, name, quick)
    fn: Callable[[bool], str] = getattr(importlib.import_module(lib.measurements), name)
    return fn(quick)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m kernel_verify.adapters.confirm",
                                     description=__doc__.split("\n\n")[0])
    known = names()
    parser.add_argument("names", nargs="*", choices=[[], *known], metavar="NAME",
                        help=f"one of {', '.join(known)} (default: all)")
    parser.add_argument("--quick", action="store_true", help="smaller n and fewer seeds")
    args = parser.parse_args(argv)
    for name in args.names or known:
        print(f"## {name}\n{run(name, args.quick)}\n", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
