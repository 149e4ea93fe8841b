"""The log-gates a recurrent target computes from its raw gate input (docs/math.md §23.1),
evaluated in float64 by stable formulas — the values the exact recurrence is then run on.

A target declaring ``gate_input`` other than ``"log"`` (``impls/systems.py``'s
``GATE_INPUTS``) takes a raw input ``a`` in place of the log-gates and computes ``g ≤ 0``
itself:

* ``"mamba"``: ``g = −exp(A_log)·softplus(a + dt_bias)`` — Mamba2's discretised decay
  ``exp(Δ·A)`` with ``A = −exp(A_log)`` and ``Δ = softplus(a + dt_bias)`` (Dao & Gu, arXiv
  2405.21060), the gate of Gated DeltaNet (arXiv 2412.06464) and, per key dimension, of KDA
  (Kimi Linear technical report, 2025);
* ``"bounded"``: ``g = lower·σ(a)``, ``g ∈ (lower, 0)`` (RWKV-7's decay
  ``exp(−e^(−1/2)σ(a))``, arXiv 2503.14456);
* ``"bounded_affine"``: ``g = lower·σ(exp(A_log)·(a + dt_bias))`` (KDA's lower-bounded gate).

``softplus(x) = log(1 + e^x)`` is evaluated as ``logaddexp(0, x)`` and ``σ(x)`` from
``e^(−|x|)``: relative error a few ulps of float64 for every ``x`` (their bound:
:func:`kernel_verify.verify.gate_input_bounds.gate_input_error`).
"""

from __future__ import annotations

import numpy as np

__all__ = ["GATE_INPUT_KINDS", "gate_input_arrays", "log_gates_from_input", "sigmoid",
           "softplus"]

#: The parametrisations evaluated here (``"log"``: the gates are given).
GATE_INPUT_KINDS = ("log", "mamba", "bounded", "bounded_affine")


def softplus(x: np.ndarray) -> np.ndarray:
    """``log(1 + e^x)`` without overflow."""
    return np.logaddexp(0.0, x)


def sigmoid(x: np.ndarray) -> np.ndarray:
    """``1/(1 + e^(−x))`` from ``e^(−|x|)`` (no overflow, relative accuracy for every x)."""
    e = np.exp(-np.abs(x))
    return np.where(x >= 0, 1.0 / (1.0 + e), e / (1.0 + e))


def gate_input_arrays(kind: str, a: np.ndarray, *, A_log: np.ndarray | None = None,
                      dt_bias: np.ndarray | None = None, lower: float | None = None
                      ) -> dict[str, np.ndarray | float]:
    """The checked float64 inputs of ``kind``: ``a`` and, as the kind needs them, ``A_log``,
    ``dt_bias`` (each broadcasting against ``a``) and ``lower < 0``. ValueError names the
    argument at fault."""
    if kind not in GATE_INPUT_KINDS:
        raise ValueError(f"gate input kind must be one of {', '.join(GATE_INPUT_KINDS)}, got "
                         f"{kind!r}")
    out: dict[str, np.ndarray | float] = {"a": np.asarray(a, dtype=np.float64)}
    if kind in ("mamba", "bounded_affine"):
        for name, x in (("A_log", A_log), ("dt_bias", dt_bias)):
            if x is None:
                raise ValueError(f"{name} is required for gate input {kind!r}")
            arr = np.asarray(x, dtype=np.float64)
            try:
                shape = np.broadcast_shapes(arr.shape, out["a"].shape)
            except ValueError:
                shape = None
            if shape != out["a"].shape:
                raise ValueError(f"{name} of shape {arr.shape} must broadcast against a of "
                                 f"shape {out['a'].shape}")
            if not np.isfinite(arr).all():
                raise ValueError(f"{name} must be finite")
            out[name] = arr
    if kind in ("bounded", "bounded_affine"):
        if isinstance(lower, bool) or not isinstance(lower, int | float) \
                or not -np.inf < lower < 0:
            raise ValueError(f"lower must be a finite number < 0 for gate input {kind!r}, got "
                             f"{lower!r}")
        out["lower"] = float(lower)
    if not np.isfinite(out["a"]).all():
        raise ValueError("a (the raw gate input) must be finite")
    return out


def log_gates_from_input(kind: str, a: np.ndarray, *, A_log: np.ndarray | None = None,
                         dt_bias: np.ndarray | None = None, lower: float | None = None
                         ) -> np.ndarray:
    """The log-gates ``g ≤ 0`` (float64, the shape of ``a``) the parametrisation ``kind``
    (module docstring) gives; ``"log"`` returns ``a`` itself."""
    arr = gate_input_arrays(kind, a, A_log=A_log, dt_bias=dt_bias, lower=lower)
    x = arr["a"]
    if kind == "log":
        return np.array(x)
    if kind == "mamba":
        return -np.exp(arr["A_log"]) * softplus(x + arr["dt_bias"])
    if kind == "bounded":
        return arr["lower"] * sigmoid(x)
    return arr["lower"] * sigmoid(np.exp(arr["A_log"]) * (x + arr["dt_bias"]))
