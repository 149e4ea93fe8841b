"""One record per feature formula: everything the project knows about a formula, on one object.

A registered feature map names its formula (``FeatureMapTarget.formula``, an id of
:data:`kernel_verify.impls.names.FORMULAS`). What is known about that formula lives in three
layers that may not import each other's way (``impls`` and ``verify`` never import each other):

* ``impls`` — the maps of the formula (registry entries: their NumPy and torch functions, log
  functions, claims, kernel, frequency matrix);
* ``verify`` — the truth, keyed by the formula id: the mpmath twin
  (:data:`~kernel_verify.verify.references.features.MP_FEATURES`), the exact moments (closed
  forms, the exact variance, the fourth moment, the reference mean of a biased row law), the
  derived backward bound (:data:`~kernel_verify.verify.gradient_bounds.BACKWARD_RULES`) and the
  closed Jacobian (:data:`~kernel_verify.verify.references.gradients.CLOSED_JACOBIANS`);
* ``properties`` — what the suite itself decides about a formula: its black-box family (the
  per-draw identity a black-box check may use), the bound on ``‖φ(x)‖²`` of a bounded map, whether
  ``log φ`` is exp-affine (the log path of the attention gradient), whether the gradient's
  median-of-means test has its exact variance.

This module joins them: :func:`records` (``formula id -> Formula``) is built once, from
the verify tables and the registry, with the suite's own facts (:data:`_SUITE_FACTS`) stated
here. The properties, the calibration, the report and the mutants read a formula's facts from
its record (:func:`record`), never by testing the formula's name.

**A fact left out is declared.** Every field that applies to a formula (:data:`APPLIES`) and is
empty has a reason: in its twin's ``not_derived`` (a fact of the truth the twin declares it does
not derive: ``@mp_feature(..., not_derived={"backward": "why"})``) or in :data:`WITHOUT` (the
suite's own facts, and the reasons stated before twins could declare them).
:meth:`Formula.why_not` returns it, and the property that needs the fact reports it as its
verdict's "not tested (why)". ``tests/test_formula_records.py`` fails for an empty field without
a reason, naming the field and the table to add it to (as PyTorch's OpInfo database does), and
for a reason left behind once the fact exists.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from typing import Any

from kernel_verify.impls.names import FORMULAS
from kernel_verify.impls.registry import all_maps

__all__ = ["APPLIES", "FIELDS", "WHERE", "WITHOUT", "Formula", "formulas_where", "record",
           "records"]


@dataclass(frozen=True)
class Formula:
    """What is known about one feature formula (module docstring)."""

    name: str
    #: registry names of the built-in maps of this formula (their functions live on them)
    maps: tuple[str, ...]
    #: kernels those maps approximate (or compute)
    kernels: tuple[str, ...]
    #: claims of any of its maps (what applies to the formula)
    claims: frozenset[str]
    #: the mpmath twin (:class:`~kernel_verify.verify.references.features.MpFeature`)
    twin: Any = None
    #: closed-form mean and second moment of one feature (verify.moments.closed_forms)
    closed_moments: bool = False
    #: exact variance of the estimator, iid and orthogonal rows (verify.moments.estimators)
    exact_variance: bool = False
    #: exact fourth central moment, iid rows (verify.moments.fourth)
    fourth_moment: bool = False
    #: the fourth moment also in closed form, valid where the quadrature does not converge
    #: (large norms) (verify.moments.fourth.CLOSED_RAW_FORMULAS)
    closed_fourth_moment: bool = False
    #: reference mean of a biased row law (verify.references.biased_means)
    reference_mean: bool = False
    #: derived bound of the backward pass (verify.gradient_bounds.BACKWARD_RULES)
    backward: Callable[..., Any] | None = None
    #: exact Jacobian (verify.references.gradients.CLOSED_JACOBIANS)
    jacobian: Callable[..., Any] | None = None
    #: proven range of one row's estimate under fixed-norm rows (no row law needed)
    #: (verify.references.biased_means.fixed_norm_relu_range)
    fixed_norm_range: Callable[..., Any] | None = None
    #: the per-draw identity of the black-box checks: "pairs", "norm_factor", "exponential",
    #: "homogeneous" (properties/checks/blackbox.py)
    blackbox_family: str | None = None
    #: ``sup ‖φ(x)‖²`` of a bounded map: ``|φ(x)ᵀφ(y)|`` is at most this
    sq_norm_bound: float | None = None
    #: ``log φ(x) = Wx + c(x)``: the attention gradient's log path applies
    exp_affine: bool = False
    #: the gradient's median-of-means test has the exact per-draw variance (iid rows)
    gradient_median_test: bool = False
    #: ``(x, y) -> V₁`` at the formula's per-input optimal parameter (GERF's A*, FAVOR++)
    #: (verify.moments.closed_forms.OPTIMAL_VARIANCE)
    optimal_variance: Callable[..., Any] | None = None
    #: the place of the formula's curves in the report's comparison of softmax estimators at
    #: equal feature count (report/overview.py); None: not compared there
    softmax_comparison: int | None = None
    #: field -> why it is empty (from :data:`WITHOUT`)
    without: dict[str, str] = field(default_factory=dict, compare=False)

    def has(self, fact: str) -> bool:
        value = getattr(self, fact)
        return value is not None and value is not False

    def why_not(self, fact: str) -> str | None:
        """None when the formula has ``fact``; else the declared reason it has not."""
        if self.has(fact):
            return None
        return self.without.get(fact, f"{self.name}: no {fact.replace('_', ' ')}")


#: The facts a record may hold (the fields a completeness test looks at).
FIELDS = tuple(f.name for f in fields(Formula)
               if f.name not in ("name", "maps", "kernels", "claims", "without"))

#: Where each fact is added (the completeness test names it).
WHERE = {
    "twin": "verify/references/features.py or features_catalogue.py (@mp_feature)",
    "closed_moments": "verify/moments/closed_forms.py (CLOSED_FORMS)",
    "exact_variance": "verify/moments/integrands.py (_BUILDERS) / estimators.py "
                      "(MOMENT_FORMULAS)",
    "fourth_moment": "verify/moments/fourth.py (FOURTH_MOMENT_FORMULAS)",
    "closed_fourth_moment": "verify/moments/fourth.py (_CLOSED_RAW or _CLOSED_AT)",
    "reference_mean": "verify/references/biased_means.py (FORMULAS)",
    "backward": "verify/gradient_bounds.py (BACKWARD_RULES)",
    "jacobian": "verify/references/gradients.py (CLOSED_JACOBIANS)",
    "fixed_norm_range": "verify/references/biased_means.py (FIXED_NORM_RANGES)",
    "blackbox_family": "properties/formulas.py (_SUITE_FACTS) and the family's identity in "
                       "properties/checks/blackbox.py",
    "sq_norm_bound": "properties/formulas.py (_SUITE_FACTS)",
    "exp_affine": "properties/formulas.py (_SUITE_FACTS)",
    "gradient_median_test": "properties/formulas.py (_SUITE_FACTS)",
    "optimal_variance": "verify/moments/closed_forms.py (OPTIMAL_VARIANCE)",
    "softmax_comparison": "properties/formulas.py (_SUITE_FACTS)",
}


def _random(r: Formula) -> bool:
    """Some map of the formula draws random features (an estimator, not a fixed map)."""
    return not all(get_map_deterministic(name) for name in r.maps)


def get_map_deterministic(name: str) -> bool:
    from kernel_verify.impls.registry import get

    return get(name).has("deterministic")


#: When a fact applies to a formula (an empty fact that applies needs a reason in WITHOUT).
APPLIES: dict[str, Callable[[Formula], bool]] = {
    "twin": lambda r: True,
    "closed_moments": lambda r: _random(r) and "unbiased" in r.claims,
    "exact_variance": lambda r: _random(r) and "unbiased" in r.claims,
    "fourth_moment": lambda r: _random(r) and "unbiased" in r.claims,
    # optional: a second route of fourth_moment; the quadrature covers every formula with one
    "closed_fourth_moment": lambda r: False,
    "reference_mean": lambda r: "biased" in r.claims,
    "backward": lambda r: True,
    "jacobian": lambda r: True,
    # the other biased fixed-norm maps have their row law (biased_means.row_moments)
    "fixed_norm_range": lambda r: False,
    "blackbox_family": lambda r: _random(r) and "unbiased" in r.claims,
    "sq_norm_bound": lambda r: "bounded" in r.claims,
    "exp_affine": lambda r: "log_features" in r.claims and "positive" in r.claims
                            and _random(r),
    "gradient_median_test": lambda r: _random(r) and "unbiased" in r.claims,
    # optional: a formula with a tunable parameter may declare its optimum
    "optimal_variance": lambda r: False,
    # optional: the report's figure compares the softmax estimators it lists
    "softmax_comparison": lambda r: False,
}

#: What the suite states about a formula itself (the other facts come from the truth's tables).
_SUITE_FACTS: dict[str, dict[str, Any]] = {
    "rff_pairs": {"blackbox_family": "pairs", "sq_norm_bound": 1.0},
    "fastfood": {"blackbox_family": "pairs", "sq_norm_bound": 1.0},
    "gmm_rks": {"blackbox_family": "pairs", "sq_norm_bound": 1.0},
    "generative": {"blackbox_family": "pairs", "sq_norm_bound": 1.0},
    "rff_phase": {"sq_norm_bound": 2.0},
    "softmax_trig": {"blackbox_family": "norm_factor", "softmax_comparison": 0},
    "softmax_positive": {"blackbox_family": "exponential", "exp_affine": True,
                         "gradient_median_test": True, "softmax_comparison": 1},
    "softmax_hyperbolic": {"blackbox_family": "exponential", "exp_affine": True,
                           "softmax_comparison": 2},
    "gerf": {"blackbox_family": "exponential", "exp_affine": True, "softmax_comparison": 3},
    "sderf": {"blackbox_family": "exponential", "exp_affine": True},
    "darkformer": {"exp_affine": True},
    "relu_features": {"blackbox_family": "homogeneous"},
}

_NO_BACKWARD = ("no derived backward bound for this formula: its gradient is checked by finite "
                "differences (test_gradcheck_float64_feature_map), not against the exact "
                "Jacobian")
_NO_MOMENTS_LEARNED = ("learned spectral map: its frequencies are fitted, no closed moment; "
                       "unbiasedness is tested with the proven range (bounded) or the pilot "
                       "variance of the black-box mean test")
_NO_REFMEAN = ("biased only through its frequency matrix (fixed-norm, SORF): the mean of that "
               "row law is not derived for this formula")
_GRAD_MEDIAN = ("the median-of-means gradient test has its exact per-draw variance for "
                "softmax_positive with iid rows only")

#: formula -> fact -> why the fact is left out (the verdict's "not tested (why)").
WITHOUT: dict[str, dict[str, str]] = {
    **{f: {"backward": _NO_BACKWARD, "jacobian": _NO_BACKWARD}
       for f in ("cosformer", "cosine", "dpfp", "hedgehog", "polynomial", "taylor",
                 "taylor2_compressed")},
    "fastfood": {"backward": _NO_BACKWARD, "jacobian": _NO_BACKWARD,
                 "closed_moments": _NO_MOMENTS_LEARNED, "exact_variance": _NO_MOMENTS_LEARNED,
                 "fourth_moment": _NO_MOMENTS_LEARNED, "gradient_median_test": _GRAD_MEDIAN},
    "generative": {"backward": _NO_BACKWARD, "jacobian": _NO_BACKWARD,
                   "closed_moments": _NO_MOMENTS_LEARNED, "exact_variance": _NO_MOMENTS_LEARNED,
                   "fourth_moment": _NO_MOMENTS_LEARNED, "gradient_median_test": _GRAD_MEDIAN},
    "gmm_rks": {"backward": _NO_BACKWARD, "jacobian": _NO_BACKWARD,
                "closed_moments": _NO_MOMENTS_LEARNED, "exact_variance": _NO_MOMENTS_LEARNED,
                "fourth_moment": _NO_MOMENTS_LEARNED, "gradient_median_test": _GRAD_MEDIAN},
    "gmm_prf": {"backward": _NO_BACKWARD, "jacobian": _NO_BACKWARD,
                "closed_moments": _NO_MOMENTS_LEARNED, "exact_variance": _NO_MOMENTS_LEARNED,
                "fourth_moment": _NO_MOMENTS_LEARNED, "gradient_median_test": _GRAD_MEDIAN,
                "blackbox_family": "a mixture of exponential components with learned "
                                   "weights: no per-draw identity of one family",
                "exp_affine": "log φ holds a learned mixture weight per component: not one "
                              "exp-affine map"},
    "relu_features": {"gradient_median_test": _GRAD_MEDIAN},
    "rff_pairs": {"gradient_median_test": _GRAD_MEDIAN},
    "rff_phase": {"blackbox_family": "the random phase b enters each feature: no per-draw "
                                     "identity without b (a black-box map does not expose it)",
                  "gradient_median_test": _GRAD_MEDIAN},
    "softmax_trig": {"gradient_median_test": _GRAD_MEDIAN},
    "softmax_hyperbolic": {"gradient_median_test": _GRAD_MEDIAN},
    "gerf": {"gradient_median_test": _GRAD_MEDIAN},
    "sderf": {"gradient_median_test": _GRAD_MEDIAN},
    "darkformer": {
        "gradient_median_test": _GRAD_MEDIAN,
        "blackbox_family": "DARKFormer: log φ = εᵀMx − ‖Mx‖²/2 with a learned M a black box "
                           "does not expose: the exponential family's identity assumes the "
                           "−‖x‖²/2 shift"},
    "random_maclaurin": {
        "gradient_median_test": _GRAD_MEDIAN,
        "fourth_moment": "random Maclaurin features: E h⁴ = Σₙ aₙ⁴(E(wᵀx)⁴(wᵀy)⁴)ⁿ/P(n)³ "
                         "is not derived (the eighth Rademacher moments); the variance test "
                         "uses the exact variance only",
        "blackbox_family": "random Maclaurin features: a random degree per feature and "
                           "Rademacher rows give no per-draw identity of one family (pairs, "
                           "norm factor, exponential, homogeneous)"},
}


def _truth() -> dict[str, dict[str, Any]]:
    """formula -> the facts the truth's tables hold for it."""
    from kernel_verify.verify.gradient_bounds import BACKWARD_RULES
    from kernel_verify.verify.moments.closed_forms import CLOSED_FORMS, OPTIMAL_VARIANCE
    from kernel_verify.verify.moments.estimators import MOMENT_FORMULAS
    from kernel_verify.verify.moments.fourth import CLOSED_RAW_FORMULAS, FOURTH_MOMENT_FORMULAS
    from kernel_verify.verify.references import biased_means
    from kernel_verify.verify.references.features import MP_FEATURES
    from kernel_verify.verify.references.gradients import CLOSED_JACOBIANS

    return {f: {"twin": MP_FEATURES.get(f), "closed_moments": f in CLOSED_FORMS,
                "exact_variance": f in MOMENT_FORMULAS,
                "fourth_moment": f in FOURTH_MOMENT_FORMULAS,
                "closed_fourth_moment": f in CLOSED_RAW_FORMULAS,
                "reference_mean": f in biased_means.FORMULAS,
                "backward": BACKWARD_RULES.get(f), "jacobian": CLOSED_JACOBIANS.get(f),
                "fixed_norm_range": biased_means.FIXED_NORM_RANGES.get(f),
                "optimal_variance": OPTIMAL_VARIANCE.get(f)}
            for f in FORMULAS}


def _declared(formula: str, twin: Any) -> dict[str, str]:
    """The reasons declared for the facts a formula lacks: the truth's own (its twin's
    ``not_derived``, verify/references) and the suite's (:data:`WITHOUT`)."""
    return {**dict(getattr(twin, "not_derived", None) or {}), **WITHOUT.get(formula, {})}


@functools.cache
def records() -> dict[str, Formula]:
    """formula id -> :class:`Formula`, built on first use (the registry loads its catalogue)."""
    truth = _truth()
    out = {}
    for f in sorted(FORMULAS):
        maps = [m for m in all_maps() if m.formula == f]
        out[f] = Formula(
            name=f, maps=tuple(m.name for m in maps),
            kernels=tuple(sorted({m.kernel for m in maps})),
            claims=frozenset().union(*(m.claims for m in maps)),
            **truth[f], **_SUITE_FACTS.get(f, {}),
            without=_declared(f, truth[f]["twin"]))
    return out


_NONE = Formula(name="", maps=(), kernels=(), claims=frozenset())


def record(formula: str | None) -> Formula:
    """The record of ``formula``; an empty record (every fact absent) for None or an id the
    project does not know (a third-party target declaring no family, or an unknown one)."""
    if formula is None:
        return _NONE
    return records().get(formula) or Formula(name=formula, maps=(), kernels=(),
                                                  claims=frozenset())


def formulas_where(**facts: Any) -> frozenset[str]:
    """The formula ids whose records hold ``facts`` (``blackbox_family="pairs"``;
    ``exact_variance=True``)."""
    return frozenset(f for f, r in records().items()
                     if all(getattr(r, k) == v for k, v in facts.items()))
