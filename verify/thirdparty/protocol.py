"""The adapter protocol: what a target under test looks like to the property suite.

The suite runs the same properties against the built-in registry and against any third-party
implementation (array-api-tests style). A *target* is one of four kinds:

* :class:`FeatureMapTarget`: ``φ``. **White-box** when it exposes its random parameters
  (``draw`` + ``numpy_fn``/``torch_fn`` taking them), so the exact reference comparison runs,
  with ``formula`` naming the registry formula its parameters follow. **Black-box** when it only
  gives features for a seed (``sample_fn(x, seed)``; the same seed must mean the same draw):
  the statistical and identity properties run. A black-box map may **declare its estimator
  family**: ``formula`` (a registry formula, e.g. ``"softmax_positive"``), ``matrix``
  (``"iid"`` or ``"orthogonal"``) and ``config`` (the formula's constants, e.g. GERF's ``A``,
  RFF's ``sigma``). The declaration adds the tests that need it: the exact-variance mean test,
  the range (Hoeffding/Bernstein) tests of bounded families, the variance tests (including
  "orthogonal rows have the ORF variance") and, for deterministic formulas, the derived
  tolerance of φ(x)ᵀφ(y) = k(x, y). Without it, ``properties/test_blackbox_maps.py`` still tests
  every claim (reproducible draw, sign, float64 accuracy, the deterministic identity and the
  mean under a stated, calibrated assumption); skip reasons name the declaration that would add
  a test. ``m`` is the feature count ``sample_fn`` uses.
* :class:`AttentionTarget`: ``attention(q, k, v, causal=..., seed=...)``.
* :class:`RandomMatrixTarget`: ``draw(rng, m, d) -> W``.
* :class:`KernelApproxTarget`: ``approximate(X, kernel, rng) -> (K̃, landmark indices)``.

An adapter module exposes a target, or a list of targets, as a module attribute; run it with
``kernel-verify check module:attribute`` (README, "Verify your own implementation").
Every function receives and returns float64 NumPy arrays unless it declares torch.

**Dtype rule** (the one rule, applied everywhere by the suite): a function may return a *wider*
floating dtype than its input (float64 features for float32 input, e.g. ``x @ p["W"].T`` with a
float64 ``W``); the suite compares such a result as what it is — in the wider dtype, against the
bounds of the input dtype, which then hold a fortiori. A *narrower* result (float32 features for
float64 input) is a precision loss and fails
``blackbox_maps::test_float64_input_gives_float64_output``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from kernel_verify.impls.registry import CLAIMS, FeatureMap

ATTENTION_CLAIMS = {
    "causal": "supports causal=True (row i depends only on keys/values ≤ i)",
    "noncausal": "supports causal=False (permutation equivariant in the keys)",
    "positive_weights": "outputs are convex combinations of values (partition of unity)",
    "approximates_softmax": "converges to softmax attention as its feature count m grows",
}
MATRIX_CLAIMS = {
    "gaussian_rows": "every row is marginally N(0, I_d)",
    "orthogonal": "rows are exactly orthogonal within blocks of d",
}
APPROX_CLAIMS = {
    "psd": "K̃ is positive semi-definite for a PSD kernel",
    "schur_residual": "K − K̃ is PSD (Nyström's residual is a Schur complement)",
    "exact_on_landmarks": "K̃[:, S] equals K[:, S]",
}


def _check_claims(name: str, claims: frozenset[str], vocabulary: Mapping[str, str]) -> None:
    unknown = set(claims) - set(vocabulary)
    if unknown:
        raise ValueError(f"target {name!r}: unknown claims {sorted(unknown)}; known: "
                         f"{sorted(vocabulary)}")


@dataclass(frozen=True)
class FeatureMapTarget:
    """A feature map under test (see module docstring)."""

    name: str
    kernel: str
    claims: frozenset[str]
    kernel_params: Mapping[str, Any] | Callable[[int], Mapping[str, Any]] = field(
        default_factory=dict
    )
    m: int = 64
    config: Mapping[str, Any] = field(default_factory=dict)
    draw: Callable[..., dict[str, np.ndarray]] | None = None
    numpy_fn: Callable[..., Any] | None = None
    torch_fn: Callable[..., Any] | None = None
    log_numpy_fn: Callable[..., Any] | None = None
    log_torch_fn: Callable[..., Any] | None = None
    formula: str | None = None
    sample_fn: Callable[[np.ndarray, int], np.ndarray] | None = None
    matrix: str | None = None
    mean_kernel: str | None = None
    attention_prescale: bool = False
    entry: FeatureMap | None = None

    def __post_init__(self) -> None:
        _check_claims(self.name, self.claims, CLAIMS)
        white = self.draw is not None and (self.numpy_fn or self.torch_fn) is not None
        if not white and self.sample_fn is None:
            raise ValueError(
                f"target {self.name!r} needs either draw + numpy_fn/torch_fn (white-box) or "
                "sample_fn(x, seed) (black-box)"
            )

    @property
    def white_box(self) -> bool:
        return self.draw is not None and (self.numpy_fn or self.torch_fn) is not None

    def has(self, claim: str) -> bool:
        return claim in self.claims

    def kernel_args(self, d: int) -> dict[str, Any]:
        """Keyword arguments of the target kernel for inputs of dimension ``d``."""
        kp = self.kernel_params
        return dict(kp(d) if callable(kp) else kp)

    def draw_params(self, rng: np.random.Generator, d: int, m: int | None = None) -> dict:
        if self.draw is None:
            raise TypeError(f"target {self.name!r} is black-box: it has no parameter draw")
        return self.draw(rng, d, self.m if m is None else m, self.config)

    def features(
        self, x: np.ndarray, *, params: Mapping[str, Any] | None = None, seed: int | None = None,
        positions: np.ndarray | None = None,
    ) -> np.ndarray:
        """float64 NumPy features of ``x (..., n, d)``: from ``params`` (white-box) or from a
        ``seed`` (both kinds: white-box draws its parameters from ``default_rng(seed)``)."""
        if params is None:
            if seed is None:
                raise ValueError("features needs params= or seed=")
            if not self.white_box:
                return np.asarray(self.sample_fn(x, seed), dtype=np.float64)
            params = self.draw_params(np.random.default_rng(seed), x.shape[-1])
        kwargs = {"positions": positions} if self.has("positional") else {}
        if self.numpy_fn is not None:
            return np.asarray(self.numpy_fn(x, params, self.config, **kwargs), dtype=np.float64)
        import torch

        from kernel_verify.impls.torch.convert import to_torch

        out = self.torch_fn(torch.as_tensor(x), to_torch(params), self.config, **kwargs)
        return out.detach().to("cpu", torch.float64).numpy()

    @classmethod
    def from_entry(cls, entry: FeatureMap, m: int = 64) -> FeatureMapTarget:
        return cls(
            name=entry.name, kernel=entry.kernel, claims=entry.claims,
            kernel_params=lambda d: entry.kernel_params(entry.config, d),
            m=m, config=dict(entry.config), draw=entry.draw, numpy_fn=entry.numpy_fn,
            torch_fn=entry.torch_fn, log_numpy_fn=entry.log_numpy_fn,
            log_torch_fn=entry.log_torch_fn, formula=entry.formula, matrix=entry.matrix,
            mean_kernel=entry.mean_kernel, attention_prescale=entry.attention_prescale,
            entry=entry,
        )


@dataclass(frozen=True)
class AttentionTarget:
    """``attention(q, k, v, *, causal: bool, seed: int) -> out`` on float64 arrays of shape
    ``(batch, heads, n, d)``; ``seed`` fixes any randomness (ignored by exact attention).
    With ``approximates_softmax``, ``attention`` also accepts ``m=`` (feature count)."""

    name: str
    attention: Callable[..., np.ndarray]
    claims: frozenset[str]

    def __post_init__(self) -> None:
        _check_claims(self.name, self.claims, ATTENTION_CLAIMS)

    def has(self, claim: str) -> bool:
        return claim in self.claims

    def __call__(self, q, k, v, *, causal: bool, seed: int = 0, **kw: Any) -> np.ndarray:
        return np.asarray(self.attention(q, k, v, causal=causal, seed=seed, **kw),
                          dtype=np.float64)


@dataclass(frozen=True)
class RandomMatrixTarget:
    """``draw(rng, m, d) -> W (m, d)`` float64."""

    name: str
    draw: Callable[[np.random.Generator, int, int], np.ndarray]
    claims: frozenset[str]

    def __post_init__(self) -> None:
        _check_claims(self.name, self.claims, MATRIX_CLAIMS)

    def has(self, claim: str) -> bool:
        return claim in self.claims


@dataclass(frozen=True)
class KernelApproxTarget:
    """``approximate(X (n, d), kernel, rng) -> (K̃ (n, n), landmark indices)``, where
    ``kernel(A, B)`` returns the float64 Gram matrix of the exact kernel."""

    name: str
    approximate: Callable[..., tuple[np.ndarray, np.ndarray]]
    claims: frozenset[str]
    rank: int = 4

    def __post_init__(self) -> None:
        _check_claims(self.name, self.claims, APPROX_CLAIMS)

    def has(self, claim: str) -> bool:
        return claim in self.claims


Target = FeatureMapTarget | AttentionTarget | RandomMatrixTarget | KernelApproxTarget
