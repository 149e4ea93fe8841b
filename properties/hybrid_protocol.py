"""The hybrid attention protocol: :class:`HybridAttentionTarget`, a causal attention that is
softmax over a sliding window of the ``w`` most recent keys and linear attention with a feature
map φ over the keys before it (docs/math.md §22; LoLCATs, Based), run by
``properties/test_hybrid_attention.py``.

Calls, arrays ``(B, H, T, d)`` in layout BHTD on one backend and dtype:

* ``attention(q, k, v, *, window, initial_state=None) -> (out, state)``: the full-sequence form
  (any window ``w ≥ 0``; the suite draws ``w`` from 0 to past ``T``) continuing from a state;
* ``step(state, q_t, k_t, v_t, *, window) -> (state, o_t)`` (optional): one token, ``q_t, k_t
  (B, H, d)``; ``state=None`` is the empty state. States are opaque tuples of arrays handed
  back to the target's own forms.

**White box** (needed for the exact reference and the derived bound): ``features(x, role)``
returns the float64 NumPy features ``φ(x)`` the target applies (``role`` ``"q"`` or ``"k"``) to
``x (B, H, T, d)``; ``mix`` is the factor ``γ`` of the window's weights and ``scale`` the score
scale (None: ``1/√d``): query ``i`` weighs key ``j ≤ i`` by ``γ·exp(scale·q_iᵀk_j)`` when
``i − w < j ≤ i`` and by ``φ(q_i)ᵀφ(k_j)`` when ``j ≤ i − w``, normalised by the sum of its
weights. ``feature_ulps``: how many ulps of the compute dtype the features the target computes
may be off (default 2: elu + 1's exponential).

Each call of ``attention`` and ``step`` is checked (q, k, v before, the returned pair after):
a bad one is a ValueError/TypeError naming it (:func:`_checked_hybrid_form`).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from kernel_verify.impls.sequence_validation import check_qkv_call
from kernel_verify.impls.systems import SYSTEM_CLAIMS
from kernel_verify.impls.validation import check_backends_and_dtypes as _check_backends_and_dtypes
from kernel_verify.impls.validation import check_callable_field as _check_callable
from kernel_verify.impls.validation import check_claim_set as _check_claims
from kernel_verify.impls.validation import check_form_result, check_scalar
from kernel_verify.impls.validation import check_known_failures as _check_known_failures
from kernel_verify.impls.validation import check_target_name as _check_name
from kernel_verify.impls.validation import check_ulps_field as _check_ulps
from kernel_verify.impls.validation import target_error as _fail
from kernel_verify.properties import protocol as _protocol  # noqa: F401  (known_failures check)

__all__ = ["HYBRID_CLAIMS", "HybridAttentionTarget"]

#: The claims a hybrid target takes: words of the one vocabulary
#: (:data:`kernel_verify.impls.systems.SYSTEM_CLAIMS`).
HYBRID_CLAIMS = {w: SYSTEM_CLAIMS[w] for w in ("differentiable", "validates_input",
                                               "half_in_float32")}


@dataclass(frozen=True)
class HybridAttentionTarget:
    """A sliding-window softmax + linear attention (module docstring)."""

    name: str
    claims: frozenset[str]
    attention: Callable[..., Any]
    features: Callable[[np.ndarray, str], np.ndarray]
    step: Callable[..., Any] | None = None
    mix: float = 1.0
    scale: float | None = None
    backends: tuple[str, ...] = ("numpy",)
    dtypes: tuple[str, ...] = ("float64",)
    feature_ulps: int = 2
    known_failures: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        _check_name(self.name)
        _check_claims(self.name, self.claims, HYBRID_CLAIMS)
        _check_known_failures(self.name, self.known_failures, "HybridAttentionTarget")
        for f, optional in (("attention", False), ("features", False), ("step", True)):
            _check_callable(self.name, f, getattr(self, f), optional=optional)
        for scalar in ("mix", "scale"):
            value = getattr(self, scalar)
            if value is None and scalar == "scale":
                continue
            try:
                check_scalar(scalar, value, positive=True)
            except (TypeError, ValueError) as err:
                problem = str(err).removeprefix(f"{scalar} ")
                raise _fail(type(err), self.name, scalar, problem) from None
        _check_backends_and_dtypes(self.name, self.backends, self.dtypes)
        _check_ulps(self.name, "feature_ulps", self.feature_ulps)
        if "differentiable" in self.claims and "torch" not in self.backends:
            raise _fail(ValueError, self.name, "claims", "has 'differentiable' but backends "
                        f"{self.backends} has no 'torch'")
        for form in ("attention", "step"):  # every call's inputs and result (issue #45)
            if getattr(self, form) is not None:
                object.__setattr__(self, form, _checked_hybrid_form(self, form))

    def has(self, claim: str) -> bool:
        return claim in self.claims

    def accepts(self, library: str, dtype: str) -> bool:
        return library in self.backends and dtype in self.dtypes


# --- Checks of every call (issue #45) ----------------------------------------------------------
# The queries, keys and values of each call of ``attention`` and ``step`` are checked before the
# target runs (arrays of one backend, off the meta device, of rank 4 — a step's of rank 3 — k of
# q's shape, v of q's leading shape), and what it returns after (a pair, in the documented
# order): a bad input or result is a ValueError/TypeError naming it, not a wrong value computed
# from a batch-less array or an unpacking error inside a property. The target's own function
# stays reachable as ``form._kv_unchecked``.


def _is_array(x: Any) -> bool:
    return hasattr(x, "shape") and hasattr(x, "dtype")


def _check_hybrid_inputs(step: bool, args: tuple, kwargs: dict) -> None:
    names = ("q_t", "k_t", "v_t") if step else ("q", "k", "v")
    got = dict(zip(names, args[1:] if step else args, strict=False)) | kwargs
    check_qkv_call(names, got, step=step, axes="(B, H, d)" if step else "(B, H, T, d)")


def _check_hybrid_result(t: HybridAttentionTarget, form: str, result: Any) -> None:
    check_form_result(t.name, form, result, none_entries=True, state_name="state")


def _checked_hybrid_form(t: HybridAttentionTarget, form: str) -> Callable[..., Any]:
    """``t``'s ``form`` with each call's q, k, v checked first and its result after."""
    fn = getattr(t, form)
    fn = getattr(fn, "_kv_unchecked", fn)

    @functools.wraps(fn)
    def checked(*args: Any, **kwargs: Any) -> Any:
        _check_hybrid_inputs(form == "step", args, kwargs)
        result = fn(*args, **kwargs)
        _check_hybrid_result(t, form, result)
        return result

    checked._kv_unchecked = fn  # type: ignore[attr-defined]
    return checked
