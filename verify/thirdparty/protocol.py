"""The adapter protocol: what a target under test looks like to the property suite.

The suite runs the same properties against the built-in registry and against any third-party
implementation (array-api-tests style). A *target* is one of four kinds:

* :class:`FeatureMapTarget`: ``φ``. **White-box** when it exposes its random parameters
  (``draw`` + ``numpy_fn``/``torch_fn`` taking them), so the exact reference comparison runs,
  with ``formula`` naming the registry formula its parameters follow. **Black-box** when it only
  gives features for a seed (``sample_fn(x, seed)``; the same seed must mean the same draw):
  the statistical and identity properties run.
* :class:`AttentionTarget`: ``attention(q, k, v, causal=..., seed=...)``.
* :class:`RandomMatrixTarget`: ``draw(rng, m, d) -> W``.
* :class:`KernelApproxTarget`: ``approximate(X, kernel, rng) -> (K̃, landmark indices)``.

An adapter module exposes a target, or a list of targets, as a module attribute; run it with
``kernel-verify check module:attribute`` (README, "Verify your own implementation").
Every function receives and returns float64 NumPy arrays unless it declares torch.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from kernel_verify.impls.registry import CLAIMS, FeatureMap
from kernel_verify.verify.backends import as_float64

ATTENTION_CLAIMS = {
    "causal": "supports causal=True (row i depends only on keys/values ≤ i)",
    "noncausal": "supports causal=False (permutation equivariant in the keys)",
    "positive_weights": "outputs are convex combinations of values (partition of unity)",
    "approximates_softmax": "converges to softmax attention as its feature count m grows",
    "validates_input": "NaN/Inf and mismatched shapes raise ValueError (without this claim, how "
                       "the target treats bad input is reported as an input-policy note, not a "
                       "failure)",
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
    """``attention(q, k, v, *, causal: bool, seed: int) -> out`` on arrays of shape
    ``(batch, heads, n, d)``; ``seed`` fixes any randomness (ignored by exact attention).
    With ``approximates_softmax``, ``attention`` also accepts ``m=`` (feature count).

    Which arrays it accepts: ``backends`` (``"numpy"``, ``"torch"``: torch tensors on every
    device the machine has) × ``dtypes`` (``"float64"``, ``"float32"``, ``"float16"``,
    ``"bfloat16"``); the default is NumPy float64 only. Inputs arrive on the backend in the
    dtype; the output must come back as an array of the same backend (any dtype; it is widened
    to float64 exactly). ``self_attention_only``: q and k always come from one sequence (the
    suite then calls with ``k is q``, never 1 query against 2 keys). A causal-only target claims
    ``causal`` without ``noncausal``: every property then calls it with ``causal=True``."""

    name: str
    attention: Callable[..., Any]
    claims: frozenset[str]
    backends: tuple[str, ...] = ("numpy",)
    dtypes: tuple[str, ...] = ("float64",)
    self_attention_only: bool = False

    def __post_init__(self) -> None:
        _check_claims(self.name, self.claims, ATTENTION_CLAIMS)
        bad = [b for b in self.backends if b not in ("numpy", "torch")]
        bad += [d for d in self.dtypes if d not in ("float64", "float32", "float16", "bfloat16")]
        if bad or not self.backends or not self.dtypes:
            raise ValueError(f"target {self.name!r}: backends must be among numpy, torch and "
                             f"dtypes among float64, float32, float16, bfloat16; got "
                             f"{self.backends}, {self.dtypes}")

    def has(self, claim: str) -> bool:
        return claim in self.claims

    def accepts(self, library: str, dtype: str) -> bool:
        """Whether the target takes arrays of ``library`` (numpy, torch) in ``dtype``."""
        return library in self.backends and dtype in self.dtypes

    def __call__(self, q, k, v, *, causal: bool, seed: int = 0, **kw: Any) -> np.ndarray:
        """The output as a float64 NumPy array (exact widening from any backend and dtype)."""
        return as_float64(self.attention(q, k, v, causal=causal, seed=seed, **kw))


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
