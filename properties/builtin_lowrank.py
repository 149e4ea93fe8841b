"""The project's low-rank attentions (Linformer, Nyströmformer; docs/math.md §8) as attention
targets for the batch-independence property (``properties/test_batch_independence.py``) only.

They are not among :func:`kernel_verify.properties.builtin.builtin_targets`: their outputs do not
tend to softmax attention at a fixed rank or landmark count, so the attention identities'
derived bounds do not apply to them (``properties/builtin.py``: ``UNTESTED_SYSTEMS``). Batch
independence needs no such bound: it compares a function with itself (bitwise).

Each target is made from its descriptor (:mod:`kernel_verify.impls.systems`, kind
``kernel_approximation``): it calls the descriptor's NumPy or torch function and takes the
descriptor's claims that an attention target takes (``batch_independent``). What a call needs
besides ``q, k, v`` comes from :data:`LOWRANK_PARAMETERS`, drawn from the call's ``seed`` alone
(the same for every batch element and for both runs of the property):

* ``linformer``: projections ``E, F (r, n)``, ``r = min(RANK, n)``, entries ``N(0, 1/r)``
  (Wang et al. 2020 draw their fixed projections so);
* ``nystromformer``: ``min(RANK, n)`` segment-mean landmarks, the default 6 iterations of the
  pseudo-inverse.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from kernel_verify.impls.systems import TARGET_CLAIM_WORDS, all_systems
from kernel_verify.impls.validation import is_torch
from kernel_verify.properties.protocol import AttentionTarget
from kernel_verify.properties.strategies import generator

__all__ = ["LOWRANK_PARAMETERS", "RANK", "linformer_projections", "lowrank_attention_targets",
           "lowrank_target"]

#: Rank of the Linformer projections and landmark count of the Nyströmformer (at most n).
RANK = 4



def linformer_projections(n: int, seed: int, like: Any) -> tuple[Any, Any]:
    """``E, F (r, n)``, ``r = min(RANK, n)``, entries ``N(0, 1/r)`` from ``seed``, in ``like``'s
    backend, dtype and device."""
    rng = generator(seed, "linformer_projections")
    r = min(RANK, n)
    e, f = (rng.standard_normal((r, n)) / np.sqrt(r) for _ in range(2))
    if is_torch(like):
        import torch

        return (torch.as_tensor(e, dtype=like.dtype, device=like.device),
                torch.as_tensor(f, dtype=like.dtype, device=like.device))
    return e.astype(like.dtype), f.astype(like.dtype)


def _linformer(fn: Callable[..., Any], q, k, v, seed: int):
    e, f = linformer_projections(int(k.shape[-2]), seed, q)
    return fn(q, k, v, e, f)


def _nystromformer(fn: Callable[..., Any], q, k, v, seed: int):
    return fn(q, k, v, min(RANK, int(q.shape[-2])))


#: System name -> ``(function, q, k, v, seed) -> output``: how the property calls it (a new
#: low-rank attention claiming ``batch_independent`` adds its entry; ``lowrank_target`` names
#: this table when it is missing).
LOWRANK_PARAMETERS: dict[str, Callable[..., Any]] = {
    "linformer": _linformer,
    "nystromformer": _nystromformer,
}


def lowrank_target(name: str, *, backends=("numpy", "torch"), dtypes=("float64", "float32"),
                   label: str | None = None) -> AttentionTarget:
    """The low-rank attention system ``name`` as a bidirectional attention target (module
    docstring) calling its descriptor's functions."""
    system = next((s for s in all_systems(kind="kernel_approximation") if s.name == name), None)
    if system is None or name not in LOWRANK_PARAMETERS:
        known = sorted(LOWRANK_PARAMETERS)
        raise ValueError(f"name {name!r} is not a low-rank attention of LOWRANK_PARAMETERS "
                         f"(properties/builtin_lowrank.py); known: {known}")
    run = LOWRANK_PARAMETERS[name]

    def attention(q, k, v, *, causal: bool, seed: int = 0, **_: Any):
        if causal:
            raise ValueError(f"causal=True: {name} is bidirectional (no causal form)")
        return run(system.resolve("torch" if is_torch(q) else "numpy"), q, k, v, seed)

    claims = system.claims & frozenset(TARGET_CLAIM_WORDS["attention"])
    return AttentionTarget(label or f"lowrank:{name}", attention, claims,
                           backends=tuple(backends), dtypes=tuple(dtypes))


def lowrank_attention_targets() -> list[AttentionTarget]:
    """A target per low-rank attention system claiming ``batch_independent``."""
    return [lowrank_target(s.name)
            for s in all_systems(kind="kernel_approximation", claims=("batch_independent",))]
