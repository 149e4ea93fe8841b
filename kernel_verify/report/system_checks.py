"""The exact values, derived bounds and form calls behind the gated and hybrid system pages.

A library module cannot import the property files themselves (``properties/test_*.py``: their
collection-time code selects targets from ``KV_TARGET``; ``tests/test_layering.py``), so this
module composes the same library functions those files compose — the mpmath references of
:mod:`kernel_verify.verify.references`, the derived bounds of
:mod:`kernel_verify.verify.gated_bounds`, :mod:`kernel_verify.verify.recurrence_bounds` and
:mod:`kernel_verify.verify.hybrid_bounds`, the inputs of
:func:`kernel_verify.properties.checks.forms.draw_inputs` and the calling convention of
:class:`kernel_verify.properties.token_inputs.TokenInputs` — in the same way:

* the gated system pages call the recurrent properties' own library
  (:mod:`kernel_verify.properties.checks.recurrent`: draws, form calls, the exact recurrence
  and its bound) — one copy for the property and the page;
* :func:`hybrid_exact` calls the hybrid property's own truth
  (:mod:`kernel_verify.properties.checks.hybrid`); :func:`hybrid_inputs` is its
  ``draw_inputs``.

``tests/test_report_pages.py`` holds the hybrid pair equal, bit for bit, to the property file's
functions on the same inputs, so the two cannot drift apart unseen.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from kernel_verify.properties.checks import recurrent as rec
from kernel_verify.properties.checks.forms import Shape, draw_inputs
from kernel_verify.properties.strategies import QKV, generator
from kernel_verify.properties.token_inputs import TokenInputs
from kernel_verify.verify.backends import Backend, as_float64

__all__ = ["GATE_REGIMES", "gated_exact", "gated_inputs", "gated_run", "gated_steps",
           "hybrid_exact", "hybrid_inputs"]

#: The gate regimes of the report's draws: ``mixed`` (``g = max(−Exp(1), min_log_gate)``) and
#: ``strong_run`` (the property's ``strong_runs``: half the sequence, at least 3 tokens, at
#: ``min_log_gate``, the rest in ``[−10⁻³, 0]``): the first and the strong-decay regime of the
#: gated property.
GATE_REGIMES = ("mixed", "strong_run")
_REGIME = {"mixed": "mixed", "strong_run": "strong_runs"}


def gated_inputs(target: Any, backend: Backend, shape: Shape, regime: str
                 ) -> tuple[QKV, TokenInputs]:
    """``(q, k, v)`` and the token inputs as the target sees them (rounded to the backend's
    dtype), drawn by the property's own library (:mod:`kernel_verify.properties.checks.
    recurrent`: gates of the regime, β uniform, the transition's vectors; a gate
    parametrisation's raw input and parameters)."""
    if regime not in _REGIME:
        raise ValueError(f"regime must be one of {GATE_REGIMES}, got {regime!r}")
    x = rec.seen_inputs(draw_inputs(shape), backend)
    g = rec.seen_gates(rec.draw_token_inputs(target, shape, _REGIME[regime], stream="report"),
                       backend)
    return x, g


def gated_exact(target: Any, backend: Backend, x: QKV, g: TokenInputs
                ) -> tuple[np.ndarray, np.ndarray]:
    """``(exact outputs, derived bound of a computed output)`` in the backend's dtype: the
    property's own :func:`kernel_verify.properties.checks.recurrent.exact` (docs/math.md §16,
    §23)."""
    ref, _, bound, _ = rec.exact(target, backend, x, g)
    return ref, bound


def gated_run(target: Any, backend: Backend, x: QKV, g: TokenInputs, *, form: str, seed: int,
              chunk: int) -> np.ndarray:
    """The outputs (float64, BHTD) of one full-sequence form (``chunked``: at the target's own
    chunk size where it declares sizes)."""
    out, _ = rec.run(target, backend, x, g, form=form, seed=seed, chunk=chunk)
    return np.asarray(out, dtype=np.float64)


def gated_steps(target: Any, backend: Backend, x: QKV, g: TokenInputs, *, seed: int
                ) -> np.ndarray:
    """The outputs (float64) of the step form, one token at a time from no state."""
    out, _ = rec.run_steps(target, backend, x, g, seed=seed)
    return np.asarray(out, dtype=np.float64)


# ------------------------------------------------------------------ hybrid attention
def hybrid_inputs(backend: Backend, seed: int, t: int, *, h: int = 2, d: int = 3, dv: int = 2,
                  scale: float = 1.0) -> tuple[tuple, tuple]:
    """``(q, k, v)`` on the backend and the float64 values it sees: ``U(−1, 1)`` entries (q and
    k times ``scale``), the hybrid property's inputs."""
    rng = generator(seed, "hybrid inputs")
    raw = (rng.uniform(-1, 1, (1, h, t, d)) * scale, rng.uniform(-1, 1, (1, h, t, d)) * scale,
           rng.uniform(-1, 1, (1, h, t, dv)))
    arrays = tuple(backend.from_numpy(a) for a in raw)
    return arrays, tuple(as_float64(a) for a in arrays)


def hybrid_exact(target: Any, backend: Backend, seen: tuple, window: int,
                 reference: str = "hybrid") -> tuple[np.ndarray, np.ndarray]:
    """``(exact output, derived bound)`` of the whole sequence ``seen``: the hybrid property's
    own :func:`kernel_verify.properties.checks.hybrid.exact`."""
    from kernel_verify.properties.checks.hybrid import exact

    return exact(target, backend, seen, window, reference)
