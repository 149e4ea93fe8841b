"""The checks of the model properties (``properties/test_models.py``; docs/math.md §15), their
tolerances, and the power control every model verdict carries.

**A check** compares two routes to the same numbers of one model (decoding with the cache vs
the full forward, packed vs separate runs, …) and returns None, or a text naming what
differed, by how much, where, and the tolerance. Each check also runs with ``defect=True``:
the same comparison with **a planted defect of its class** applied through the target's own
calls (the cache dropped after the first step, the packed sequences run as one, the mask
dropped, the prefill detached from the graph, …; see each check). The defect is planted at
the call level, so it needs nothing from the model beyond the calls it already offers.

**The power control** (:func:`power_ladder`): before a property's examples run, its check runs
on a fixed control case with and without the defect at each init scale of the target's ladder
(``init_scales``), in order. The first scale at which the planted defect *fails* the check is
the scale the property's examples run at: there the check is shown able to fail. Where the
defect passes at every scale of the ladder the verdict is ``not credited: cannot fail at this
init`` (the examples still run, at the largest scale). The correct model is checked at every
scale of the ladder up to the credited one.

**The reference** (:func:`reference`): the full forward of an input, computed once per built
model and input and shared by the tolerance, the check with and without its defect, and the
other properties meeting the same input (the controls' fixed cases); likewise the full
forward's gradients. A forward is a pure function of the weights and the input (the same-seed
property calls it twice to check exactly that); the routes under test are never memoised.

**Tolerances** (:func:`tolerance`). With the claim ``float64`` (the same weights in float64):
the float32 full forward's observed error ``e = max|f₃₂ − f₆₄|`` over the case sets the scale,
``tol₃₂ = K·e + 4u₃₂·max|f₆₄|`` with ``K =`` :data:`ROUTE_FACTOR` (the stated assumption: each of
the two routes compared rounds at most ``K/2`` times as much as the full forward), and
``tol₆₄ = tol₃₂ · u₆₄/u₃₂`` (rounding error scales with the unit roundoff of the same
algorithm). Without float64: the stated assumption ``tol₃₂ =`` :data:`ASSUMED_ULPS` ``· u₃₂ ·
T · max(1, max|f₃₂|)`` (T tokens of accumulation). Gradients: the same with the gradients of
the full forward's loss in place of the logits.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from kernel_verify.properties.model_protocol import ModelTarget
from kernel_verify.verify.seeds import rng as seeded_rng
from kernel_verify.verify.tolerance import U64

U32 = 2.0**-24
#: K of the module docstring: two routes, each assumed to round at most 8× as much as the full
#: forward (the built-in LM's observed ratio is reported in docs/math.md §15).
ROUTE_FACTOR = 16.0
#: Float32-only targets: the assumed error per token of accumulation, in units of u₃₂ of the
#: largest logit (module docstring).
ASSUMED_ULPS = 64.0
#: A float64 claim is false when the float32 and float64 full forwards differ by more than
#: this times max(1, max|logit|): float32 rounding is ~1e-7 of that; a different function is O(1).
FLOAT64_CLAIM_BOUND = 2.0**-10
#: The init scales of the finiteness sweep, times the scale the check runs at; in float32
#: capped at ``FINITE_SWEEP[-1]`` times the first scale of the target's ladder (weights with a
#: standard deviation of ~10 at the usual 0.02): a power control that raised the scale does not
#: push the sweep past that top, where a correct float32 model's activations may leave
#: float32's range (measured: mambapy's Mamba LM, correct, reaches 4.5e36 inside its last
#: projection at 4096× its init). float64's range (to 1e308) leaves a correct model finite far
#: beyond, so its sweep is not capped (its naive log-softmax control needs logits past ~709).
FINITE_SWEEP = (1.0, 8.0, 64.0, 512.0)


def finite_sweep(target: ModelTarget, scale: float, dtype: str) -> list[float]:
    """The init scales :func:`finite` visits from ``scale``: ``scale · FINITE_SWEEP``, in
    float32 capped at ``FINITE_SWEEP[-1] · init_scales[0]`` (``scale`` itself always),
    ascending."""
    if dtype == "float64":
        return [scale * k for k in FINITE_SWEEP]
    top = FINITE_SWEEP[-1] * float(target.init_scales[0])
    return sorted({scale, *(min(scale * k, max(top, scale)) for k in FINITE_SWEEP)})


# ----------------------------------------------------------------------------- models
_BUILT: dict[tuple, tuple[ModelTarget, Any, dict]] = {}
_BUILT_MAX = 16


def _entry(target: ModelTarget, seed: int, scale: float, dtype: str) -> tuple:
    """``(target, model, memo)`` of the model at ``seed``, ``scale`` and ``dtype`` (built on
    first use; the last few built are kept, each with its memo of reference computations)."""
    key = (id(target), int(seed), float(scale), dtype)
    if key not in _BUILT:
        if len(_BUILT) >= _BUILT_MAX:
            _BUILT.pop(next(iter(_BUILT)))
        _BUILT[key] = (target, target.build(int(seed), init_scale=float(scale), dtype=dtype),
                       {})
    return _BUILT[key]


def model(target: ModelTarget, seed: int, scale: float, dtype: str) -> Any:
    """The target's model at ``seed``, ``scale`` and ``dtype`` (the last few built are kept;
    targets are keyed by identity: a target holds mappings, so it is not hashable)."""
    return _entry(target, seed, scale, dtype)[1]


def _memo(target: ModelTarget, seed: int, scale: float, dtype: str, what: str,
          ids: torch.Tensor, compute: Callable[[Any], Any]) -> Any:
    """``compute(model)`` once per built model and input ``ids`` (kept with the model)."""
    _, m, memo = _entry(target, seed, scale, dtype)
    key = (what, tuple(ids.shape), ids.to(torch.int64).numpy().tobytes())
    if key not in memo:
        memo[key] = compute(m)
    return memo[key]


def reference(target: ModelTarget, seed: int, scale: float, dtype: str,
              ids: torch.Tensor) -> torch.Tensor:
    """The full forward of ``ids`` (no grad) by the model at ``seed``, ``scale``, ``dtype``:
    the reference every other route is compared with and the scale of the tolerance. Computed
    once per built model and input and then shared by the tolerance, the check with and
    without its planted defect, and every property that meets the same input (the power
    controls' fixed cases): a forward is a pure function of the weights and ``ids``, which
    ``test_same_seed_and_input_give_the_same_output`` checks by calling it twice. Read only."""
    return _memo(target, seed, scale, dtype, "logits", ids,
                 lambda m: logits_of(target, m, ids))


def dtypes(target: ModelTarget) -> list[str]:
    """The dtype paths of a target: float32, and float64 where it runs."""
    return ["float32", "float64"] if target.has("float64") else ["float32"]


def _np(x: Any) -> np.ndarray:
    return x.detach().to("cpu", torch.float64).numpy()


def logits_of(target: ModelTarget, m: Any, ids: torch.Tensor) -> torch.Tensor:
    with torch.no_grad():
        return target.forward(m, ids)


# ------------------------------------------------------------------------- tolerances
@dataclass(frozen=True)
class Tolerance:
    value: float
    how: str


def _scale_tol(target: ModelTarget, dtype: str, e32: float | None, ref_max: float,
               tokens: int) -> Tolerance:
    if e32 is not None:
        tol32 = ROUTE_FACTOR * e32 + 4 * U32 * ref_max
        if dtype == "float32":
            return Tolerance(tol32, f"K·e + 4u₃₂·max = {ROUTE_FACTOR:g}·{e32:.3g} + "
                             f"4u₃₂·{ref_max:.3g}")
        return Tolerance(tol32 * U64 / U32, f"(K·e + 4u₃₂·max)·u₆₄/u₃₂ with e = {e32:.3g} "
                         "(float32 full forward vs float64)")
    tol = ASSUMED_ULPS * U32 * tokens * max(1.0, ref_max)
    return Tolerance(tol, f"assumed {ASSUMED_ULPS:g}·u₃₂·T·max(1, max|f|), T = {tokens} "
                     "(no float64 run of this model)")


def tolerance(target: ModelTarget, dtype: str, seed: int, scale: float,
              ids: torch.Tensor) -> Tolerance:
    """The logits tolerance of a case (module docstring)."""
    f32 = _np(reference(target, seed, scale, "float32", ids))
    if target.has("float64"):
        f64 = _np(reference(target, seed, scale, "float64", ids))
        e32, ref = float(np.max(np.abs(f32 - f64))), float(np.max(np.abs(f64)))
        assert e32 <= FLOAT64_CLAIM_BOUND * max(1.0, ref), (
            f"{target.name} claims float64, but its float64 model does not compute its float32 "
            f"model's function: max |f32 − f64| = {e32:.3g} over logits up to {ref:.3g} (more "
            f"than {FLOAT64_CLAIM_BOUND:.3g}·max(1, max|f|)); tolerances cannot be derived")
        return _scale_tol(target, dtype, e32, ref, ids.shape[1])
    return _scale_tol(target, dtype, None, float(np.max(np.abs(f32))), ids.shape[1])


def differ(got: Any, want: Any, tol: Tolerance, what: str) -> str | None:
    """None when ``|got − want| ≤ tol`` everywhere (and both finite), else what differed."""
    g, w = _np(got) if isinstance(got, torch.Tensor) else got, (
        _np(want) if isinstance(want, torch.Tensor) else want)
    if g.shape != w.shape:
        return f"{what}: shapes differ, {g.shape} vs {w.shape}"
    bad = ~np.isfinite(g) | ~np.isfinite(w)
    if bad.any():
        i = tuple(int(j) for j in np.argwhere(bad)[0])
        return (f"{what}: {int(bad.sum())} non-finite values (first at {i}: {float(g[i])!r} vs "
                f"{float(w[i])!r})")
    diff = np.abs(g - w)
    if not (diff > tol.value).any():
        return None
    i = tuple(int(j) for j in np.unravel_index(int(np.argmax(diff)), diff.shape))
    return (f"{what}: max |difference| {diff[i]:.3g} at {i} ({float(g[i])!r} vs "
            f"{float(w[i])!r}), "
            f"{int((diff > tol.value).sum())} of {diff.size} values beyond the tolerance "
            f"{tol.value:.3g} ({tol.how}); max |reference| {np.max(np.abs(w)):.3g}")


# ------------------------------------------------------------------------------ cases
@dataclass(frozen=True)
class Case:
    """A model input: ``ids (B, T)``, a split ``1 ≤ split < T``, packing lengths (summing to
    T, batch 1 uses row 0) and pad counts per row."""

    ids: tuple[tuple[int, ...], ...]
    split: int
    lengths: tuple[int, ...]
    pads: tuple[int, ...]
    seed: int = 0

    def tensor(self) -> torch.Tensor:
        return torch.tensor(self.ids, dtype=torch.int64)

    @property
    def length(self) -> int:
        return len(self.ids[0])


def control_case(target: ModelTarget) -> Case:
    """The fixed case of the power control: batch 2, the longest sequences, the split in the
    middle, two packed sequences, pads of a third of the length (deterministic ids)."""
    t = target.max_len
    g = seeded_rng(20261126)  # = default_rng(20261126): the ids the controls were run with
    ids = tuple(tuple(int(v) for v in g.integers(0, target.vocab_size, t)) for _ in range(2))
    return Case(ids, t // 2, (t // 2, t - t // 2), (t // 3, max(1, t // 4)))


# ------------------------------------------------------------------------------ checks
Check = Callable[[ModelTarget, str, float, Case, bool], "str | None"]


def decode(target: ModelTarget, dtype: str, scale: float, case: Case, defect: bool
           ) -> str | None:
    """Prefill ``x[:split]``, then one-token steps: the logits of each step equal row ``t`` of
    the full forward. Defect: the cache is dropped after the first step (from the second step
    on, each token is run alone by ``prefill``)."""
    m = model(target, case.seed, scale, dtype)
    ids = case.tensor()
    tol = tolerance(target, dtype, case.seed, scale, ids)
    full = reference(target, case.seed, scale, dtype, ids)
    with torch.no_grad():
        logits, cache = target.prefill(m, ids[:, :case.split])
        problem = differ(logits, full[:, :case.split], tol, f"prefill of {case.split} tokens "
                         "vs the full forward")
        if problem:
            return problem
        steps = []
        for t in range(case.split, case.length):
            if defect and t > case.split:  # the cache dropped: the token alone, by prefill (a
                # step from None is not in the protocol: a correct step may require a cache)
                logits_t, cache = target.prefill(m, ids[:, t:t + 1])
                steps.append(logits_t[:, -1])
                continue
            out, cache = target.step(m, cache, ids[:, t])
            steps.append(out)
    return differ(torch.stack(steps, 1), full[:, case.split:], tol,
                  f"step-by-step logits after a prefill of {case.split} of {case.length} tokens "
                  "vs the full forward")


def generate(target: ModelTarget, dtype: str, scale: float, case: Case, defect: bool
             ) -> str | None:
    """Greedy ``generate`` with the cache from the prompt ``x[:split]`` equals greedy decoding
    without a cache (the full forward over the prefix, recomputed each step), token for token,
    with the scores compared at every step. Where two scores of the reference are within the
    tolerance of each other (a tie within rounding) and the tokens differ, the comparison stops
    there. Defect: the generated scores are those of a cache dropped after the first step (the
    full forward of the last token alone)."""
    m = model(target, case.seed, scale, dtype)
    prompt = case.tensor()[:, :case.split]
    n = case.length - case.split
    tol = tolerance(target, dtype, case.seed, scale, case.tensor())
    with torch.no_grad():
        tokens, scores = target.generate(m, prompt, n)
        if tokens.shape != (prompt.shape[0], n) or scores.shape[:2] != (prompt.shape[0], n):
            return (f"generate returned tokens {tuple(tokens.shape)} and scores "
                    f"{tuple(scores.shape)}, expected ({prompt.shape[0]}, {n}) and "
                    f"({prompt.shape[0]}, {n}, V)")
        if defect:
            scores = scores.clone()
            for i in range(1, n):
                scores[:, i] = target.forward(m, tokens[:, i - 1:i])[:, -1]
        tol = scores_tolerance(tol, scores, dtype, case, target, scale)
        seq = prompt
        for i in range(n):
            want = reference(target, case.seed, scale, dtype, seq)[:, -1]
            problem = differ(scores[:, i], want, tol, f"scores of generated token {i + 1} "
                             f"(prompt {case.split}) vs the full forward of the prefix")
            if problem:
                return problem
            ref_tok = want.argmax(-1)
            if not torch.equal(ref_tok, tokens[:, i]):
                top2 = torch.topk(want, 2, dim=-1).values
                gap = float((top2[:, 0] - top2[:, 1]).min())
                if gap <= 2 * tol.value:
                    return None  # a tie within rounding: the sequences may part here
                return (f"generated token {i + 1}: {tokens[:, i].tolist()} with the cache, "
                        f"{ref_tok.tolist()} by greedy decoding without it (top-2 gap "
                        f"{gap:.3g} > 2·tol {2 * tol.value:.3g})")
            seq = torch.cat([seq, tokens[:, i:i + 1]], dim=1)
    return None


def scores_tolerance(tol: Tolerance, scores: torch.Tensor, dtype: str, case: Case,
                     target: ModelTarget, scale: float) -> Tolerance:
    """``tol``, plus two roundings to the scores' dtype of the largest reference logit when
    ``generate`` returns scores in a narrower floating dtype than the model's (transformers'
    ``generate`` returns float32 logits of a float64 model, by design): each score is then the
    model's logit rounded once, and the reference's rounding may fall the other way."""
    sd = scores.dtype
    if not sd.is_floating_point or torch.finfo(sd).eps <= torch.finfo(
            getattr(torch, dtype)).eps:
        return tol
    u = torch.finfo(sd).eps / 2
    ref_max = float(reference(target, case.seed, scale, dtype, case.tensor()).abs().max())
    extra = 2 * u * max(ref_max, 1.0)
    return Tolerance(tol.value + extra, f"{tol.how}; + 2u·max(1, max|f|) = {extra:.3g}: "
                     f"generate returned {str(sd).removeprefix('torch.')} scores of a {dtype} "
                     "model (each score one rounding of its logit)")


def _cu(lengths: tuple[int, ...]) -> torch.Tensor:
    return torch.tensor([0, *itertools.accumulate(lengths)], dtype=torch.int64)


def packed(target: ModelTarget, dtype: str, scale: float, case: Case, defect: bool
           ) -> str | None:
    """``packed(x, cu_seqlens)`` equals the separate runs of each sequence (positions, states
    and convolution windows reset at each boundary). Defect: the packed row run as one
    sequence (``forward`` without ``cu_seqlens``: state carried across)."""
    m = model(target, case.seed, scale, dtype)
    row = case.tensor()[:1]
    tol = tolerance(target, dtype, case.seed, scale, row)
    cu = _cu(case.lengths)
    with torch.no_grad():
        got = target.forward(m, row) if defect else target.packed(m, row, cu)
        want = torch.cat([reference(target, case.seed, scale, dtype, row[:, a:b])
                          for a, b in zip(cu[:-1].tolist(), cu[1:].tolist(), strict=True)], 1)
    return differ(got, want, tol, f"packed sequences of lengths {list(case.lengths)} vs "
                  "separate runs")


def _padded(target: ModelTarget, dtype: str, scale: float, case: Case, defect: bool,
            left: bool) -> str | None:
    m = model(target, case.seed, scale, dtype)
    ids = case.tensor()
    b, t = ids.shape
    mask = torch.ones(b, t, dtype=torch.int64)
    for r, p in enumerate(case.pads):
        p = min(p, t - 1)
        if left:
            mask[r, :p] = 0
        else:
            mask[r, t - p:] = 0
    side = "left" if left else "right"
    with torch.no_grad():
        if defect and left:  # the mask dropped: the pad tokens enter the state
            got = target.forward(m, ids)
        elif defect:  # a right-padded mask read as left padding (the valid tokens at the end)
            flipped = mask.flip(1)
            out = target.padded(m, ids, flipped)
            got = torch.zeros_like(out)
            for r in range(b):
                got[r, mask[r].bool()] = out[r, flipped[r].bool()]
        else:
            got = target.padded(m, ids, mask)
        problems = []
        for r in range(b):
            valid = mask[r].bool()
            alone = ids[r:r + 1, valid]
            want = reference(target, case.seed, scale, dtype, alone)[0]
            tol = tolerance(target, dtype, case.seed, scale, alone)
            problems.append(differ(got[r, valid], want, tol, f"row {r} {side}-padded by "
                                   f"{int((~valid).sum())} of {t} vs the row unpadded"))
    return next((p for p in problems if p), None)


def left_padding(target, dtype, scale, case, defect):
    """Left-padded rows (``attention_mask`` 0 on a prefix) give the unpadded logits at the
    valid positions. Defect: the mask dropped (pad tokens run as tokens)."""
    return _padded(target, dtype, scale, case, defect, left=True)


def right_padding(target, dtype, scale, case, defect):
    """Right-padded rows give the unpadded logits at the valid positions. Defect: the
    right-padded mask read as left padding (with a causal model, dropping a right-padding mask
    changes no valid position, so that defect could never fail this check)."""
    return _padded(target, dtype, scale, case, defect, left=False)


def _loss_weights(shape: tuple[int, ...], dtype: torch.dtype) -> torch.Tensor:
    g = torch.Generator().manual_seed(7)
    return torch.randn(shape, generator=g, dtype=torch.float64).to(dtype)


def _grads(target: ModelTarget, m: Any, ids: torch.Tensor, split: int | None,
           detach_prefill: bool = False) -> list[torch.Tensor]:
    """∇ of ``Σ w ⊙ logits`` over every position, by the full forward (``split`` None) or by
    prefill + steps."""
    params = target.params_of(m)
    with torch.enable_grad():
        if split is None:
            logits = target.forward(m, ids)
        else:
            if detach_prefill:
                with torch.no_grad():
                    first, cache = target.prefill(m, ids[:, :split])
            else:
                first, cache = target.prefill(m, ids[:, :split])
            rest = []
            for t in range(split, ids.shape[1]):
                out, cache = target.step(m, cache, ids[:, t])
                rest.append(out)
            logits = torch.cat([first, torch.stack(rest, 1)], 1)
        loss = (logits * _loss_weights(tuple(logits.shape), logits.dtype)).sum()
        grads = torch.autograd.grad(loss, params, allow_unused=True)
    return [torch.zeros_like(p) if g is None else g for p, g in zip(params, grads, strict=True)]


def _flat(gs: list[torch.Tensor]) -> np.ndarray:
    return np.concatenate([_np(g).reshape(-1) for g in gs])


def _full_grads(target: ModelTarget, seed: int, scale: float, dtype: str,
                ids: torch.Tensor) -> np.ndarray:
    """The full forward's parameter gradients of ``ids`` (flat), once per built model and input
    (as :func:`reference`: with and without the planted defect the gradient check compares
    with the same gradients)."""
    return _memo(target, seed, scale, dtype, "grads", ids,
                 lambda m: _flat(_grads(target, m, ids, None)))


def _grad_tol(target: ModelTarget, dtype: str, seed: int, scale: float,
              ids: torch.Tensor) -> tuple[Tolerance, np.ndarray]:
    """The gradient tolerance and the full forward's gradients in ``dtype``."""
    g32 = _full_grads(target, seed, scale, "float32", ids)
    if target.has("float64"):
        g64 = _full_grads(target, seed, scale, "float64", ids)
        tol = _scale_tol(target, dtype, float(np.max(np.abs(g32 - g64))),
                         float(np.max(np.abs(g64))), ids.shape[1])
        return tol, (g64 if dtype == "float64" else g32)
    return _scale_tol(target, dtype, None, float(np.max(np.abs(g32))), ids.shape[1]), g32


def _backward_error(err: RuntimeError, what: str) -> str:
    return f"{what} raised {type(err).__name__}: {str(err).splitlines()[0][:300]}"


def gradients(target: ModelTarget, dtype: str, scale: float, case: Case, defect: bool
              ) -> str | None:
    """The gradients w.r.t. the parameters of ``Σ w ⊙ logits`` (fixed random ``w``) through
    prefill + cached decoding equal those through the full forward. Defect: the prefill run
    without gradient (the cache enters decoding as a constant)."""
    m = model(target, case.seed, scale, dtype)
    ids = case.tensor()
    tol, want = _grad_tol(target, dtype, case.seed, scale, ids)
    try:
        got = _flat(_grads(target, m, ids, case.split, detach_prefill=defect))
    except RuntimeError as err:
        return _backward_error(err, f"backward through prefill ({case.split}) + decoding")
    problem = differ(got, want, tol, f"parameter gradients through a prefill of {case.split} "
                     f"of {case.length} tokens and cached decoding vs the full forward's")
    if problem is not None and got.shape == want.shape and np.isfinite(got - want).all():
        problem += f"; the largest difference is {parameter_at(target, m, got, want)}"
    return problem


def parameter_at(target: ModelTarget, m: Any, got: np.ndarray, want: np.ndarray) -> str:
    """Where the largest ``|got − want|`` of flat parameter gradients sits: the parameter's
    name (from ``named_parameters()`` where the model has it), its shape and the index in it."""
    i = int(np.argmax(np.abs(got - want)))
    names = {}
    if hasattr(m, "named_parameters"):
        names = {id(p): n for n, p in m.named_parameters()}
    start = 0
    for j, p in enumerate(target.params_of(m)):
        size = int(p.numel())
        if i < start + size:
            at = tuple(int(v) for v in np.unravel_index(i - start, tuple(p.shape)))
            return (f"in {names.get(id(p), f'parameter {j}')} (shape {tuple(p.shape)}) at {at} "
                    f"(flat index {i})")
        start += size
    return f"at flat index {i}"


def second_backward(target: ModelTarget, dtype: str, scale: float, case: Case, defect: bool
                    ) -> str | None:
    """Two backward passes through one graph of prefill + cached decoding both run and give
    the same gradients bitwise (no saved tensor of the cache was updated in place). Defect: the
    graph freed by the first backward (``retain_graph=False``)."""
    m = model(target, case.seed, scale, dtype)
    ids = case.tensor()
    params = target.params_of(m)
    try:
        with torch.enable_grad():
            first, cache = target.prefill(m, ids[:, :case.split])
            rest = []
            for t in range(case.split, case.length):
                out, cache = target.step(m, cache, ids[:, t])
                rest.append(out)
            logits = torch.cat([first, torch.stack(rest, 1)], 1)
            loss = (logits * _loss_weights(tuple(logits.shape), logits.dtype)).sum()
            g1 = torch.autograd.grad(loss, params, retain_graph=not defect, allow_unused=True)
            g2 = torch.autograd.grad(loss, params, allow_unused=True)
    except RuntimeError as err:
        return _backward_error(err, f"backward through prefill ({case.split}) + "
                               f"{case.length - case.split} cached steps")
    for i, (a, b) in enumerate(zip(g1, g2, strict=True)):
        if (a is None) != (b is None) or (a is not None and not torch.equal(a, b)):
            return f"parameter {i}: the second backward's gradient differs from the first's"
    return None


def batch_independent(target: ModelTarget, dtype: str, scale: float, case: Case,
                      defect: bool) -> str | None:
    """Each row of a batch gets the logits it gets alone. Defect: each row after the first run
    as the continuation of the row before it (state carried across batch elements)."""
    m = model(target, case.seed, scale, dtype)
    ids = case.tensor()
    with torch.no_grad():
        got = target.forward(m, ids)
        for r in range(ids.shape[0]):
            alone = ids[r:r + 1]
            tol = tolerance(target, dtype, case.seed, scale, alone)
            want = reference(target, case.seed, scale, dtype, alone)[0]
            row = got[r]
            if defect and r > 0:
                row = target.forward(m, torch.cat([ids[r - 1:r], alone], 1))[0, case.length:]
            problem = differ(row, want, tol, f"row {r} of a batch of {ids.shape[0]} vs alone")
            if problem:
                return problem
    return None


def same_seed(target: ModelTarget, dtype: str, scale: float, case: Case, defect: bool
              ) -> str | None:
    """Two models built from the same seed give bitwise the same logits on the same input, and
    a model called twice gives the same logits twice. Defect: the second model built from the
    next seed."""
    ids = case.tensor()
    with torch.no_grad():
        a = target.forward(target.build(case.seed, init_scale=scale, dtype=dtype), ids)
        b = target.forward(target.build(case.seed + int(defect), init_scale=scale,
                                        dtype=dtype), ids)
        m = model(target, case.seed, scale, dtype)
        c, d = target.forward(m, ids), target.forward(m, ids)
    if not torch.equal(a, b):
        diff = float((a.double() - b.double()).abs().max())
        return f"two models built from seed {case.seed}: logits differ (max {diff:.3g})"
    if not torch.equal(c, d):
        return "one model called twice on the same input: logits differ"
    return None


def _finite(t: torch.Tensor) -> bool:
    return bool(torch.isfinite(t).all())


def finite(target: ModelTarget, dtype: str, scale: float, case: Case, defect: bool
           ) -> str | None:
    """Logits and their log-softmax are finite at every init scale of the sweep
    (:func:`finite_sweep`: ``scale · FINITE_SWEEP``, in float32 capped at 512 times the
    ladder's first scale). Defect: the log-softmax taken naively,
    ``log(exp(l) / Σ exp(l))`` (overflows where the logits exceed ~88 in float32, ~709 in
    float64, underflows to −∞ where their spread does): proves the sweep reaches scales where a
    numerically careless step breaks."""
    ids = case.tensor()
    for s in finite_sweep(target, scale, dtype):
        k = s / scale
        try:  # (the check with its defect takes the log-softmax of the same logits)
            logits = reference(target, case.seed, s, dtype, ids)
        except (ValueError, FloatingPointError) as err:
            # a layer's own input check refusing a NaN/Inf made upstream (the project's forms
            # validate their inputs) is the same finding as non-finite logits
            if "nan" not in str(err).lower() and "inf" not in str(err).lower():
                raise
            return (f"init scale {s:g} ({k:g} × {scale:g}, the sweep's step): the forward met a "
                    f"non-finite intermediate ({err})")
        if not _finite(logits):
            bad = int((~torch.isfinite(logits)).sum())
            return (f"init scale {s:g} ({k:g} × {scale:g}, the sweep's step): {bad} of "
                    f"{logits.numel()} logits are not finite")
        lsm = (torch.log(torch.exp(logits) / torch.exp(logits).sum(-1, keepdim=True))
               if defect else torch.log_softmax(logits, -1))
        if not _finite(lsm):
            return (f"init scale {s:g} ({k:g} × {scale:g}, the sweep's step): the log-softmax "
                    f"of the logits is not finite (max |logit| {float(logits.abs().max()):.3g})")
    return None


# ------------------------------------------------------------------- serving-time state
@dataclass(frozen=True)
class ServingCase:
    """A serving input (docs/math.md §15.1): ``ids (B, T)``; ``alt (B, T)``, the tokens of a
    second continuation (only ``alt[:, save:]`` is read; ``alt[:, save] ≠ ids[:, save]`` and
    ``alt[:, save + accept] ≠ ids[:, save + accept]``); ``cuts``, the ends of the chunks of a
    chunked prefill, ``0 < c_1 < … < c_m ≤ T − 1`` (decoding continues from ``c_m``); ``save``,
    the position ``1 ≤ b ≤ T − 2`` a state is saved at; ``draft``, ``k ≥ 1`` draft tokens after
    ``b`` (``b + k ≤ T − 1``) of which ``accept``, ``0 ≤ j ≤ k``, are accepted; ``pads``, the
    left padding of each row of a padded prefill of ``T − 2`` tokens."""

    ids: tuple[tuple[int, ...], ...]
    alt: tuple[tuple[int, ...], ...]
    cuts: tuple[int, ...]
    save: int
    draft: int
    accept: int
    pads: tuple[int, ...]
    seed: int = 0

    def tensor(self) -> torch.Tensor:
        return torch.tensor(self.ids, dtype=torch.int64)

    @property
    def length(self) -> int:
        return len(self.ids[0])

    def spliced(self, at: int) -> torch.Tensor:
        """``ids[:, :at]`` followed by ``alt[:, at:]``."""
        ids, alt = self.tensor(), torch.tensor(self.alt, dtype=torch.int64)
        return torch.cat([ids[:, :at], alt[:, at:]], dim=1)


def _differ_at(v: int, vocab: int, avoid: int) -> int:
    return v if v != avoid else (v + 1) % vocab


def _serving_case(ids: list[list[int]], alt: list[list[int]], vocab: int, cuts, save: int,
                  draft: int, accept: int, pads, seed: int = 0) -> ServingCase:
    for row, arow in zip(ids, alt, strict=True):
        for at in {save, save + accept}:
            arow[at] = _differ_at(arow[at], vocab, row[at])
    return ServingCase(tuple(map(tuple, ids)), tuple(map(tuple, alt)), tuple(cuts), save,
                       draft, accept, tuple(pads), seed)


def serving_control_case(target: ModelTarget) -> ServingCase:
    """The fixed case of the serving power controls: batch 2, ``T = max_len``, chunks ending
    at every declared cut point (:meth:`ModelTarget.cut_points`; with fewer than two, a third
    and two thirds of T as well), the state saved just past the first chunk size (``c + 1``;
    else at ``T // 2``), three drafts with one accepted (a rejected draft to keep), pads of a
    third, and of all but ``window − 2`` tokens (a row shorter than the declared convolution
    window; without one, a quarter)."""
    t = target.max_len
    g = seeded_rng(20261205)
    ids = [[int(v) for v in g.integers(0, target.vocab_size, t)] for _ in range(2)]
    alt = [[int(v) for v in g.integers(0, target.vocab_size, t)] for _ in range(2)]
    cuts = target.cut_points()
    if len(cuts) < 2:  # two chunks at least, or no state crosses a chunk boundary
        cuts = tuple(sorted({*cuts, max(1, t // 3), 2 * t // 3}))
    c = target.chunk_sizes[0] + 1 if target.chunk_sizes else t // 2
    save = c if 1 <= c <= t - 2 else t // 2
    draft = min(3, t - 1 - save)
    accept = 1 if draft > 1 else 0
    return _serving_case(ids, alt, target.vocab_size, cuts, save, draft, accept,
                         (t // 3, _short_row_pads(target, t) or max(1, t // 4)))


def _short_row_pads(target: ModelTarget, t: int, valid: int | None = None) -> int | None:
    """Left pads of a padded prefill of ``T − 2`` tokens (:func:`padded_decode`) leaving a row
    ``valid`` tokens (default: ``window − 2``, at least 1): shorter than the convolution's
    window, where a conv cache taken from the padded row (pads in it) differs from the
    unpadded row's; None without a declared ``conv_window`` or when it does not fit."""
    if target.conv_window is None:
        return None
    v = max(1, target.conv_window - 2) if valid is None else valid
    pads = t - 2 - v
    return pads if 1 <= pads <= t - 3 else None


def serving_cases(target: ModelTarget, min_len: int = 4):
    """Hypothesis strategy of :class:`ServingCase` for ``target``: lengths up to ``max_len``
    (half the time ``max_len`` itself), and every chunk end and save point half the time one of
    the target's declared cut points (:meth:`ModelTarget.cut_points`) that fits, else any; the
    pads of a row half the time leaving it 1, ``window − 2`` or ``window − 1`` valid tokens."""
    from hypothesis import strategies as st

    vocab, top = target.vocab_size, target.max_len
    special = target.cut_points()

    def point(draw, lo: int, hi: int) -> int:
        fits = [p for p in special if lo <= p <= hi]
        options = [st.integers(lo, hi)] + ([st.sampled_from(fits)] if fits else [])
        return draw(st.one_of(*options))

    @st.composite
    def cases(draw) -> ServingCase:
        t = draw(st.one_of(st.just(top), st.integers(min(min_len, top), top)))
        b = draw(st.integers(1, 2))
        row = st.lists(st.integers(0, vocab - 1), min_size=t, max_size=t)
        ids = [draw(row) for _ in range(b)]
        alt = [draw(row) for _ in range(b)]
        cuts = sorted({point(draw, 1, t - 1) for _ in range(draw(st.integers(1, 4)))})
        save = point(draw, 1, t - 2)
        draft = draw(st.integers(1, min(4, t - 1 - save)))
        accept = draw(st.integers(0, draft))
        short = [p for v in {1, (target.conv_window or 2) - 2, (target.conv_window or 2) - 1}
                 if v >= 1 and (p := _short_row_pads(target, t, v)) is not None]
        pad = st.one_of(st.integers(1, t - 3), *([st.sampled_from(short)] if short else []))
        pads = [draw(pad) for _ in range(b)]
        return _serving_case(ids, alt, vocab, cuts, save, draft, accept, pads)

    return cases()


def _seq_tol(target: ModelTarget, dtype: str, case: ServingCase, scale: float,
             ids: torch.Tensor) -> Tolerance:
    return tolerance(target, dtype, case.seed, scale, ids)


def _extend_from(target: ModelTarget, m: Any, cache: Any, ids: torch.Tensor, ends) -> tuple:
    """``extend`` over the chunks of ``ids`` ending at ``ends`` (the last end: ids' length),
    from ``cache``: the logits of every chunk along time and the cache."""
    outs, start = [], 0
    for end in ends:
        out, cache = target.extend(m, cache, ids[:, start:end])
        outs.append(out)
        start = end
    return torch.cat(outs, dim=1), cache


def chunked_prefill(target: ModelTarget, dtype: str, scale: float, case: ServingCase,
                    defect: bool) -> str | None:
    """Chunked prefill = one prefill: ``extend`` over the chunks ending at ``cuts`` gives the
    full forward's rows, and one-token steps from its cache give the rest. Defect: each chunk
    run from the empty state (the cache dropped between chunks)."""
    m = model(target, case.seed, scale, dtype)
    ids = case.tensor()
    tol = _seq_tol(target, dtype, case, scale, ids)
    full = reference(target, case.seed, scale, dtype, ids)
    with torch.no_grad():
        outs, cache, start = [], None, 0
        for end in case.cuts:
            out, cache = target.extend(m, None if defect else cache, ids[:, start:end])
            outs.append(out)
            start = end
        what = f"chunked prefill (chunks ending at {list(case.cuts)}) of {case.length} tokens"
        problem = differ(torch.cat(outs, 1), full[:, :start], tol, f"{what} vs the full forward")
        if problem:
            return problem
        steps = []
        for t in range(start, case.length):
            out, cache = target.step(m, cache, ids[:, t])
            steps.append(out)
    return differ(torch.stack(steps, 1), full[:, start:], tol,
                  f"one-token steps after a {what} vs the full forward")


def restore(target: ModelTarget, dtype: str, scale: float, case: ServingCase, defect: bool
            ) -> str | None:
    """Restoring a state saved at ``b`` and continuing = never having stopped: a chunked
    prefill to ``b`` (the chunks of ``cuts`` below ``b``), ``saved = copy_cache(cache)``; the
    live cache goes on one token at a time, by ``step`` and ``extend`` alternately (the full
    forward's rows: a copy sharing a tensor either call writes in place is seen), then the saved
    state is continued with one ``extend`` of the rest (the same rows). Defect: the state saved
    one token early (at ``b − 1``), continued from ``b``."""
    m = model(target, case.seed, scale, dtype)
    ids, b = case.tensor(), case.save
    tol = _seq_tol(target, dtype, case, scale, ids)
    ends = [c for c in case.cuts if c < b] + [b]
    full = reference(target, case.seed, scale, dtype, ids)
    with torch.no_grad():
        _, cache = _extend_from(target, m, None, ids[:, :b], ends)
        if defect:
            saved = (None if b == 1 else
                     target.copy_cache(target.extend(m, None, ids[:, :b - 1])[1]))
        else:
            saved = target.copy_cache(cache)
        live = []
        for t in range(b, case.length):  # a step then an extend, alternately: either may
            # write the live cache in place, which must not reach the saved copy
            if target.step is not None and (t - b) % 2 == 0:
                out, cache = target.step(m, cache, ids[:, t])
                out = out[:, None]
            else:
                out, cache = target.extend(m, cache, ids[:, t:t + 1])
            live.append(out)
        problem = differ(torch.cat(live, 1), full[:, b:], tol, f"one-token steps and extends "
                         f"after a chunked prefill to {b} (chunks ending at {ends}) vs the full "
                         "forward")
        if problem:
            return problem
        if saved is not None:  # a one-token extend of a restored copy, which may write it
            # in place (a copy sharing a tensor with the saved state must not see it)
            first, _ = target.extend(m, target.copy_cache(saved), ids[:, b:b + 1])
            problem = differ(first, full[:, b:b + 1], tol, f"a one-token extend of a state "
                             f"saved at {b} and restored vs the full forward")
            if problem:
                return problem
        restored, _ = target.extend(m, None if saved is None else target.copy_cache(saved),
                                    ids[:, b:])
    return differ(restored, full[:, b:], tol, f"a state saved at {b} of {case.length} (after "
                  "the live cache went on, and a restored copy went one token on), restored "
                  "and continued, vs the full forward")


def continuations(target: ModelTarget, dtype: str, scale: float, case: ServingCase,
                  defect: bool) -> str | None:
    """Continuing more than once from one saved state: prefill ``x[:b]`` by ``extend``,
    ``saved = copy_cache(cache)``; the cache goes on with ``x[b:]``, a copy of ``saved`` with a
    different continuation ``y[b:]``, and ``saved`` itself by one-token steps with ``y[b:]``:
    each equals the full forward of its own sequence (no continuation changed the saved
    state). Defect: the second continuation starts from the cache the first one left (a
    consumed state)."""
    m = model(target, case.seed, scale, dtype)
    ids, b = case.tensor(), case.save
    other = case.spliced(b)
    with torch.no_grad():
        full = reference(target, case.seed, scale, dtype, ids)
        full_other = reference(target, case.seed, scale, dtype, other)
        _, cache = target.extend(m, None, ids[:, :b])
        saved = target.copy_cache(cache)
        first, after = target.extend(m, cache, ids[:, b:])
        tol = _seq_tol(target, dtype, case, scale, ids)
        problem = differ(first, full[:, b:], tol, f"the first continuation from a state at {b} "
                         "vs the full forward")
        if problem:
            return problem
        tol_other = _seq_tol(target, dtype, case, scale, other)
        second, _ = target.extend(m, after if defect else target.copy_cache(saved),
                                  other[:, b:])
        problem = differ(second, full_other[:, b:], tol_other, f"a second, different "
                         f"continuation from the state saved at {b} vs its own full forward")
        if problem:
            return problem
        steps, cache = [], saved
        for t in range(b, case.length):
            out, cache = target.step(m, cache, other[:, t])
            steps.append(out)
    return differ(torch.stack(steps, 1), full_other[:, b:], tol_other, f"a third continuation "
                  f"(one-token steps) from the state saved at {b} vs its own full forward")


def speculative(target: ModelTarget, dtype: str, scale: float, case: ServingCase,
                defect: bool) -> str | None:
    """Accept ``j`` of ``k`` drafts, roll back, continue = the ``j``-token state: from the
    state after ``x[:b]``, ``extend`` by the drafts ``x[b:b+k]`` (their logits are the full
    forward's rows: the verification pass); roll back the ``k − j`` rejected (``rollback``
    where offered, else a copy saved before drafting extended by the ``j`` accepted); then a
    step and an ``extend`` with tokens ``y`` (``y_(b+j) ≠ x_(b+j)``) equal the full forward of
    ``x[:b+j] y``; for the drawn ``j`` and for ``j = 0`` and ``j = k``; with ``rollback``,
    again with the drafts made by ``k`` one-token steps and the last one rejected (the
    protocol's rollback undoes at most the call that made the cache).
    Defect (``j < k``): one rejected draft kept (``k − j − 1`` rolled back, or ``j + 1``
    re-extended)."""
    m = model(target, case.seed, scale, dtype)
    ids = case.tensor()
    with torch.no_grad():
        full = reference(target, case.seed, scale, dtype, ids)
    # the drafts by one ``extend`` (a verification pass); with ``rollback``, also by k one-token
    # ``step`` calls with the last one rejected: ``rollback`` undoes a step-made cache too
    # (the protocol: n ≤ the length of the call that made the cache, 1 for a step)
    # j = 0 and j = k by one extend in every case, beside the drawn j: the ends of the range,
    # where an index into the draft history is off (``hist[:-0]`` is empty), are not left to
    # the draw
    runs = [(j, False) for j in dict.fromkeys((case.accept, 0, case.draft))]
    if target.rollback is not None and case.draft >= 1:
        runs.append((case.draft - 1, True))
    for j, by_steps in runs:
        problem = _speculate(target, m, case, dtype, scale, ids, full, j, defect, by_steps)
        if problem:
            return problem
    return None


def _speculate(target: ModelTarget, m: Any, case: ServingCase, dtype: str, scale: float,
               ids: Any, full: Any, j: int, defect: bool, by_steps: bool) -> str | None:
    """One run of :func:`speculative`: ``j`` of the ``k`` drafts accepted, the drafts made by
    one ``extend`` or by ``k`` steps."""
    b, k = case.save, case.draft
    keep = j + 1 if defect and j < k else j
    seq = case.spliced(b + j)
    with torch.no_grad():
        full_seq = reference(target, case.seed, scale, dtype, seq)
        _, cache = target.extend(m, None, ids[:, :b])
        saved = None if target.rollback is not None else target.copy_cache(cache)
        if by_steps:
            drafted = []
            for t in range(b, b + k):
                out, cache = target.step(m, cache, ids[:, t])
                drafted.append(out[:, None])
            drafted = torch.cat(drafted, 1)
        else:
            drafted, cache = target.extend(m, cache, ids[:, b:b + k])
        made = f"{k} one-token steps" if by_steps else "one extend"
        problem = differ(drafted, full[:, b:b + k], _seq_tol(target, dtype, case, scale, ids),
                         f"the logits of {k} drafts ({made}) after {b} tokens vs the full "
                         "forward")
        if problem:
            return problem
        if target.rollback is not None:
            cache = target.rollback(m, cache, k - keep)
        elif keep:
            cache = target.extend(m, target.copy_cache(saved), ids[:, b:b + keep])[1]
        else:
            cache = target.copy_cache(saved)
        out, cache = target.step(m, cache, seq[:, b + j])
        outs = [out[:, None]]
        if b + j + 1 < case.length:
            outs.append(target.extend(m, cache, seq[:, b + j + 1:])[0])
    how = "rollback" if target.rollback is not None else "a copy saved before drafting"
    return differ(torch.cat(outs, 1), full_seq[:, b + j:],
                  _seq_tol(target, dtype, case, scale, seq),
                  f"{j} of {k} drafts ({made}) after {b} tokens accepted ({how}), then "
                  f"continued, vs the full forward of the {b + j} accepted tokens and the "
                  "continuation")


def padded_decode(target: ModelTarget, dtype: str, scale: float, case: ServingCase,
                  defect: bool) -> str | None:
    """A left-padded batch prefilled with its mask (``padded_prefill`` of ``T − 2`` tokens,
    ``pads`` per row) then decoded by one-token steps gives, in each row, the full forward of
    the row's valid tokens and its continuation. Defect: the state taken from the prefill
    without the mask (the pad tokens enter it; the masked prefill's logits kept)."""
    m = model(target, case.seed, scale, dtype)
    ids = case.tensor()
    n, length = ids.shape[0], case.length - 2
    mask = torch.ones(n, length, dtype=torch.int64)
    for r, p in enumerate(case.pads):
        mask[r, :min(p, length - 1)] = 0
    with torch.no_grad():
        logits, cache = target.padded_prefill(m, ids[:, :length], mask)
        if defect:
            cache = target.padded_prefill(m, ids[:, :length], torch.ones_like(mask))[1]
        steps = []
        for t in range(length, case.length):
            out, cache = target.step(m, cache, ids[:, t])
            steps.append(out)
        steps = torch.stack(steps, 1)
        for r in range(n):
            valid = mask[r].bool()
            alone = torch.cat([ids[r:r + 1, :length][:, valid], ids[r:r + 1, length:]], 1)
            want = reference(target, case.seed, scale, dtype, alone)[0]
            tol = _seq_tol(target, dtype, case, scale, alone)
            pad = int((~valid).sum())
            problem = (differ(logits[r, valid], want[:length - pad], tol, f"row {r} of a "
                              f"prefill left-padded by {pad} of {length} vs the row unpadded")
                       or differ(steps[r], want[length - pad:], tol, f"row {r}: steps after "
                                 f"a prefill left-padded by {pad} of {length} vs the row "
                                 "unpadded"))
            if problem:
                return problem
    return None


# ---------------------------------------------------------------------- power control
@dataclass(frozen=True)
class Power:
    """The outcome of :func:`power_ladder`: the credited scale (None: the planted defect passed
    at every scale) and what the control did."""

    scale: float | None
    largest: float
    note: str
    problem: str | None  # the correct model's failure on the control case, if any


_POWER: dict[tuple, tuple[ModelTarget, Power]] = {}


#: The checks that take a :class:`ServingCase` (their control case:
#: :func:`serving_control_case`).
SERVING_CHECKS = (chunked_prefill, restore, continuations, speculative, padded_decode)


def power_ladder(target: ModelTarget, check: Check, dtype: str, defect_name: str) -> Power:
    """Climb the target's ``init_scales``: at each, the check on the control case with the
    defect (must fail) and without (must pass); stop at the first scale where the defect fails
    (module docstring). Computed once per (target, check, dtype) in a process."""
    key = (id(target), check, dtype)
    if key not in _POWER:
        _POWER[key] = (target, _climb(target, check, dtype, defect_name))
    return _POWER[key][1]


def _climb(target: ModelTarget, check: Check, dtype: str, defect_name: str) -> Power:
    case = (serving_control_case if check in SERVING_CHECKS else control_case)(target)
    tried = []
    for scale in target.init_scales:
        problem = check(target, dtype, scale, case, False)
        if problem:
            return Power(None, scale, "", f"your model fails this check as it is: on the fixed "
                         f"input the power control uses ({dtype}, init scale {scale:g}), before "
                         f"any defect is planted — a finding about the model, not about the "
                         f"control ({problem})")
        control = check(target, dtype, scale, case, True)
        if control:
            return Power(scale, scale, f"power control at init scale {scale:g} ({dtype}): the "
                         f"planted defect ({defect_name}) fails this check: {control}", None)
        tried.append(f"{scale:g}")
    return Power(None, target.init_scales[-1],
                 f"not credited: cannot fail at this init: the planted defect ({defect_name}) "
                 f"passes this check at every init scale tried ({', '.join(tried)}; {dtype}), "
                 "so a defect of its class would go unseen", None)

