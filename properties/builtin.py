"""The built-in targets: everything this project implements, as property-suite targets.

Registry feature maps, attention with every registry map whose kernel makes attention meaningful
(``builtin_attention``: the rest with their reason) and exact softmax attention (NumPy and
torch), every random-matrix construction, Nyström (``builtin_approx``) and the tiny causal
LM (``builtin_models``). The property suite
(``properties/targets.py``) and ``kernel-verify calibrate`` read them from here.
"""

from __future__ import annotations

from functools import cache

import numpy as np

from kernel_verify.impls.numpy.attention import softmax_attention
from kernel_verify.impls.random_matrices import (
    MATRICES,
    draw_matrix,
)
from kernel_verify.impls.registry import all_maps
from kernel_verify.impls.systems import get_system
from kernel_verify.properties.builtin_attention import ALL_DTYPES, registry_attention_targets
from kernel_verify.properties.builtin_hybrid import builtin_hybrid_targets
from kernel_verify.properties.protocol import (
    AttentionTarget,
    KernelApproxTarget,
    RandomMatrixTarget,
    Target,
)


def _exact_softmax(q, k, v, *, causal, seed, **_):
    if isinstance(q, np.ndarray):
        return softmax_attention(q, k, v, causal=causal)
    from kernel_verify.impls.torch.attention import softmax_attention as torch_softmax

    return torch_softmax(q, k, v, causal=causal)


def _matrix_target(kind: str) -> RandomMatrixTarget:
    """The construction's target, made from its descriptor
    (:func:`kernel_verify.impls.systems.get_system`): every claim a random-matrix target takes;
    the others are accounted for in ``properties/claim_tests.py``."""
    system = get_system(kind)
    return RandomMatrixTarget(
        f"matrix:{system.name}", lambda rng, m, d, kind=kind: draw_matrix(kind, rng, m, d),
        system.target_claims(),
    )


def _builtin_approximations() -> list[KernelApproxTarget]:
    from kernel_verify.properties.builtin_approx import approximation_targets

    return approximation_targets()


def _builtin_models() -> list[Target]:
    """The tiny causal LM (``builtin_models``): the reference model target."""
    from kernel_verify.properties.builtin_models import model_targets

    return list(model_targets())


#: Registered systems (``kernel-verify list``, :mod:`kernel_verify.impls.systems`) the shipped
#: suite has no built-in target of their own for, and why; every other system has one
#: (``tests/test_system_coverage.py`` keeps this complete and current).
UNTESTED_SYSTEMS: dict[str, str] = {
    "linformer": (
        "its output averages the projected values F·V, not V, so the attention identities "
        "(partition of unity over the keys, causality, convergence to softmax) do not apply; "
        "its batch independence is checked, bitwise, on both backends by "
        "properties/test_batch_independence.py (on the wrapper of "
        "properties/builtin_lowrank.py, run by that property only), and its values against "
        "its mpmath reference by tests/test_nystrom.py::test_linformer_matches_mp"),
    "nystromformer": (
        "no built-in attention target (it does not tend to softmax at a fixed landmark count); "
        "its pseudo-inverse iteration is checked on both backends by "
        "properties/test_nystrom_properties.py::test_nystromformer_iteration_error_recursion, "
        "its batch independence, bitwise, by properties/test_batch_independence.py (on the "
        "wrapper of properties/builtin_lowrank.py, run by that property only), and a "
        "third-party Nyströmformer is checked as an AttentionTarget (the mutant catalogue's "
        "control runs one)"),
    "feature_map_attention": (
        "checked through the attention:<map> targets: each runs feature_map_attention"),
    "linear_attention": (
        "checked through the attention:<map> targets of maps without log features "
        "(feature_map_attention calls it)"),
    "log_linear_attention": (
        "checked through the attention:<map> targets of maps with log features "
        "(feature_map_attention calls it)"),
}


@cache
def builtin_targets() -> tuple[Target, ...]:
    maps: list[Target] = list(all_maps())
    attention: list[Target] = [
        AttentionTarget("attention:exact_softmax", _exact_softmax,
                        get_system("exact_softmax").target_claims(),
                        backends=("numpy", "torch"), dtypes=ALL_DTYPES,
                        feature_count=0),  # exact attention: no feature terms in its bounds
        # every registered map whose kernel makes attention meaningful (builtin_attention)
        *registry_attention_targets(),
        *builtin_hybrid_targets(),  # sliding-window softmax + linear attention (§22)
    ]
    matrices: list[Target] = [_matrix_target(kind) for kind in MATRICES]
    return (*maps, *attention, *matrices, *_builtin_approximations(), *_builtin_models())


