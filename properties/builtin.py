"""The built-in targets: everything this project implements, as property-suite targets.

Registry feature maps, attention with registry maps and exact softmax attention (NumPy and
torch), every random-matrix construction, and Nyström (``builtin_approx``). The property suite
(``properties/targets.py``) and ``kernel-verify calibrate`` read them from here.
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import cache

import numpy as np

from kernel_verify.impls.attention import feature_map_attention
from kernel_verify.impls.numpy.attention import softmax_attention
from kernel_verify.impls.random_matrices import (
    MATRICES,
    draw_matrix,
)
from kernel_verify.impls.registry import FeatureMap, all_maps, get
from kernel_verify.impls.systems import get_system
from kernel_verify.properties.builtin_forms import registry_forms
from kernel_verify.properties.protocol import (
    ATTENTION_CLAIMS,
    MATRIX_CLAIMS,
    AttentionTarget,
    KernelApproxTarget,
    RandomMatrixTarget,
    Target,
)

ALL_DTYPES = ("float64", "float32", "float16", "bfloat16")


def _registry_attention(entry: FeatureMap, m: int, claims: Iterable[str],
                        dtypes: tuple[str, ...] = ALL_DTYPES,
                        libraries: tuple[str, ...] = ("numpy", "torch")) -> AttentionTarget:
    """A registry map's attention on NumPy and torch (the backend is the input's; the float64
    parameter draw goes to the input's device)."""
    def attention(q, k, v, *, causal, seed, m=m):
        params = entry.draw(np.random.default_rng(seed), q.shape[-1], m, entry.config)
        if not isinstance(q, np.ndarray):
            from kernel_verify.impls.torch.convert import to_torch

            params = to_torch(params, device=q.device)
        return feature_map_attention(entry, params, q, k, v, causal=causal)

    if "torch" in libraries:  # torch inputs that require grad get autograd's gradients
        claims = {*claims, "differentiable", "deterministic_backward"}
    # the project's attention computes half types in float32 (impls/systems.py, every attention)
    claims = {*claims, "half_in_float32"}
    # every form of causal attention with its state (docs/math.md §13)
    return AttentionTarget(f"attention:{entry.name}", attention, frozenset(claims),
                           backends=libraries, dtypes=dtypes, **registry_forms(entry, m))


def _exact_softmax(q, k, v, *, causal, seed, **_):
    if isinstance(q, np.ndarray):
        return softmax_attention(q, k, v, causal=causal)
    from kernel_verify.impls.torch.attention import softmax_attention as torch_softmax

    return torch_softmax(q, k, v, causal=causal)


def _matrix_target(kind: str) -> RandomMatrixTarget:
    """The construction's target, its claims read from its one declaration
    (:func:`kernel_verify.impls.systems.get_system`; the words the target protocol knows)."""
    claims = get_system(kind).claims & set(MATRIX_CLAIMS)
    return RandomMatrixTarget(
        f"matrix:{kind}", lambda rng, m, d, kind=kind: draw_matrix(kind, rng, m, d),
        frozenset(claims),
    )


def _builtin_approximations() -> list[KernelApproxTarget]:
    from kernel_verify.properties.builtin_approx import approximation_targets

    return approximation_targets()


def _declared_attention_claims(system: str) -> frozenset[str]:
    """The claims of a registered attention system (:mod:`kernel_verify.impls.systems`) in the
    words the target protocol knows: written once, in the declaration."""
    return get_system(system).claims & frozenset(ATTENTION_CLAIMS)


@cache
def builtin_targets() -> tuple[Target, ...]:
    maps: list[Target] = list(all_maps())
    positive = ("causal", "noncausal", "positive_weights", "approximates_softmax",
                "validates_input")
    attention: list[Target] = [
        AttentionTarget("attention:exact_softmax", _exact_softmax,
                        _declared_attention_claims("exact_softmax"),
                        backends=("numpy", "torch"), dtypes=ALL_DTYPES),
        _registry_attention(get("softmax_positive[iid]"), 64, positive),
        # Orthogonal draws (QR per block) dominate the convergence property's cost: one backend
        # each (the backend code paths are the same as for the iid targets).
        _registry_attention(get("softmax_hyperbolic[orthogonal]"), 64, positive, ("float64",),
                            ("numpy",)),
        _registry_attention(get("gerf[iid]"), 64, positive, ("float64",)),
        _registry_attention(get("softmax_positive[orthogonal]"), 64, positive, ("float32",),
                            ("torch",)),
        # Based's Taylor map: the first recurrent example besides positive features (signed
        # features, positive kernel 1 + t + t²/2, state (1 + d + d²) × d_v)
        _registry_attention(get("taylor2"), 64, ("causal", "noncausal", "positive_weights",
                                                 "validates_input"), ("float64", "float32"),
                            ("torch",)),
    ]
    matrices: list[Target] = [_matrix_target(kind) for kind in MATRICES]
    return (*maps, *attention, *matrices, *_builtin_approximations())


