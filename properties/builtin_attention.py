"""Built-in attention targets: one for every registered feature map whose kernel makes normalised
attention meaningful, and a stated reason for every other map.

**Which maps.** Linear attention with a map φ normalises by ``D_i = Σ_j φ(q_i)ᵀφ(k_j)``; its
identities (partition of unity, convex combinations of the visible values, causality,
permutation equivariance, …) are statements about the weights ``φ(q_i)ᵀφ(k_j)/D_i`` and need
``φ(q)ᵀφ(k) > 0`` for every ``q, k``. From the registry's declarations alone:

* a map claiming ``positive`` (every feature ``> 0``) has a positive estimate for every draw
  (softmax-positive, hyperbolic, GERF in every frequency matrix, GMM-PRF, Hedgehog, elu + 1);
* an exact (``exact_finite``, ``deterministic``) map whose kernel is positive everywhere has
  ``φ(q)ᵀφ(k) = k(q, k) > 0`` up to rounding, although its features are signed: the Taylor
  kernel of even order ``p``, ``Σ_(j≤p) t^j/j!``, has no real zero (an even-degree truncation of
  the exponential series is positive on ℝ: its minimum is at a root of the derivative
  ``e_(p−1)``, where ``e_p(t) = e_(p−1)(t) + t^p/p! = t^p/p! > 0``), so ``taylor2`` and
  ``taylor2_compressed`` qualify and ``taylor3`` does not.

Every other map gets a reason (:func:`attention_not_meaningful`): signed features or a signed
kernel (an estimate ``≤ 0`` makes the weights no partition of unity), nonnegative features with
``φ(0) = 0`` (a zero denominator: the normalised output is undefined), positional maps (their
features depend on token positions, which an ``AttentionTarget`` call does not carry).

**Claims**, from the declarations: ``causal``, ``noncausal``, ``validates_input``,
``positive_weights`` (every qualifying map) and ``approximates_softmax`` only for a map of the
softmax kernel that claims ``unbiased`` (a biased construction — fixed-norm or SORF rows —
converges to another kernel as ``m`` grows). The project's attention adds ``half_in_float32``
(and, on torch, ``differentiable``/``deterministic_backward``).

**Test-time budget** (``make test`` ≤ 150 s on a 2-core machine). :data:`FULL_COVERAGE` keeps
the hand-picked maps with their backend × dtype coverage (softmax-positive iid on NumPy and
torch in every dtype, GERF iid on both in float64, Taylor-2 on torch float64/float32, the
orthogonal draws on one backend each because the QR per block dominates the convergence
property's cost). Every other qualifying map runs on NumPy float64 only: the backend code paths
(NumPy/torch conversion, dtype casts, the half-type policy, autograd) are the same code for
every map and are exercised by the hand-picked targets; what differs per map is its feature
function and parameter draw, which NumPy float64 exercises with the tightest bounds. In the ci
profiles (``ci``, ``mutants``) each Hypothesis property case of such a map runs
:data:`EXAMPLES` = 3 examples (the simplest input and two drawn at random; Hypothesis'
``MIN_EXAMPLES`` of :mod:`~kernel_verify.properties.profiles`) instead of the profile's 25, and
its verdict says ``reduced`` (:func:`example_budget`, applied by ``properties/conftest.py``; the
α budget counts the examples run). ``nightly`` runs them all. Measured on the 2-core machine,
``CI=true pytest -n 2`` of test_attention_identities, test_attention_forms and test_gradients, in
user CPU: 36.5 s with the 6 earlier attention targets, 66.4 s with the 15 new maps at 25
examples, 52.6 s at 3 (what remains is per-case overhead, ~25 cases a map, and the statistical
convergence property, ~1 s for each of the 6 unbiased softmax-kernel maps). Every property still
runs on every qualifying map.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

from kernel_verify.impls.attention import feature_map_attention
from kernel_verify.impls.registry import FeatureMap, all_maps
from kernel_verify.properties.builtin_forms import registry_forms
from kernel_verify.properties.profiles import MIN_EXAMPLES
from kernel_verify.properties.protocol import AttentionTarget

__all__ = ["ALL_DTYPES", "EXAMPLES", "FULL_COVERAGE", "M_FEATURES", "attention_claims",
           "attention_not_meaningful", "example_budget", "registry_attention",
           "registry_attention_targets"]

ALL_DTYPES = ("float64", "float32", "float16", "bfloat16")
#: Features per draw of every built-in attention target.
M_FEATURES = 64
#: The hand-picked maps with their (dtypes, libraries): full backend × dtype coverage.
FULL_COVERAGE: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "softmax_positive[iid]": (ALL_DTYPES, ("numpy", "torch")),
    "softmax_hyperbolic[orthogonal]": (("float64",), ("numpy",)),
    "gerf[iid]": (("float64",), ("numpy", "torch")),
    "softmax_positive[orthogonal]": (("float32",), ("torch",)),
    # Based's Taylor map: the first recurrent example besides positive features (signed
    # features, positive kernel 1 + t + t²/2, state (1 + d + d²) × d_v)
    "taylor2": (("float64", "float32"), ("torch",)),
}
#: Every other qualifying map: NumPy float64 (module docstring).
DEFAULT_COVERAGE: tuple[tuple[str, ...], tuple[str, ...]] = (("float64",), ("numpy",))
#: Hypothesis examples per property case of a map outside :data:`FULL_COVERAGE` (ci profiles).
EXAMPLES = MIN_EXAMPLES
#: The targets built here with the reduced budget, by ``id()`` (identity: a third-party target of
#: the same name is never reduced). The targets themselves are kept, so that no id is recycled:
#: a set of bare ids would read a new object that CPython places where a dropped built-in target
#: was as reduced.
_REDUCED: dict[int, Any] = {}


def example_budget(target: Any) -> int | None:
    """:data:`EXAMPLES` for an attention target of a map outside :data:`FULL_COVERAGE` built
    here, else None (the profile's count)."""
    reduced = target is not None and _REDUCED.get(id(target)) is target
    return EXAMPLES if reduced else None


def _kernel_args(entry: FeatureMap, d: int = 2) -> dict[str, Any]:
    args = getattr(entry, "kernel_args", None)
    if callable(args):
        return dict(args(d))
    return dict(entry.kernel_params(entry.config, d))


def _positive_kernel(entry: FeatureMap) -> bool:
    """Whether an exact map's kernel is positive on every pair (module docstring: the Taylor
    kernel of even order)."""
    if entry.kernel != "taylor":
        return False
    order = _kernel_args(entry).get("order")
    return isinstance(order, int) and order % 2 == 0


def attention_not_meaningful(entry: FeatureMap) -> str | None:
    """Why normalised attention with ``entry`` has no identities to test, or None when it has."""
    if entry.has("positional"):
        return ("positional: its features depend on token positions, which an attention call "
                "(q, k, v) does not carry")
    if entry.has("positive"):
        return None
    if entry.has("exact_finite") and entry.has("deterministic") and _positive_kernel(entry):
        return None
    if entry.has("nonnegative"):
        return ("nonnegative, not positive, features: φ(x) = 0 is reachable (e.g. x = 0), so "
                "the normaliser Σ_j φ(q)ᵀφ(k_j) can be 0 and the normalised output is undefined")
    if entry.has("exact_finite"):
        return (f"signed kernel: the exact {entry.kernel!r} kernel takes values ≤ 0, so the "
                "weights φ(q)ᵀφ(k)/D are no partition of unity")
    return ("signed features: the estimate φ(q)ᵀφ(k) can be ≤ 0 for a draw, so the weights "
            "φ(q)ᵀφ(k)/D are no partition of unity (normalised attention is undefined)")


def attention_claims(entry: FeatureMap) -> frozenset[str]:
    """The attention claims of a qualifying map, from its declarations (module docstring)."""
    claims = {"causal", "noncausal", "positive_weights", "validates_input"}
    if entry.kernel == "softmax" and entry.has("unbiased"):
        claims.add("approximates_softmax")
    return frozenset(claims)


def registry_attention(entry: FeatureMap, m: int, claims: Iterable[str],
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


def registry_attention_targets() -> list[AttentionTarget]:
    """One attention target per registered map for which attention is meaningful: the
    hand-picked maps first (:data:`FULL_COVERAGE`), then every other one on NumPy float64."""
    entries = {e.name: e for e in all_maps()}
    order = [*FULL_COVERAGE, *(n for n in entries if n not in FULL_COVERAGE)]
    out = []
    for name in order:
        entry = entries[name]
        reason = attention_not_meaningful(entry)
        if reason is not None:
            if name in FULL_COVERAGE:
                raise AssertionError(f"hand-picked attention map {name}: {reason}")
            continue
        dtypes, libraries = FULL_COVERAGE.get(name, DEFAULT_COVERAGE)
        target = registry_attention(entry, M_FEATURES, attention_claims(entry), dtypes, libraries)
        if name not in FULL_COVERAGE:
            _REDUCED[id(target)] = target
        out.append(target)
    return out
