"""``kernel-verify calibrate --part same_precision``: the false-alarm rate of the same-precision
reference criterion (issue #44, :mod:`kernel_verify.verify.same_precision`) on correct targets,
at its factor ``c`` (:data:`~kernel_verify.verify.same_precision.FACTOR`).

One row per family × dtype (torch CPU, the backends the properties run the criterion on):

* **attention forms**: every built-in attention target declaring ``features`` with a stateful,
  chunked or step form, cycled over the trials; a trial draws a forms layout (the properties'
  ``random_shape``, one in four up to ``T = 40`` so that chunk boundaries of the fixed layouts
  are crossed) and compares every output the properties judge by the criterion:
  ``attention(causal=True)``, ``stateful``, ``chunked`` at the drawn ``C``, the steps
  (``test_forms_agree_with_each_other``), the split run and the probe continued from its state
  (``test_split_invariance``), with the properties' own functions
  (``properties/test_attention_forms.py``: ``same_precision``, ``run``, ``steps_tail``);
* **gated forms**: every built-in gated or delta-rule target accepting the dtype (half types:
  those claiming ``half_in_float32``), cycled; a trial draws a layout and a gate regime with the
  property's own ``setup`` (every regime, the underflow run included) and compares every form
  (parallel, stateful, chunked at the drawn ``C``, 1 and 2, the steps) and the split run with
  its probe (``test_gated_forms_meet_the_exact_recurrence``, ``test_gated_split_invariance``).
  The float64 value here is the plain recurrence run in float64
  (:func:`~kernel_verify.verify.same_precision.recurrence_plain`) rather than the properties'
  mpmath recurrence (its error, ~1e-16 relative, is 10⁻⁸ of the float32 allowance): the
  same comparison at a fraction of the cost.

* **low-precision gradients**: every built-in attention target
  ``test_low_precision_gradients_near_float64`` judges by the criterion on the dtype (exact
  softmax attention and the maps declaring ``features`` that take torch float64 and the dtype),
  and, to widen the sample of correct code, every registered map whose attention is meaningful
  built on torch in every dtype (:func:`gradient_targets`), cycled; a trial runs the property's
  own :func:`~kernel_verify.properties.gradient_checks.low_precision_gradients` in every mode
  the target claims with fresh seeds for the inputs, the upstream gradient and the target (the
  property: 28, 29, 0) and compares ``∂L/∂q``, ``∂L/∂k``, ``∂L/∂v`` (the gradient of a plain
  evaluation in the compute dtype as reference, the target's float64 gradient as ``y₆₄``).

A trial **rejects** when any of its comparisons is above the allowance at ``c``. The level is
the stated per-example level of the model assumptions
(:data:`~kernel_verify.calibration.certify.ASSUMPTION_LEVEL`), certified by 0 rejections in
``trials_to_certify`` trials; the margin column gives the largest ``c`` a comparison needed
(:attr:`~kernel_verify.verify.same_precision.Comparison.needed`), which is what ``c`` was chosen
from (``FACTOR`` and ``HALF_ROUNDINGS``: the largest measured with a margin).
"""

from __future__ import annotations

import numpy as np

from kernel_verify.calibration.certify import ASSUMPTION_LEVEL, Row, _seed

CHECK = ("same-precision reference criterion: max|y − y64| ≤ c·max(max|plain − y64|, u_c·Y + η_c) "
         "+ c_G·max|plain_G − y64| + R·(u_o·Y + η_o)")
FAMILIES = ("attention", "gated", "gradients")
DTYPES = ("float32", "float16", "bfloat16")


def _backend(target, dtype: str):
    from kernel_verify.properties.attention_cases import for_target
    from kernel_verify.verify.backends import AXIS

    base = next(b for b in AXIS if b.library == "torch" and b.device == "cpu"
                and b.dtype == dtype)
    return for_target(target, base)


def attention_targets(dtype: str) -> list:
    """Built-in attention targets the forms properties judge by the criterion on ``dtype``."""
    from kernel_verify.properties.builtin_attention import registry_attention_targets

    return [t for t in registry_attention_targets()
            if t.features is not None and t.has("causal") and t.accepts("torch", dtype)
            and any(t.offers(f) for f in ("stateful", "chunked", "step"))]


def gated_targets(dtype: str) -> list:
    """Built-in gated targets the gated properties judge by the criterion on ``dtype``."""
    from kernel_verify.properties.builtin_gated import builtin_gated_targets

    return [t for t in builtin_gated_targets() if t.accepts("torch", dtype)
            and (dtype == "float32" or t.has("half_in_float32"))]


def gradient_targets(dtype: str) -> list:
    """Correct targets of the gradient rows on ``dtype`` (module docstring): the built-in
    attention targets ``test_low_precision_gradients_near_float64`` applies the criterion to
    there (differentiable on torch, taking float64 and ``dtype``, a bound that is not void, exact
    attention or declared ``features``), then every other registered map whose attention is
    meaningful, built on torch in every dtype (the same registry code the built-in targets run,
    with the dtypes the test-time budget leaves out)."""
    from kernel_verify.impls.registry import all_maps
    from kernel_verify.properties.attention_cases import feature_count
    from kernel_verify.properties.builtin import builtin_targets
    from kernel_verify.properties.builtin_attention import (
        ALL_DTYPES,
        M_FEATURES,
        attention_claims,
        attention_not_meaningful,
        registry_attention,
    )
    from kernel_verify.properties.gradient_checks import low_precision_backend
    from kernel_verify.properties.protocol import AttentionTarget

    def judged(t) -> bool:
        return (isinstance(t, AttentionTarget) and t.has("differentiable")
                and t.accepts("torch", "float64") and t.accepts("torch", dtype)
                and (feature_count(t) == 0 or t.features is not None)
                and low_precision_backend(t, dtype)[1] is None)

    out = [t for t in builtin_targets() if judged(t)]
    names = {t.name for t in out}
    for entry in all_maps():
        if f"attention:{entry.name}" in names or attention_not_meaningful(entry) is not None:
            continue
        t = registry_attention(entry, M_FEATURES, attention_claims(entry), ALL_DTYPES,
                               ("torch",))
        if judged(t):
            out.append(t)
    return out


def gradient_comparisons(target, backend, rng: np.random.Generator) -> list:
    """The criterion's comparisons of one low-precision gradient example (module docstring):
    ``∂L/∂q, k, v`` in every mode the target claims."""
    from kernel_verify.properties.gradient_checks import low_precision_gradients

    seeds = [int(s) for s in rng.integers(0, 2**31, size=3)]
    modes = [c for c, claim in ((False, "noncausal"), (True, "causal")) if target.has(claim)]
    out = []
    for causal in modes or [False]:
        for r in low_precision_gradients(target, backend, causal, *seeds):
            cmp = r.same_precision()
            if cmp is not None:
                out.append(cmp)
    return out


def _property_module(name: str):
    """The property module ``name`` (``kernel_verify.properties.<name>``): the trials run its
    own functions, loaded at run time as ``calibration/power.py`` loads the property bodies."""
    import importlib

    return importlib.import_module(f"kernel_verify.properties.{name}")


def attention_comparisons(target, backend, rng: np.random.Generator) -> list:
    """The criterion's comparisons of one forms example (module docstring)."""
    from kernel_verify.properties.attention_cases import call
    from kernel_verify.properties.checks.forms import draw_inputs, random_shape
    from kernel_verify.properties.strategies import qkv_join, qkv_rows
    from kernel_verify.verify.same_precision import compare

    forms = _property_module("test_attention_forms")
    shape = random_shape(rng, max_t=40 if rng.random() < 0.25 else 12)
    x = draw_inputs(shape)
    sp = forms.same_precision(x, backend, target, shape.seed)
    if sp is None:
        return []
    y64, pl = sp
    kw = {"compute": backend.budget.compute_dtype, "output": backend.dtype}
    out = [compare(call(target, backend, x, causal=True, seed=shape.seed), y64, pl, **kw)]
    for form in ("stateful", "chunked"):
        if target.offers(form):
            got = forms.run(target, backend, x, seed=shape.seed, chunk=shape.chunk, form=form)[0]
            out.append(compare(got, y64, pl, **kw))
    if target.offers("step"):
        start, steps, _ = forms.steps_tail(target, backend, x, seed=shape.seed)
        out.append(compare(steps, y64[..., start:, :], pl[..., start:, :], **kw))
    if (target.offers("stateful") or target.offers("chunked")) and shape.t >= 2:
        cut = min(shape.cut, shape.t - 1)
        first, s1 = forms.run(target, backend, qkv_rows(x, 0, cut), seed=shape.seed,
                              chunk=shape.chunk)
        second, s2 = forms.run(target, backend, qkv_rows(x, cut, shape.t), seed=shape.seed,
                               chunk=shape.chunk, state=s1)
        out.append(compare(np.concatenate([first, second], axis=-2), y64, pl, **kw))
        probe = forms.probe_for(shape)
        spj = forms.same_precision(qkv_join(x, probe), backend, target, shape.seed)
        if spj is not None:
            got = forms.continuation(target, backend, s2, probe, shape.seed)
            out.append(compare(got, spj[0][..., shape.t:, :], spj[1][..., shape.t:, :], **kw))
    return out


def gated_comparisons(target, backend, rng: np.random.Generator) -> list:
    """The criterion's comparisons of one gated example (module docstring)."""
    from kernel_verify.properties.checks.recurrent import (
        STATEFUL,
        RandomDraws,
        chunk_of,
        plain,
        run,
        run_any,
        run_split,
    )
    from kernel_verify.properties.strategies import qkv_join, qkv_rows
    from kernel_verify.properties.token_inputs import TokenInputs
    from kernel_verify.verify.same_precision import compare

    gated = _property_module("test_gated_forms")
    shape, regime, x, g = gated.setup(target, backend, RandomDraws(rng))
    y64 = _exact64(target, backend, x, g)
    pl = plain(target, backend, x, g)
    if y64 is None or pl is None:
        return []
    kw = {"compute": backend.budget.compute_dtype, "output": backend.dtype}
    out = []
    for form in ("parallel", "stateful"):
        if getattr(target, form) is not None:
            got = run(target, backend, x, g, form=form, seed=shape.seed)[0]
            out.append(compare(got, y64, pl, **kw))
    if target.chunked is not None:
        for c in sorted({chunk_of(target, c) for c in (shape.chunk, 1, 2)}):
            got = run(target, backend, x, g, form="chunked", seed=shape.seed, chunk=c)[0]
            out.append(compare(got, y64, pl, **kw))
    if target.step is not None:
        stateful = any(getattr(target, f) is not None for f in STATEFUL)
        head = max(shape.t - gated.STEP_TOKENS, 0) if stateful else 0
        s0 = None
        if head:
            s0 = run_any(target, backend, qkv_rows(x, 0, head), g.rows(0, head),
                         seed=shape.seed)[1]
        got = gated.run_steps(target, backend, qkv_rows(x, head, shape.t),
                              g.rows(head, shape.t), seed=shape.seed, state=s0)[0]
        out.append(compare(got, y64[..., head:, :], [p[..., head:, :] for p in pl], **kw))
    if any(getattr(target, f) is not None for f in STATEFUL):
        _, split, state = run_split(target, backend, x, g, shape)
        out.append(compare(split, y64, pl, **kw))
        px, pg = gated.probe_for(target, backend, shape, regime)
        if g.fixed:
            pg = TokenInputs(g.g, True, pg.extra)
        xj, gj = qkv_join(x, px), TokenInputs.join(g, pg)
        yj, pj = _exact64(target, backend, xj, gj), plain(target, backend, xj, gj)
        if yj is not None and pj is not None:
            got = run_any(target, backend, px, pg, seed=shape.seed, state=state)[0]
            n = x.q.shape[-2]
            out.append(compare(got, yj[..., n:, :], [p[..., n:, :] for p in pj], **kw))
    return out


def _exact64(target, backend, x, g):
    """The plain recurrence in float64 on the inputs as the target saw them (None when not
    finite)."""
    from kernel_verify.properties.checks.recurrent import plain

    out = plain(target, backend, x, g, compute="float64")
    return None if out is None else out[0]


_TARGETS = {"attention": attention_targets, "gated": gated_targets, "gradients": gradient_targets}
_TRIALS = {"attention": attention_comparisons, "gated": gated_comparisons,
           "gradients": gradient_comparisons}
_WHAT = {"attention": "attention forms", "gated": "gated forms",
         "gradients": "low-precision gradients ∂L/∂(q, k, v)"}


def unit_names() -> list[str]:
    """``family:dtype`` of every row (one unit each)."""
    return [f"{f}:{d}" for f in FAMILIES for d in DTYPES if _TARGETS[f](d)]


def same_precision_rows(name: str, n: int, entropy: int, assumption_trials: int,
                        c: float | None = None) -> list[Row]:
    """One row ``family:dtype`` (module docstring): ``assumption_trials`` examples cycled over
    the family's targets; rejections at ``c`` (default ``FACTOR``); margin: the largest ``c``
    needed, per target."""
    from kernel_verify.verify.same_precision import FACTOR

    c = FACTOR if c is None else c
    family, dtype = name.split(":")
    if family not in _TARGETS or dtype not in DTYPES:
        raise ValueError(f"name must be family:dtype with family one of {FAMILIES} and dtype "
                         f"one of {DTYPES}, got {name!r}")
    targets, trial = _TARGETS[family](dtype), _TRIALS[family]
    backends = [_backend(t, dtype) for t in targets]
    worst: dict[str, float] = {}
    worst_cum: dict[str, float] = {}  # c_G needed at c (decays from running sums of log-gates)
    rejections = trials = 0
    for i in range(assumption_trials):
        j = i % len(targets)
        rng = np.random.default_rng(_seed(entropy, "same_precision", name, i))
        comps = trial(targets[j], backends[j], rng)
        if not comps:
            continue
        trials += 1
        need = max(cmp.needed for cmp in comps)
        worst[targets[j].name] = max(worst.get(targets[j].name, 0.0), need)
        cums = [cmp.needed_cumulative for cmp in comps if cmp.err_cum > 0]
        if cums:
            worst_cum[targets[j].name] = max(worst_cum.get(targets[j].name, 0.0), max(cums))
        rejections += need > c
    top = sorted(worst.items(), key=lambda kv: -kv[1])
    what = "R needed at c" if dtype in ("float16", "bfloat16") else "c needed"
    top_cum = sorted(worst_cum.items(), key=lambda kv: -kv[1])
    margin = (f"largest {what} {top[0][1]:.3g} ({top[0][0]}); " if top else "") + (
        f"largest c_G needed {top_cum[0][1]:.3g} ({top_cum[0][0]}); " if top_cum else "") + (
        f"{len(targets)} targets")
    from kernel_verify.verify.same_precision import CUMULATIVE_FACTOR, HALF_ROUNDINGS

    at = (f" at c = {c:g}" + (f", c_G = {CUMULATIVE_FACTOR:g}" if family == "gated" else "")
          + (f", R = {HALF_ROUNDINGS:g}" if dtype != "float32" else ""))
    return [Row(CHECK + at, f"{_WHAT[family]} ({len(targets)} built-in targets)",
                f"torch:cpu {dtype} vs float64", trials, (ASSUMPTION_LEVEL,), (rejections,),
                f"stated {ASSUMPTION_LEVEL:g} per example (calibrated factor)", margin)]


__all__ = ["CHECK", "attention_comparisons", "gated_comparisons", "gradient_comparisons",
           "gradient_targets", "same_precision_rows", "unit_names"]
