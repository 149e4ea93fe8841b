"""One descriptor per feature map: :class:`FeatureMapTarget` (alias ``FeatureMap``).

A registered map (``impls/catalogue``, :func:`kernel_verify.impls.registry.register`) and a map a
user brings to the suite (``kernel-verify check module:attribute``) are objects of this one frozen
dataclass. Every consumer reads it unchanged: the properties, the mpmath twin (through the
structural type :class:`kernel_verify.verify.references.spec.MapSpec`, which the truth annotates
with because it may not import ``impls``), the report, the benchmarks and the mutants. There is no
conversion between a "registry entry" and a "target".

Fields (conventions of ``impls/registry.py``):

* ``name``, ``kernel`` (target kernel id), ``claims`` (words of :data:`CLAIMS`);
* ``kernel_params``: the kernel's keyword arguments, a mapping, or a callable
  ``(config, d) -> mapping`` when they depend on the configuration or the input dimension;
  everyone reads them through :meth:`FeatureMapTarget.kernel_args` ``(d)``;
* **white-box** maps: ``draw(rng, d, m, config) -> params`` (float64 NumPy arrays; ``no_params``
  for maps without random parameters) and ``numpy_fn``/``torch_fn(x, params, config)``, plus
  ``log_numpy_fn``/``log_torch_fn`` returning ``log φ`` with the claim ``log_features``;
* **black-box** maps: ``sample_fn(x, seed)`` (the same seed is the same draw) with ``m`` its
  feature count;
* the estimator family, when declared: ``formula`` (the id of the map's formula, which names its
  mpmath twin), ``matrix`` (how frequency rows are drawn), ``config`` (the formula's constants),
  ``mean_kernel`` (the mean of a biased estimator), ``attention_prescale`` (``q, k`` scaled by
  ``d^(−1/4)`` before φ);
* description: ``family``, ``output_dim(d, m)``, ``min_m`` (the smallest feature count the draw
  accepts), ``description``, ``source`` (with the docs/math.md sections), and the configuration
  dependent ``output_dim_for_config``/``min_m_for_config``;
* ``known_failures``: property (test function) name -> reason (reported as *known*).

Validation happens at construction (:meth:`FeatureMapTarget.__post_init__`): every field is
checked here, and a ``ValueError``/``TypeError`` names the map, the field and the valid choices,
whatever else was imported before. That includes the names the truth resolves: the kernel and
mean-kernel ids (:data:`kernel_verify.impls.names.KERNELS`), the formula id
(:data:`kernel_verify.impls.names.FORMULAS`; ``tests/test_names.py`` checks both lists against
the truth's mpmath references), and the constants a declared formula reads from ``config``
(those that every registered map of the formula carries).
"""

from __future__ import annotations

import functools
import inspect
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from kernel_verify.impls.names import FORMULAS, KERNELS
from kernel_verify.impls.validation import (
    check_callable_field,
    check_choice_field,
    check_claim_set,
    check_count_field,
    check_known_failures,
    check_positive_int,
    check_rng,
    check_target_name,
    target_error,
)

__all__ = ["BLACKBOX_SEEDS", "CLAIMS", "GRADIENT_CLAIMS", "FeatureMap", "FeatureMapTarget",
           "math_section", "no_params"]

#: A black-box ``sample_fn`` receives seeds in ``[0, BLACKBOX_SEEDS)``: the range
#: ``np.random.seed``, ``random.seed``-style legacy APIs and ``torch.manual_seed`` all accept, so
#: an adapter may hand the seed straight to its library.
BLACKBOX_SEEDS = 2**32

#: Vocabulary of claims. Properties select the maps they apply to by these words.
CLAIMS: dict[str, str] = {
    "unbiased": "E_ω[φ(x)ᵀφ(y)] equals the target kernel exactly",
    "biased": "E_ω[φ(x)ᵀφ(y)] equals `mean_kernel`, not the target kernel",
    "deterministic": "no random parameters: φ(x)ᵀφ(y) equals the kernel up to rounding",
    "learned": "parameters are trainable (torch nn.Module); fixed values make it deterministic",
    "positive": "every feature is > 0 (attention denominators are > 0)",
    "nonnegative": "every feature is >= 0 (denominators can be 0: guarded)",
    "bounded": "every feature is bounded in absolute value by a constant times m^(-1/2)",
    "orthogonal": "frequency rows are exactly orthogonal within blocks of d",
    "simplex": "frequency directions within blocks of d are the vertices of a regular simplex "
               "(pairwise cosine exactly -1/(d-1))",
    "gaussian_rows": "every frequency row is marginally N(0, I_d)",
    "log_features": "log φ is available for the stable log-space attention path",
    "positional": "the map needs token positions (and the length M)",
    "exact_finite": "φ(x)ᵀφ(y) equals the kernel exactly (finite explicit map)",
    "psd_kernel": "the target kernel is positive semi-definite",
    "differentiable": "torch_fn (and log_torch_fn) is differentiable in x by autograd: the "
                      "gradient is ∂φ/∂x (almost everywhere for piecewise maps such as relu); "
                      "properties/test_gradients.py checks it against the exact derivative",
    "deterministic_backward": "two backward passes on the same inputs give bitwise equal "
                              "gradients",
}

#: The gradient claims every built-in torch map makes (``impls/catalogue``).
GRADIENT_CLAIMS = frozenset({"differentiable", "deterministic_backward"})

Draw = Callable[[np.random.Generator, int, int, Mapping[str, Any]], dict[str, np.ndarray]]
MapFn = Callable[..., Any]
KernelParams = Mapping[str, Any] | Callable[[Mapping[str, Any], int], Mapping[str, Any]]


def no_params(rng: np.random.Generator, d: int, m: int, config: Mapping[str, Any]) -> dict:
    """The parameter draw of a map without random parameters: ``{}``."""
    return {}


def _validated_draw(draw: Draw) -> Draw:
    """``draw`` with its arguments checked first (``rng`` a Generator, ``d, m >= 1``, ``config``
    a mapping), so that every map's parameter draw rejects bad input by name."""
    if getattr(draw, "_kv_validated", False) or draw is no_params:
        return draw

    @functools.wraps(draw)
    def checked(rng: np.random.Generator, d: int, m: int, config: Mapping[str, Any]) -> dict:
        check_rng("rng", rng)
        d = check_positive_int("d", d)
        m = check_positive_int("m", m)
        if not isinstance(config, Mapping):
            raise TypeError(f"config must be a mapping, got {type(config).__name__}")
        return draw(rng, d, m, config)

    checked._kv_validated = True  # type: ignore[attr-defined]
    return checked


def _known_matrices() -> set[str]:
    from kernel_verify.impls.random_matrices import MATRICES

    return set(MATRICES)


def _check_formula_config(t: FeatureMapTarget) -> None:
    """A declared ``formula`` is evaluated (mpmath twin, exact moments) with the target's
    ``config``: every key that all registry maps of that formula carry must be there (e.g.
    ``sigma`` of ``rff_pairs``), or the declaration fails here, naming it, instead of as a
    ``KeyError`` inside the properties."""
    from kernel_verify.impls.registry import all_maps, catalogue_loading

    if t.formula is None or catalogue_loading():  # the built-ins define the formulas' configs
        return
    entries = [e for e in all_maps() if e.formula == t.formula]
    if not entries:
        return
    needed = set.intersection(*(set(e.config) for e in entries))
    missing = sorted(needed - set(t.config))
    if missing:
        example = {k: entries[0].config[k] for k in missing}
        raise target_error(ValueError, t.name, "config", f"lacks {', '.join(map(repr, missing))}, "
                           f"which formula {t.formula!r} needs (the registry's {entries[0].name} "
                           f"has config={example!r})")


def _check_kernel_params(name: str, kp: object) -> None:
    if isinstance(kp, Mapping):
        return
    if not callable(kp):
        raise target_error(TypeError, name, "kernel_params", "must be a mapping or a callable "
                           f"(config, d) -> mapping, got {type(kp).__name__}")
    try:
        inspect.signature(kp).bind({}, 1)
    except TypeError:
        raise target_error(TypeError, name, "kernel_params", "must be a mapping or a callable "
                           f"(config, d) -> mapping; {kp!r} cannot be called with (config, d)"
                           ) from None
    except ValueError:  # no signature available (some builtins): trust the call
        pass


def _validate(t: FeatureMapTarget) -> None:
    check_target_name(t.name)
    check_claim_set(t.name, t.claims, CLAIMS)
    for field_name in ("kernel", "formula", "mean_kernel", "family"):
        value = getattr(t, field_name)
        optional = field_name != "kernel"
        if (value is not None or not optional) and (not isinstance(value, str) or not value):
            raise target_error(TypeError, t.name, field_name, "must be a non-empty str"
                               f"{' or None' if optional else ''}, got {value!r}")
    check_choice_field(t.name, "kernel", t.kernel, set(KERNELS), optional=False)
    check_choice_field(t.name, "mean_kernel", t.mean_kernel, set(KERNELS), optional=True)
    check_choice_field(t.name, "formula", t.formula, set(FORMULAS), optional=True)
    check_choice_field(t.name, "matrix", t.matrix, _known_matrices(), optional=True)
    check_count_field(t.name, "m", t.m)
    check_count_field(t.name, "min_m", t.min_m)
    _check_kernel_params(t.name, t.kernel_params)
    if not isinstance(t.config, Mapping):
        raise target_error(TypeError, t.name, "config", f"must be a mapping, got "
                           f"{type(t.config).__name__}")
    _check_formula_config(t)
    for field_name in ("draw", "numpy_fn", "torch_fn", "log_numpy_fn", "log_torch_fn",
                       "sample_fn", "output_dim", "output_dim_for_config", "min_m_for_config"):
        check_callable_field(t.name, field_name, getattr(t, field_name), optional=True)
    if not isinstance(t.attention_prescale, bool):
        raise target_error(TypeError, t.name, "attention_prescale", "must be a bool, got "
                           f"{type(t.attention_prescale).__name__}")
    for field_name in ("description", "source"):
        if not isinstance(getattr(t, field_name), str):
            raise target_error(TypeError, t.name, field_name, "must be a str, got "
                               f"{type(getattr(t, field_name)).__name__}")
    check_known_failures(t.name, t.known_failures, kind="FeatureMapTarget")
    white = t.draw is not None and (t.numpy_fn is not None or t.torch_fn is not None)
    if not white and t.sample_fn is None:
        raise ValueError(
            f"target {t.name!r} needs either draw + numpy_fn/torch_fn (white-box) or "
            "sample_fn(x, seed) (black-box)"
        )
    if "differentiable" in t.claims and white and t.torch_fn is None:
        raise target_error(ValueError, t.name, "claims", "has 'differentiable' but the map has "
                           "no torch_fn: the gradient is taken by torch's autograd; add "
                           "torch_fn(x, params, config) or drop the claim")


def _features_expected(t: FeatureMapTarget, d: int) -> tuple[int | None, str]:
    """How many features ``sample_fn`` must return for inputs of dimension ``d``, and where the
    number comes from: the map's ``output_dim(d, m)``; else that of the registry's map of its
    declared ``formula`` (e.g. 2m for ``rff_pairs``); else ``m`` — except for a deterministic
    map that declares neither, whose output size ``m`` does not describe (None: not checked)."""
    if t.output_dim is not None:
        return int(t.output_dim(d, t.m)), f"output_dim(d={d}, m={t.m})"
    if t.formula is not None:
        from kernel_verify.impls.registry import all_maps

        entry = next((e for e in all_maps() if e.formula == t.formula), None)
        if entry is not None and (entry.output_dim or entry.output_dim_for_config):
            dim = (entry.output_dim_for_config(t.config) if entry.output_dim_for_config
                   else entry.output_dim)
            return int(dim(d, t.m)), f"formula {t.formula!r} with d={d}, m={t.m}"
        return t.m, f"m = {t.m}"
    if "deterministic" in t.claims:
        return None, ""
    return t.m, f"m = {t.m}"


def _checked_sample_fn(t: FeatureMapTarget) -> Callable[..., Any]:
    """``t.sample_fn`` with its result checked at every call: the declared ``m`` is the number
    of features it returns (``output_dim(d, m)`` where the map declares ``output_dim``), and a
    map claiming ``differentiable`` takes a torch tensor and returns one (its gradient route)."""
    fn = getattr(t.sample_fn, "_kv_unchecked", t.sample_fn)
    differentiable = "differentiable" in t.claims

    @functools.wraps(fn)
    def sample_fn(x: Any, seed: int) -> Any:
        torch_in = type(x).__module__.startswith("torch")
        try:
            out = fn(x, seed)
        except Exception as err:
            # a ValueError is the map's own input check; a NotImplementedError says a route is
            # not offered (e.g. no forward-mode rule under torch.func.jvp), which the property
            # asking for it reports as a skip: neither is the map failing on torch tensors
            if torch_in and differentiable and not isinstance(err, ValueError |
                                                              NotImplementedError):
                raise target_error(TypeError, t.name, "sample_fn", "failed on a torch tensor "
                                   f"({type(err).__name__}: {err}); the map claims "
                                   "'differentiable', so sample_fn must take torch tensors and "
                                   "return features differentiable in x (or drop the claim)"
                                   ) from err
            raise
        if torch_in and differentiable and not type(out).__module__.startswith("torch"):
            raise target_error(TypeError, t.name, "sample_fn", "returned "
                               f"{type(out).__name__} for a torch tensor; the map claims "
                               "'differentiable', so sample_fn must return a torch tensor "
                               "differentiable in x (or drop the claim)")
        shape = getattr(out, "shape", None)
        d = int(x.shape[-1]) if hasattr(x, "shape") and len(x.shape) else None
        if shape is not None and len(shape) and d is not None:
            want, why = _features_expected(t, d)
            if want is not None and int(shape[-1]) != want:
                raise target_error(ValueError, t.name, "m", f"does not match sample_fn: "
                                   f"{why} means {want} features, but sample_fn returned "
                                   f"{int(shape[-1])} (shape {tuple(shape)} for x of shape "
                                   f"{tuple(x.shape)}); declare the m sample_fn uses (and "
                                   "output_dim(d, m) if it returns other than m features)")
        return out

    sample_fn._kv_unchecked = fn  # type: ignore[attr-defined]
    return sample_fn


@dataclass(frozen=True)
class FeatureMapTarget:
    """A feature map: a registered one or one under test (see the module docstring)."""

    name: str
    kernel: str
    claims: frozenset[str]
    kernel_params: KernelParams = field(default_factory=dict)
    m: int = 64
    config: Mapping[str, Any] = field(default_factory=dict)
    draw: Draw | None = None
    numpy_fn: MapFn | None = None
    torch_fn: MapFn | None = None
    log_numpy_fn: MapFn | None = None
    log_torch_fn: MapFn | None = None
    formula: str | None = None
    sample_fn: Callable[[np.ndarray, int], np.ndarray] | None = None
    matrix: str | None = None
    mean_kernel: str | None = None
    attention_prescale: bool = False
    known_failures: Mapping[str, str] = field(default_factory=dict)
    family: str | None = None
    output_dim: Callable[[int, int], int] | None = None
    #: smallest feature count ``m`` the parameter draw accepts (e.g. one frequency per mixture
    #: component); properties draw ``m >= min_m``.
    min_m: int = 1
    description: str = ""
    source: str = ""
    #: For maps whose output size depends on ``config`` (Taylor order, polynomial degree):
    #: ``output_dim_for_config(config)`` returns the ``output_dim`` function; it replaces
    #: ``output_dim`` at construction, so ``with_config`` keeps the two consistent.
    output_dim_for_config: Callable[[Mapping[str, Any]], Callable[[int, int], int]] | None = None
    #: Likewise for ``min_m`` (e.g. the number of mixture components).
    min_m_for_config: Callable[[Mapping[str, Any]], int] | None = None

    def __post_init__(self) -> None:
        _validate(self)
        if self.draw is not None:
            object.__setattr__(self, "draw", _validated_draw(self.draw))
        if self.output_dim_for_config is not None:
            object.__setattr__(self, "output_dim", self.output_dim_for_config(self.config))
        if self.min_m_for_config is not None:
            object.__setattr__(self, "min_m", int(self.min_m_for_config(self.config)))
        if self.sample_fn is not None:
            object.__setattr__(self, "sample_fn", _checked_sample_fn(self))

    @property
    def white_box(self) -> bool:
        return self.draw is not None and (self.numpy_fn or self.torch_fn) is not None

    def has(self, claim: str) -> bool:
        if claim not in CLAIMS:
            raise ValueError(f"unknown claim {claim!r}; known: {sorted(CLAIMS)}")
        return claim in self.claims

    def kernel_args(self, d: int) -> dict[str, Any]:
        """Keyword arguments of the target kernel for inputs of dimension ``d``."""
        kp = self.kernel_params
        return dict(kp(self.config, d) if callable(kp) else kp)

    def with_config(self, **overrides: Any) -> FeatureMapTarget:
        """The same map with some configuration values replaced (unknown keys are an error)."""
        unknown = set(overrides) - set(self.config)
        if unknown:
            raise ValueError(
                f"feature map {self.name!r}: unknown config keys {sorted(unknown)}; "
                f"known: {sorted(self.config)}"
            )
        return replace(self, config={**self.config, **overrides})

    def draw_params(self, rng: np.random.Generator, d: int, m: int | None = None) -> dict:
        """A parameter draw for ``d`` inputs and ``m`` (default: the map's ``m``) features."""
        if self.draw is None:
            raise TypeError(f"target {self.name!r} is black-box: it has no parameter draw")
        return self.draw(rng, d, self.m if m is None else m, self.config)

    def sample(self, x: Any, seed: int) -> Any:
        """``sample_fn(x, seed mod 2³²)``: a black-box map's features as it returns them, its
        seed in ``[0, BLACKBOX_SEEDS)`` (:data:`BLACKBOX_SEEDS`) whatever the property drew."""
        if self.sample_fn is None:
            raise TypeError(f"target {self.name!r} is white-box: it has no sample_fn")
        return self.sample_fn(x, int(seed) % BLACKBOX_SEEDS)

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
                return np.asarray(self.sample(x, seed), dtype=np.float64)
            params = self.draw_params(np.random.default_rng(seed), x.shape[-1])
        kwargs = {"positions": positions} if self.has("positional") else {}
        if self.numpy_fn is not None:
            return np.asarray(self.numpy_fn(x, params, self.config, **kwargs), dtype=np.float64)
        import torch

        from kernel_verify.impls.torch.convert import to_torch

        out = self.torch_fn(torch.as_tensor(x), to_torch(params), self.config, **kwargs)
        return out.detach().to("cpu", torch.float64).numpy()

    def describe(self, d: int = 4) -> dict[str, Any]:
        """JSON-ready description (used by ``kernel-verify list --json``)."""
        return {
            "name": self.name,
            "family": self.family,
            "formula": self.formula,
            "kernel": self.kernel,
            "kernel_params": {k: _jsonable(v) for k, v in self.kernel_args(d).items()},
            "mean_kernel": self.mean_kernel,
            "claims": sorted(self.claims),
            "matrix": self.matrix,
            "config": {k: _jsonable(v) for k, v in self.config.items()},
            "output_dim": (f"{self.output_dim(d, 8)} at d={d}, m=8"
                           if self.output_dim is not None else None),
            "attention_prescale": self.attention_prescale,
            "description": self.description,
            "source": self.source,
            "kind": "feature_map",
            "math_section": math_section(self.source),
        }


#: The registry's name for the same class: a registered map is a target.
FeatureMap = FeatureMapTarget


def math_section(source: str) -> str:
    """The docs/math.md sections a source string cites (``"§3, §7"``; ``""`` if none)."""
    cited = re.findall(r"§(\d+)", source.partition("docs/math.md")[2])
    return ", ".join(f"§{n}" for n in dict.fromkeys(cited))


def _jsonable(value: Any) -> Any:
    if isinstance(value, np.ndarray):
        return f"float64 array of shape {value.shape}"
    if isinstance(value, np.generic):
        return value.item()
    return value
