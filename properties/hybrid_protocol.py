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
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from kernel_verify.impls.systems import SYSTEM_CLAIMS
from kernel_verify.impls.validation import check_backends_and_dtypes as _check_backends_and_dtypes
from kernel_verify.impls.validation import check_callable_field as _check_callable
from kernel_verify.impls.validation import check_claim_set as _check_claims
from kernel_verify.impls.validation import check_known_failures as _check_known_failures
from kernel_verify.impls.validation import check_scalar
from kernel_verify.impls.validation import check_target_name as _check_name
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
        try:
            check_scalar("mix", self.mix, positive=True)
            if self.scale is not None:
                check_scalar("scale", self.scale, positive=True)
        except (TypeError, ValueError) as err:
            raise _fail(type(err), self.name, "mix/scale", str(err)) from None
        _check_backends_and_dtypes(self.name, self.backends, self.dtypes)
        if isinstance(self.feature_ulps, bool) or not isinstance(self.feature_ulps, int) \
                or self.feature_ulps < 0:
            raise _fail(TypeError if not isinstance(self.feature_ulps, int | float) else
                        ValueError, self.name, "feature_ulps", "must be an int >= 0 (ulps of "
                        f"the compute dtype), got {self.feature_ulps!r}")
        if "differentiable" in self.claims and "torch" not in self.backends:
            raise _fail(ValueError, self.name, "claims", "has 'differentiable' but backends "
                        f"{self.backends} has no 'torch'")

    def has(self, claim: str) -> bool:
        return claim in self.claims

    def accepts(self, library: str, dtype: str) -> bool:
        return library in self.backends and dtype in self.dtypes
