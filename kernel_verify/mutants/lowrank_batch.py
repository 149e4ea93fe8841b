"""Low-rank attentions coupled across the batch (Linformer, Nyströmformer; docs/math.md §8): one
defect each, for ``properties/test_batch_independence.py``, with correct twins.

Every target claims ``batch_independent`` and is bidirectional. Two skeletons:

* Linformer in NumPy (:func:`linformer`), ``softmax(Q (E K)ᵀ/√d)(F V)`` with the projections
  of the built-in target (:func:`kernel_verify.properties.builtin_lowrank.
  linformer_projections`): ``keys_reshaped`` projects the keys of ``k`` reshaped to
  ``(n, B·H·d)`` instead of per matrix (a reshape where a transpose was meant: right for one
  batch element and head, rows of several elements mixed otherwise); ``batch_max`` takes the
  softmax stabiliser over every score of the batch (equal in exact arithmetic; rounds
  differently, and underflows an element whose scores are far below another's to 0/0);
* Nyströmformer in torch (:func:`nystromformer`), the project's segment means, softmaxes and
  order-7 iteration (6 steps): ``shared_z0`` scales ``Z₀ = Aᵀ/(‖A‖₁‖A‖_∞)`` by the norms'
  maxima over the whole batch (as some published code does); ``flat_landmarks`` takes the
  segment means of the batch flattened into one sequence (``B·H·s`` segments of ``B·H·n``
  rows: right when s divides n, straddling two elements otherwise).

The twins run the same skeletons with every switch off, and the built-in targets themselves.
Run one with ``kernel-verify check kernel_verify.mutants.catalogue:target_<name> --profile
mutants -k batch_independence`` (a twin: ``kernel_verify.mutants.lowrank_batch:control_<twin>``).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable

import numpy as np

from kernel_verify.properties.builtin_lowrank import (
    RANK,
    linformer_projections,
    lowrank_attention_targets,
)
from kernel_verify.properties.protocol import AttentionTarget

__all__ = ["LOWRANK_BATCH_CONTROLS", "LOWRANK_BATCH_KILLERS", "LOWRANK_BATCH_MUTANTS"]

CLAIMS = frozenset({"batch_independent"})
FLOATS = ("float64", "float32")
PROPERTY = "batch_independence::test_batch_elements_alone_give_their_batch_outputs_bitwise"


def linformer(q, k, v, *, causal: bool, seed: int = 0, keys_reshaped: bool = False,
              batch_max: bool = False, **_):
    """``softmax(Q (E K)ᵀ/√d)(F V)`` in NumPy with the switches of the module docstring."""
    if causal:
        raise ValueError("causal=True: Linformer is bidirectional")
    n, d = k.shape[-2], k.shape[-1]
    e, f = linformer_projections(n, seed, q)
    if keys_reshaped:
        kp = (e @ k.reshape(n, -1)).reshape(*k.shape[:-2], e.shape[0], d)
    else:
        kp = e @ k
    s = (q @ np.swapaxes(kp, -1, -2)) * q.dtype.type(1.0 / math.sqrt(d))
    top = s.max() if batch_max else s.max(axis=-1, keepdims=True)
    with np.errstate(under="ignore", invalid="ignore", divide="ignore"):
        w = np.exp(s - top)
        return (w / w.sum(axis=-1, keepdims=True)) @ (f @ v)


def _flat_segment_means(x, s: int):
    """Segment means of ``x (..., n, d)`` flattened to one sequence of ``B·H·n`` rows cut into
    ``B·H·s`` segments (``array_split`` sizes)."""
    import torch

    lead, d = x.shape[:-2], x.shape[-1]
    flat = x.reshape(-1, d)
    parts = np.array_split(np.arange(flat.shape[0]), s * math.prod(lead))
    sizes = [len(p) for p in parts]
    means = torch.stack([p.mean(dim=0) for p in torch.split(flat, sizes, dim=0)])
    return means.reshape(*lead, s, d)


def _pinv(a, n_iter: int, shared_z0: bool):
    """The order-7 iteration from ``Z₀ = Aᵀ/(‖A‖₁‖A‖_∞)``, norms per matrix or over the
    batch."""
    import torch

    abs_a = a.abs()
    norm1 = abs_a.sum(dim=-2).amax(dim=-1)
    norm_inf = abs_a.sum(dim=-1).amax(dim=-1)
    if shared_z0:
        norm1, norm_inf = norm1.amax(), norm_inf.amax()
    z = a.transpose(-1, -2) / (norm1 * norm_inf)[..., None, None]
    eye = torch.eye(a.shape[-1], dtype=a.dtype, device=a.device)
    for _ in range(n_iter):
        az = a @ z
        z = 0.25 * z @ (13 * eye - az @ (15 * eye - az @ (7 * eye - az)))
    return z


def nystromformer(q, k, v, *, causal: bool, seed: int = 0, shared_z0: bool = False,
                  flat_landmarks: bool = False, **_):
    """``sm(Q K̃ᵀ)·Z·(sm(Q̃ Kᵀ) V)`` in torch, ``min(RANK, n)`` landmarks, 6 iterations, with
    the switches of the module docstring."""
    import torch

    from kernel_verify.impls.torch.nystrom import segment_means

    if causal:
        raise ValueError("causal=True: Nyströmformer is bidirectional")
    s = min(RANK, int(q.shape[-2]))
    scale = q.shape[-1] ** -0.25
    qs, ks = q * scale, k * scale
    means = _flat_segment_means if flat_landmarks else segment_means
    ql, kl = means(qs, s), means(ks, s)
    f = torch.softmax(qs @ kl.transpose(-1, -2), dim=-1)
    a = torch.softmax(ql @ kl.transpose(-1, -2), dim=-1)
    b = torch.softmax(ql @ ks.transpose(-1, -2), dim=-1)
    return f @ (_pinv(a, 6, shared_z0) @ (b @ v))


def _target(name: str, fn: Callable, backend: str, **switches) -> AttentionTarget:
    return AttentionTarget(name, lambda q, k, v, **kw: fn(q, k, v, **kw, **switches), CLAIMS,
                           backends=(backend,), dtypes=FLOATS)


def _linformer(**switches) -> Callable[[str], AttentionTarget]:
    return lambda name: _target(name, linformer, "numpy", **switches)


def _nystromformer(**switches) -> Callable[[str], AttentionTarget]:
    return lambda name: _target(name, nystromformer, "torch", **switches)


LOWRANK_BATCH_MUTANTS: dict[str, tuple[str, Callable[[str], AttentionTarget]]] = {
    "linformer_keys_reshaped_not_transposed": (
        "Linformer projecting the keys of k.reshape(n, -1): rows of several batch elements "
        "and heads mixed (right for one element and head)", _linformer(keys_reshaped=True)),
    "linformer_softmax_max_over_batch": (
        "Linformer whose softmax stabiliser is the maximum score of the whole batch",
        _linformer(batch_max=True)),
    "nystromformer_z0_scale_over_batch": (
        "torch Nyströmformer whose iterative pseudo-inverse starts from Z₀ = Aᵀ/(‖A‖₁‖A‖_∞) "
        "with both norms maximised over the batch", _nystromformer(shared_z0=True)),
    "nystromformer_landmarks_of_flattened_batch": (
        "torch Nyströmformer taking segment-mean landmarks of the batch flattened into one "
        "sequence (segments straddle two elements unless the landmark count divides n)",
        _nystromformer(flat_landmarks=True)),
}

#: The property each mutant is written for.
LOWRANK_BATCH_KILLERS: dict[str, tuple[str, ...]] = {
    name: (PROPERTY,) for name in LOWRANK_BATCH_MUTANTS}


def _builtin_twins() -> list[AttentionTarget]:
    return [dataclasses.replace(t, name=t.name.replace("lowrank:", "control:lowrank_", 1))
            for t in lowrank_attention_targets()]


#: Twins: the skeletons with every switch off, and the built-in low-rank targets.
LOWRANK_BATCH_CONTROLS: dict[str, Callable[[], list[AttentionTarget]]] = {
    "linformer_skeleton_correct": lambda: [
        _linformer()("control:linformer_skeleton_correct")],
    "nystromformer_skeleton_correct": lambda: [
        _nystromformer()("control:nystromformer_skeleton_correct")],
    "lowrank_builtin_correct": _builtin_twins,
}


def __getattr__(attr: str) -> list[AttentionTarget]:
    """``<mutant name>`` / ``control_<twin>``: the targets."""
    if attr in LOWRANK_BATCH_MUTANTS:
        return [LOWRANK_BATCH_MUTANTS[attr][1](f"mutant:{attr}")]
    if attr.startswith("control_") and attr.removeprefix("control_") in LOWRANK_BATCH_CONTROLS:
        return LOWRANK_BATCH_CONTROLS[attr.removeprefix("control_")]()
    raise AttributeError(f"module {__name__!r} has no attribute {attr!r}")
