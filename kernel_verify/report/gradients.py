"""Gradients on a map's page: autograd accuracy per backend × dtype, and the bias of the gradient
estimator of random maps (docs/math.md §14), through the property suite's own check functions
(:mod:`kernel_verify.properties.gradient_checks`, which ``properties/test_gradients.py`` calls).

**Accuracy** (:func:`gradient_rows`): for ``SEEDS`` seeded draws (``n = 3`` rows, ``d = 4``,
``m = 8``, inputs ``0.7·N(0, 1)``), the worst ``|autograd − exact| / derived bound`` of

* ``∂/∂x Σ G⊙φ(x)`` (``G ~ N(0, 1)``):
  :func:`~kernel_verify.properties.gradient_checks.feature_vjp_check`, the check of
  ``test_feature_gradient_matches_exact``;
* ``∇ₓ φ(x)ᵀφ(y)``: :func:`~kernel_verify.properties.gradient_checks.kernel_gradient_check`,
  the check of ``test_kernel_estimate_gradient_matches_exact`` — float64 and float32 only, as
  the property: in a half type ``φ̂(y)`` is rounded to the half type, an error the derived
  upstream bound does not contain.

NumPy computes no gradient (not applicable); CUDA rows are not run where no GPU exists.

**Bias of the gradient estimator** (:func:`gradient_bias`, random maps claiming ``unbiased``):
``B`` independent parameter draws of ``ĝ = ∇ₓ φ_ω(x)ᵀφ_ω(y)`` at the page's default pair
(float64 autograd, :func:`~kernel_verify.properties.gradient_checks.estimator_gradients`);
bias ``= mean(ĝ) − ∇ₓ k(x, y)`` per component, ``∇ₓ k`` from mpmath
(:func:`~kernel_verify.verify.references.gradients.kernel_grad_closed_mp` where a closed form
exists, else :func:`~kernel_verify.verify.references.gradients.kernel_grad_mp`), with a
percentile-bootstrap interval of the mean at the page's level (``Settings.conf``). The interval
is descriptive (it under-covers heavy tails, no known false-alarm rate): ``∇ₓk`` outside it
*flags* the page (:func:`bias_flags`); a FAIL comes only from the property's test where it
exists: positive features with iid Gaussian rows, whose per-frequency gradient variance
is exact (:func:`~kernel_verify.verify.gradient_stats.positive_gradient_moments`), are tested by
:func:`~kernel_verify.verify.gradient_stats.gradient_mean_test` (the known-variance mean
test per standardised component, Catoni's M-estimator at these draw counts: false alarm ``≤ α``
per component for any distribution of the draws; ``d`` assertions of the report's α budget).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from kernel_verify.properties.backends import to_numpy
from kernel_verify.properties.formulas import record
from kernel_verify.properties.gradient_checks import (
    estimator_gradients,
    feature_vjp_check,
    kernel_gradient_check,
    rule_entry,
    tensor,
)
from kernel_verify.properties.protocol import FeatureMapTarget
from kernel_verify.verify.backends import AXIS, Backend
from kernel_verify.verify.cache import exact_text, file_cache_get, file_cache_put
from kernel_verify.verify.gradient_stats import (
    draws_for_alpha,
    gradient_mean_test,
    positive_gradient_moments,
)
from kernel_verify.verify.references.gradients import kernel_grad_closed_mp, kernel_grad_mp
from kernel_verify.verify.references.mp import to_float

SEEDS = 3
N, D, M, SCALE = 3, 4, 8, 0.7
#: dtypes in which ``∇ₓ φ(x)ᵀφ(y)`` has a derived bound (as the property)
KERNEL_DTYPES = ("float64", "float32")
#: m of the gradient-bias measurement
BIAS_M = 16
CLOSED_KERNELS = ("softmax", "gaussian", "linear")

NO_AUTOGRAD = "not applicable: no autograd (NumPy computes no gradient)"


@dataclass
class GradientRow:
    backend: str
    dtype: str
    #: "pass", "FAIL", or "not …: reason"
    status: str
    phi_ratio: float | None = None
    phi_error: float | None = None
    kernel_ratio: float | None = None
    kernel_error: float | None = None
    kernel_note: str = ""


def _inputs(seed: int, backend: Backend) -> tuple[np.ndarray, np.ndarray]:
    """``(x, y)`` of seed: ``0.7·N(0, 1)`` (3, 4) each, redrawn while an entry of x rounds
    within ``1e-6·0.7`` of 0 (the kinks of piecewise maps, as the property's ``assume``)."""
    rng = np.random.default_rng(10_000 + seed)
    while True:
        x, y = SCALE * rng.standard_normal((N, D)), SCALE * rng.standard_normal((N, D))
        if np.all(np.abs(to_numpy(tensor(x, backend))) > 1e-6 * SCALE):
            return x, y


def case_checks(target: FeatureMapTarget, entry, backend: Backend, seed: int):
    """The two checks of one seed (``kernel`` None outside :data:`KERNEL_DTYPES`): exactly the
    property's check functions on the report's inputs (``tests/test_report.py`` re-runs them)."""
    from kernel_verify.properties.gradient_checks import draw

    params = draw(target, seed, D, M)
    x, y = _inputs(seed, backend)
    phi = feature_vjp_check(target, entry, backend, x, params,
                            np.random.default_rng(20_000 + seed))
    kern = (kernel_gradient_check(target, entry, backend, x, y, params)
            if backend.dtype in KERNEL_DTYPES else None)
    return phi, kern


def gradient_rows(target: FeatureMapTarget) -> list[GradientRow]:
    """One row per point of the backend axis (module docstring)."""
    rows = []
    entry, reason = rule_entry(target)
    for b in AXIS:
        if b.name == "numpy":
            rows.append(GradientRow(b.name, b.dtype, NO_AUTOGRAD))
            continue
        if not b.available:
            rows.append(GradientRow(b.name, b.dtype, f"not run: {b.skip_reason or 'unavailable'}"))
            continue
        if target.torch_fn is None:
            rows.append(GradientRow(b.name, b.dtype, "not tested: no torch feature function"))
            continue
        if entry is None:
            rows.append(GradientRow(b.name, b.dtype, f"not tested: {reason}"))
            continue
        phi_r = phi_e = 0.0
        kern_r = kern_e = 0.0 if b.dtype in KERNEL_DTYPES else None
        for seed in range(SEEDS):
            phi, kern = case_checks(target, entry, b, seed)
            phi_r, phi_e = max(phi_r, phi.ratio), max(phi_e, phi.max_abs_error)
            if kern is not None:
                kern_r, kern_e = max(kern_r, kern.ratio), max(kern_e, kern.max_abs_error)
        ok = phi_r <= 1.0 and (kern_r is None or kern_r <= 1.0)
        note = "" if kern_r is not None else (
            "not checked in a half type: no derived bound covers φ̂(y) rounded to it (the "
            "property checks float64 and float32 only)")
        rows.append(GradientRow(b.name, b.dtype, "pass" if ok else "FAIL", phi_r, phi_e,
                                kern_r, kern_e, note))
    return rows


def median_test_applies(target: FeatureMapTarget) -> bool:
    """The property's exact-moment test exists: unbiased positive features with iid rows."""
    return (target.has("unbiased") and record(target.formula).gradient_median_test
            and target.matrix == "iid")


def _reference_digest() -> str:
    """sha256 of every mpmath reference module (part of the cache key): the kernel gradients are
    differences of the kernels, whose quadratures (the generative kernel's) live in the catalogue
    and the quadrature module, so the whole folder decides a stored value."""
    from kernel_verify.verify import references
    from kernel_verify.verify.cache import source_digest

    return source_digest(sorted(Path(references.__file__).parent.glob("*.py")))


def kernel_gradient(target: FeatureMapTarget, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """``∇ₓ k(x, y)`` of the target kernel in float64 (closed form where there is one); cached
    in the file cache (:mod:`kernel_verify.verify.cache`) by kernel, inputs, kernel parameters
    and the references' source."""
    kp = target.kernel_args(x.shape[-1])
    key = exact_text((target.kernel, x, y, kp, _reference_digest()))
    hit = file_cache_get("kernel-grad", key)
    if hit is not None:
        return np.array(hit, dtype=np.float64)
    fn = kernel_grad_closed_mp if target.kernel in CLOSED_KERNELS else kernel_grad_mp
    out = to_float(fn(target.kernel, x, y, **kp))
    file_cache_put("kernel-grad", key, out.tolist())
    return out


@dataclass
class GradientBias:
    m: int
    draws: int
    seed: int
    exact: list[float]
    mean: list[float]
    lo: list[float]
    hi: list[float]
    conf: float
    test: str
    test_ok: bool | None
    #: the second measurement of a flag (:func:`resolve_bias_flag`); "" when nothing was flagged
    resolution: str = ""

    def to_json(self) -> dict:
        return asdict(self)


#: The second measurement of a flagged gradient bias draws this many times the page's draws.
SECOND_FACTOR = 4


def _outside(exact: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    slack = 1e-12 * max(1.0, float(np.max(np.abs(exact))))  # 0 in float64
    return np.flatnonzero((exact < lo - slack) | (exact > hi + slack))


def truth_second_route(target: FeatureMapTarget, x: np.ndarray, y: np.ndarray
                       ) -> np.ndarray | None:
    """``∇ₓk`` by a route independent of :func:`kernel_gradient`: high-precision differences of
    the kernel where the page uses a closed form, the closed form where it uses differences
    (softmax, Gaussian, linear, Taylor), the quadrature of ``−E[sin(gᵀδ)g]`` for the generative
    kernel (:func:`~kernel_verify.verify.references.kernels_catalogue.generative_grad_mp`); None
    otherwise (checked by ``tests/test_second_route.py`` instead)."""
    import mpmath

    from kernel_verify.verify.references.kernels_catalogue import generative_grad_mp
    from kernel_verify.verify.references.mp import to_mp

    kp = target.kernel_args(x.shape[-1])
    try:
        if target.kernel in CLOSED_KERNELS:
            return to_float(kernel_grad_mp(target.kernel, x, y, **kp))
        if target.kernel in ("taylor",):
            return to_float(kernel_grad_closed_mp(target.kernel, x, y, **kp))
        if target.kernel == "generative":
            with mpmath.workdps(30):
                return to_float(generative_grad_mp(to_mp(x), to_mp(y), *(
                    to_mp(np.asarray(kp[k], float)) for k in ("W1", "b1", "W2", "b2"))))
    except (ArithmeticError, KeyError, ValueError):
        return None
    return None


def resolve_bias_flag(target: FeatureMapTarget, x: np.ndarray, y: np.ndarray, m: int,
                      exact: np.ndarray, draws: int, seed: int, conf: float, boot: int) -> str:
    """A flagged gradient bias, measured again: ``SECOND_FACTOR × draws`` fresh draws and the
    truth's second route (:func:`truth_second_route`). ``∇ₓk`` inside the new intervals:
    "theory confirmed" (the first interval under-covered); the truth's routes disagreeing by
    more than 10⁻⁸ relative: "theory wrong"; otherwise "unresolved" (the intervals are
    descriptive: without an exact gradient variance no test with a known false-alarm rate can
    say "estimator wrong" here — the median-of-means test FAILs the page where it applies)."""
    n2 = SECOND_FACTOR * draws
    g = estimator_gradients(target, x, y, m, [seed + 10**6 + i for i in range(n2)])
    rng = np.random.default_rng(seed + 10**6)
    means = np.empty((boot, g.shape[1]))
    for b in range(boot):  # one resample at a time: memory O(n2)
        means[b] = g[rng.integers(0, n2, n2)].mean(axis=0)
    lo, hi = np.quantile(means, [(1 - conf) / 2, (1 + conf) / 2], axis=0)
    out = _outside(exact, lo, hi)
    how = (f"second measurement, {n2} fresh draws: ∇ₓk outside the {conf:.1%} interval at "
           f"component(s) {out.tolist()}")
    second = truth_second_route(target, x, y)
    if second is not None and np.max(np.abs(second - exact)) > 1e-8 * max(
            1.0, float(np.max(np.abs(exact)))):
        return (f"theory wrong: ∇ₓk by its second route {np.round(second, 6).tolist()} differs "
                f"from the page's {np.round(exact, 6).tolist()}; {how}")
    if not len(out):
        agree = "" if second is None else "; the truth's second route agrees"
        return f"theory confirmed: {how.replace(' outside', ' inside')} (none){agree}"
    return f"unresolved: {how}"


def gradient_bias(target: FeatureMapTarget, x: np.ndarray, y: np.ndarray, draws: int, seed: int,
                  conf: float, boot: int, alpha: float) -> GradientBias:
    """Mean of ``draws`` gradient draws against ``∇ₓ k``, bootstrap interval, and the median
    test where it applies (module docstring)."""
    from kernel_verify.properties.checks.estimates import feature_m

    m = feature_m(target, BIAS_M)
    seeds = [seed + i for i in range(draws)]
    g = estimator_gradients(target, x, y, m, seeds)
    exact = kernel_gradient(target, x, y)
    rng = np.random.default_rng(seed)
    means = g[rng.integers(0, draws, (boot, draws))].mean(axis=1)
    lo, hi = np.quantile(means, [(1 - conf) / 2, (1 + conf) / 2], axis=0)
    test, ok = "no test with a known false-alarm rate (no exact gradient variance)", None
    if median_test_applies(target):
        if draws < draws_for_alpha(alpha):
            test = f"not tested: {draws} draws < {draws_for_alpha(alpha)} needed at α = {alpha:.2g}"
        else:
            mu, var = positive_gradient_moments(x, y)
            res = gradient_mean_test(g, mu, np.sqrt(var / m), alpha)
            ok = res.ok
            test = (f"{res.method} test with the exact per-frequency variance, α = {alpha:.2g} "
                    f"per component (false alarm ≤ α, B = {draws} draws): "
                    + ("pass" if ok else "**FAIL**: " + res.describe()))
    resolution = ""
    if len(_outside(exact, lo, hi)):
        resolution = resolve_bias_flag(target, x, y, m, exact, draws, seed, conf, boot)
    return GradientBias(m, draws, seed, exact.tolist(), g.mean(axis=0).tolist(), lo.tolist(),
                        hi.tolist(), conf, test, ok, resolution)


def bias_flags(gb: dict | None) -> list[str]:
    """Components whose bootstrap interval of the mean gradient excludes ``∇ₓk``: flagged (a
    descriptive interval, no known false-alarm rate: it flags, it does not fail), unless the
    second measurement (:func:`resolve_bias_flag`) confirmed the theory."""
    if not gb:
        return []
    exact, lo, hi = np.array(gb["exact"]), np.array(gb["lo"]), np.array(gb["hi"])
    out = _outside(exact, lo, hi)
    if not len(out) or gb.get("resolution", "").startswith("theory confirmed"):
        return []
    bias = np.round((np.array(gb["mean"]) - exact)[out], 4).tolist()
    return [f"gradient estimator: ∇ₓk outside the measured {gb['conf']:.1%} bootstrap interval "
            f"of the mean gradient at component(s) {out.tolist()} (m = {gb['m']}, "
            f"{gb['draws']} draws; bias {bias})"
            + (f"; {gb['resolution']}" if gb.get("resolution") else "")]
