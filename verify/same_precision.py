"""The same-precision reference criterion (issue #44): a low-precision output is judged against
what a plain evaluation of the same formula in the same precision achieves, beside the derived
worst-case bound (which stays the guarantee).

For a target output ``y`` computed in a float32 or half-precision path, the float64 value
``y₆₄`` of the formula on the inputs as the target saw them, and ``r`` the same formula
evaluated plainly in the same precision on the same (rounded) inputs — in the dtype the
arithmetic runs in, *before* the cast to the output dtype — with ``Y = max |y₆₄|`` over the
compared tensor:

    max |y − y₆₄|  ≤  c · max(max |r − y₆₄|, u_c·Y + η_c)  +  (u_o·Y + η_o)

``u_c`` the unit roundoff of the dtype the arithmetic runs in (float32 for a half type computed
in float32, claim ``half_in_float32``; the half type itself otherwise), ``u_o`` that of the
output dtype, ``η`` their smallest subnormals (the absolute part of a rounding,
``fl(x) = x(1 + δ) + η``: an output below a half type's range rounds to 0 or to its smallest
subnormal, which ``u_o·Y`` alone would call a defect): ``u_o·Y + η_o`` is one rounding of the
output (the cast back of a half type, which the factor ``c`` does not multiply). The
reference's error is counted as at least one rounding of the compute dtype: a computed output
is rounded at least once, so a reference that happens to be exact (one token, ``o = v``) does
not make the target's own few roundings a defect. Where the formula has several standard plain
evaluations of different accuracy (a gated recurrence: decays multiplied token by token, or the
chunked UT-transform algorithm with its triangular solve), ``max |r − y₆₄|`` is the largest of
their errors: a correct target may use any. The derived bound and this criterion are both
required: a failure of either fails the property.

**Decays from running sums of log-gates** (the parallel and chunked forms' representation of
the gates, global or chunk-local): ``G_t = Σ_(r≤t) g_r`` computed in the dtype is off by
``e_t ~ u_c·|G_t|`` (a few roundings of ``|G_t|``, whatever the order of the sum), so every
decay ``e^(Ĝ_t − Ĝ_s)`` is off by the relative ``e^(e_t − e_s) − 1 ~ u_c·|G_t|``, an error
that is not a rounding of the output but of the gates, and that grows with ``|Σ g|`` (past
``−760`` in a run of strong decay: ``u_c·|G| ≈ 5·10⁻⁵`` in float32, against ``~10⁻⁷`` for the
other evaluations). It is measured by its own plain evaluation ``r_G`` (:func:`recurrence_plain`
with ``cumulative``: the running sum in the dtype, each decay ``e^(Ĝ_t − Ĝ_(t−1))``), marked
by :func:`cumulative`, and enters the allowance with its own factor ``c_G``
(:data:`CUMULATIVE_FACTOR`) instead of ``c``, with ``B = max(max |r − y₆₄|, u_c·Y + η_c)``:

    max |y − y₆₄|  ≤  min(c·B + c_G·max |r_G − y₆₄|,  c·max(B, max |r_G − y₆₄|))  +  u_o·Y + η_o

The first term covers the target's own roundings (the plain evaluations other than ``r_G``
form their decays within one rounding each: ``e^λ`` token by token, the chunked evaluation's
``e^(P_i − P_j)`` from float64 chunk-local sums rounded once), the second its gates' running
sums: a target's sums, in any order and over any span (a chunk-local ``|P| ≤ |G|`` for
log-gates ``≤ 0``), err by a few roundings of ``|G|`` like ``r_G``'s, so ``c_G`` need not
multiply them by ``c`` (a form that factors a decay into two or three exponentials of running
sums errs by a few times ``r_G``: ``c_G`` covers that, with a margin). The second side of the
minimum is ``r_G`` counted among the ``r``: where the running sums cost nothing (weak decay,
``r_G ≈ r``) the criterion is no looser than that. Counted ``c`` times,
this error allowed up to ``4·10⁻³·Y`` in float32 (measured: ``r_G`` up to ``3·10⁻⁵·Y``), more
than the derived bound (``~1.6·10⁻³·Y`` there).

**Half types computed in float32** (``u_o > u_c``): a target may keep intermediates in the half
type — its state between tokens, chunks and calls is returned in its dtype — each such rounding
reaching the output through its share of the row. The output term is then
``R·(u_o·Y + η_o)`` with ``R`` = :data:`HALF_ROUNDINGS` roundings of the half type, not
multiplied by ``c`` (a plain evaluation in float32 makes none of them):

    max |y − y₆₄|  ≤  min(c·B + c_G·max |r_G − y₆₄|,  c·max(B, max |r_G − y₆₄|))  +  R·(u_o·Y + η_o)

``c`` (:data:`FACTOR`), ``c_G`` (:data:`CUMULATIVE_FACTOR`) and ``R`` are calibrated, not
derived: ``kernel-verify calibrate --part same_precision`` runs correct targets (the built-in
forms of every feature map, every gated and delta-rule transition, every form, split runs and
continued states) over many seeds and counts the comparisons above the allowance (0 at the
chosen ``c``, ``c_G`` and ``R``; ``reports/calibration.md``, with the largest ``c``, ``c_G`` and
``R`` a comparison needed). The criterion is a test of accuracy
*relative to a plain evaluation*, not a guarantee: a target whose algorithm is legitimately
less accurate than ``c`` plain evaluations would fail it, which is why ``c`` and ``R`` carry a
margin over the worst ratio measured.

Source: FlashAttention's tests (Dao et al., the ``test_flash_attn`` module of its repository)
require the kernel's
largest error against a float64-upcast reference to be at most twice the largest error of the
PyTorch implementation run in the same dtype, plus a small absolute tolerance; here the factor
is measured on correct targets and the absolute term is one rounding of the output.

**Gradients** (the low-precision gradient property, docs/math.md §13.2): the same comparison
for each of ``∂L/∂q``, ``∂L/∂k``, ``∂L/∂v`` of ``L = Σ G⊙o``, ``y₆₄`` the target's float64
gradient at the same rounded inputs, ``r`` the gradient of the same loss by torch autograd
through a plain evaluation of the formula in the compute dtype
(:func:`softmax_attention_gradients_plain` for exact attention,
:func:`feature_attention_gradients_plain` for declared features with their Jacobian), the same
``c`` and ``R`` (calibrated by the same part, rows "low-precision gradients").

The plain evaluations (:func:`causal_attention_plain`, :func:`recurrence_plain`, the gradients)
run in torch in the compute dtype, inputs rounded once to it; their result is returned uncast.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from kernel_verify.verify.tolerance import FORMATS

__all__ = [
    "CUMULATIVE_FACTOR",
    "FACTOR",
    "HALF_ROUNDINGS",
    "Comparison",
    "allowance",
    "causal_attention_plain",
    "compare",
    "cumulative",
    "feature_attention_gradients_plain",
    "recurrence_chunked_plain",
    "recurrence_plain",
    "roundings",
    "softmax_attention_gradients_plain",
]

#: ``c`` of the criterion (module docstring): calibrated by ``kernel-verify calibrate --part
#: same_precision`` (largest ratio measured on correct targets, with a margin).
FACTOR = 128.0
#: ``R`` of the criterion for a half type computed in float32 (module docstring): calibrated by
#: the same part (largest number of half-type roundings measured, with a margin).
HALF_ROUNDINGS = 5.0
#: ``c_G`` of the criterion (module docstring): the factor of the error of the plain evaluation
#: whose decays come from running sums of log-gates. Calibrated by the same part (the largest
#: ``c_G`` a correct target needed at ``c``, with a margin): at most 8.1 over three runs of 3000
#: float32 examples (the built-in KDA in an underflow run; its chunked form factors decays at
#: sub-block columns,
#: ``e^(Ĝ_t − Ĝ_r)·e^(Ĝ_r − Ĝ_s)``, two exponents from running sums where ``r_G`` has one);
#: running sums of other orders (float64 sums rounded once, ``torch.cumsum``, chunk-local sums
#: of 4, 16, 64 tokens) in the token recurrence needed at most 1.0 (60 Gated DeltaNet examples).
CUMULATIVE_FACTOR = 32.0


class _Cumulative(np.ndarray):
    """A plain evaluation whose decays come from running sums of log-gates (:func:`cumulative`);
    slices stay marked."""


def cumulative(plain: np.ndarray) -> np.ndarray:
    """``plain`` marked as the evaluation ``r_G`` whose decays come from running sums of
    log-gates: in :func:`compare` its error enters with ``c_G`` (:data:`CUMULATIVE_FACTOR`),
    not ``c`` (module docstring). Slices of it stay marked."""
    return np.asarray(plain, dtype=np.float64).view(_Cumulative)


def _unit(dtype: str, name: str) -> float:
    if dtype not in FORMATS:
        raise ValueError(f"{name} must be one of {sorted(FORMATS)}, got {dtype!r}")
    return FORMATS[dtype].u


def _rounding(dtype: str, name: str, scale: float) -> float:
    """One rounding of values up to ``scale`` in ``dtype``: ``u·scale + η`` (η its smallest
    subnormal)."""
    return _unit(dtype, name) * scale + FORMATS[dtype].tiny


def roundings(compute: str, output: str) -> float:
    """``R``: 1 rounding of the output, or :data:`HALF_ROUNDINGS` when the output dtype is
    narrower than the compute dtype (module docstring)."""
    return HALF_ROUNDINGS if _unit(output, "output") > _unit(compute, "compute") else 1.0


def allowance(err_ref: float, scale: float, *, compute: str, output: str,
              c: float = FACTOR, err_cum: float = 0.0,
              c_cum: float = CUMULATIVE_FACTOR) -> float:
    """``min(c·max(err_ref, u_c·Y + η_c) + c_G·err_cum, c·max(err_ref, err_cum, u_c·Y + η_c))
    + R·(u_o·Y + η_o)`` (module docstring), ``Y = scale``, ``c_G = c_cum``, ``err_cum`` the
    error of the evaluation with decays from running sums of log-gates (0: none)."""
    for name, value in (("err_ref", err_ref), ("err_cum", err_cum)):
        if not (np.isfinite(value) and value >= 0):
            raise ValueError(f"{name} must be a finite error ≥ 0, got {value!r}")
    if not (np.isfinite(scale) and scale >= 0):
        raise ValueError(f"scale must be finite and ≥ 0, got {scale!r}")
    if not c > 0:
        raise ValueError(f"c must be > 0, got {c!r}")
    if not c_cum >= 0:
        raise ValueError(f"c_cum must be ≥ 0, got {c_cum!r}")
    base = max(err_ref, _rounding(compute, "compute", scale))
    return (min(c * base + c_cum * err_cum, c * max(base, err_cum))
            + roundings(compute, output) * _rounding(output, "output", scale))


@dataclass(frozen=True)
class Comparison:
    """One tensor judged by the criterion: the target's largest error ``err``, the same-
    precision reference's ``err_ref``, the scale ``Y``, the allowance and ``c``; ``err_cum``
    the error of the evaluation with decays from running sums of log-gates (0: none), counted
    ``c_cum`` times."""

    err: float
    err_ref: float
    scale: float
    allowed: float
    c: float
    #: ``max(err_ref, u_c·Y + η_c)`` and ``u_o·Y + η_o``: the allowance is
    #: ``c·base + R·rounding``.
    base: float = 0.0
    rounding: float = 0.0
    half: bool = False  # the output dtype is narrower than the compute dtype (R > 1)
    err_cum: float = 0.0
    c_cum: float = CUMULATIVE_FACTOR

    @property
    def ok(self) -> bool:
        return bool(self.err <= self.allowed)

    @property
    def needed(self) -> float:
        """What this comparison needs to pass: the smallest ``c`` with one output rounding
        and ``c_G``, ``max((err − c_G·err_cum − rounding)/base, (err − rounding)/max(base,
        err_cum))``; for a half type computed in float32 the smallest ``R`` at this ``c``,
        ``(err − min(c·base + c_G·err_cum, c·max(base, err_cum)))/rounding`` (0 when covered
        without it; inf when nothing covers it)."""
        if self.half:
            over = self.err - min(self.c * self.base + self.c_cum * self.err_cum,
                                  self.c * max(self.base, self.err_cum))
            if over <= 0:
                return 0.0
            return over / self.rounding if self.rounding > 0 else float("inf")
        over = self.err - self.rounding
        if over <= 0:
            return 0.0
        if self.base <= 0:
            return float("inf")
        return max((over - self.c_cum * self.err_cum) / self.base,
                   over / max(self.base, self.err_cum), 0.0)

    @property
    def needed_cumulative(self) -> float:
        """The smallest ``c_G`` this comparison needs at its ``c`` and ``R``,
        ``(err − c·base − R·rounding)/err_cum`` (0 when covered without it; inf when nothing
        covers it, and when ``c·max(base, err_cum)``, the other side of the minimum, does not)."""
        r = HALF_ROUNDINGS if self.half else 1.0
        over = self.err - self.c * self.base - r * self.rounding
        if over <= 0:
            return 0.0
        if self.err_cum <= 0 or self.err > self.c * max(self.base, self.err_cum) + (
                r * self.rounding):
            return float("inf")
        return over / self.err_cum

    def text(self) -> str:
        """The evidence: both numbers, ``c`` and the allowance."""
        r = f"{HALF_ROUNDINGS:g}·" if self.half else ""
        cum = (f", running-sum reference's error {self.err_cum:.3e}" if self.err_cum else "")
        main = ("min(c·B + c_G·(its error), c·max(B, its error)), B = max(ref error, u_c·Y + "
                "η_c)," if self.err_cum else "c·max(ref error, u_c·Y + η_c)")
        cval = f", c_G = {self.c_cum:g}" if self.err_cum else ""
        return (f"error {self.err:.3e} against float64, same-precision reference's error "
                f"{self.err_ref:.3e}{cum}, allowed {main} + "
                f"{r}(u_o·Y + η_o) = {self.allowed:.3e} (c = {self.c:g}{cval}, Y = max|y64| = "
                f"{self.scale:.3e})")


def compare(got: np.ndarray, exact: np.ndarray, ref, *, compute: str, output: str,
            c: float = FACTOR) -> Comparison:
    """The criterion for ``got`` (the target's output), ``exact`` (float64) and ``ref`` (the
    plain same-precision evaluation in the compute dtype, or a sequence of them: the largest
    error counts; those marked by :func:`cumulative` count apart, ``c_G`` times), all of one
    shape; NaN/Inf in ``got`` is an error of infinite size (in ``exact`` or ``ref``: a
    ``ValueError``, nothing to judge against)."""
    got, exact = (np.asarray(a, dtype=np.float64) for a in (got, exact))
    given = list(ref) if isinstance(ref, (list, tuple)) else [ref]
    cums = [np.asarray(r, dtype=np.float64) for r in given if isinstance(r, _Cumulative)]
    refs = [np.asarray(r, dtype=np.float64) for r in given if not isinstance(r, _Cumulative)]
    if not refs:
        raise ValueError("ref must hold at least one plain evaluation not marked cumulative")
    if got.shape != exact.shape or any(r.shape != exact.shape for r in refs + cums):
        raise ValueError(f"got, exact and ref must have one shape, got {got.shape}, "
                         f"{exact.shape}, {[r.shape for r in refs + cums]}")
    if not (np.isfinite(exact).all() and all(np.isfinite(r).all() for r in refs + cums)):
        raise ValueError("exact and ref must be finite")
    if exact.size == 0:
        return Comparison(0.0, 0.0, 0.0, 0.0, c)
    err = float(np.abs(got - exact).max()) if np.isfinite(got).all() else float("inf")
    err_ref = max(float(np.abs(r - exact).max()) for r in refs)
    err_cum = max((float(np.abs(r - exact).max()) for r in cums), default=0.0)
    scale = float(np.abs(exact).max())
    uc, uo = _unit(compute, "compute"), _unit(output, "output")
    return Comparison(err, err_ref, scale,
                      allowance(err_ref, scale, compute=compute, output=output, c=c,
                                err_cum=err_cum), c,
                      max(err_ref, _rounding(compute, "compute", scale)),
                      _rounding(output, "output", scale), uo > uc, err_cum)


_TORCH = {"float64": "float64", "float32": "float32", "float16": "float16",
          "bfloat16": "bfloat16"}


def _torch_dtype(name: str, what: str):
    import torch

    if name not in _TORCH:
        raise ValueError(f"{what} must be one of {sorted(_TORCH)}, got {name!r}")
    return getattr(torch, _TORCH[name])


def causal_attention_plain(fq: np.ndarray, fk: np.ndarray, v: np.ndarray, *,
                           compute: str) -> np.ndarray:
    """Causal linear attention of the features in its quadratic form,
    ``o = tril(φq φkᵀ) v / (tril(φq φkᵀ) 1)``, in the ``compute`` dtype (every input rounded
    once to it); float64 NumPy ``(…, T, d_v)`` of the uncast result."""
    import torch

    cd = _torch_dtype(compute, "compute")
    fq, fk, v = (np.asarray(a, dtype=np.float64) for a in (fq, fk, v))
    if fq.shape != fk.shape or fq.shape[:-1] != v.shape[:-1]:
        raise ValueError(f"fq, fk must have one shape (…, T, m) and v (…, T, d_v), got "
                         f"{fq.shape}, {fk.shape}, {v.shape}")
    q, k, vv = (torch.from_numpy(a).to(cd) for a in (fq, fk, v))
    w = torch.tril(q @ k.transpose(-1, -2))
    out = (w @ vv) / w.sum(dim=-1, keepdim=True)
    return out.to(torch.float64).numpy()


def recurrence_plain(q: np.ndarray, v: np.ndarray, lam: np.ndarray, x: np.ndarray,
                     y: np.ndarray, w: np.ndarray, *, compute: str,
                     normalise_k: np.ndarray | None = None,
                     cumulative: bool = False) -> np.ndarray:
    """The recurrence token by token, ``S_t = Diag(e^(λ_t)) S_(t−1) + x_t (y_tᵀ S_(t−1)) +
    w_t v_tᵀ``, ``o_t = S_tᵀ q_t`` from ``S_0 = 0`` (every transition of
    ``verify/references/recurrence.py``: ``λ, x, y, w`` of its ``dplr_terms``), in the
    ``compute`` dtype (inputs rounded once to it, ``e^λ`` evaluated in it); float64 NumPy
    ``(…, T, d_v)`` of the uncast result. ``cumulative``: each decay formed as
    ``e^(G_t − G_(t−1))`` from the running sum ``G_t = Σ_(r≤t) λ_r`` computed in the dtype (the
    parallel and chunked forms' representation of the gates: absolute error ``~u·|G_t|`` per
    decay); a decay of 0 (``λ = −∞``) stays 0. ``normalise_k`` (the decay transition's
    normalised form): ``z_t = e^(λ_t) ⊙ z_(t−1) + k_t``, ``o_t = S_tᵀ q_t / (z_tᵀ q_t)``.
    Shapes ``(…, T, d)`` (``v``: ``(…, T, d_v)``)."""
    import torch

    cd = _torch_dtype(compute, "compute")
    arrays = [np.asarray(a, dtype=np.float64) for a in (q, lam, x, y, w)]
    if any(a.shape != arrays[0].shape for a in arrays) or arrays[0].shape[:-1] != v.shape[:-1]:
        raise ValueError("q, lam, x, y, w must have one shape (…, T, d) and v (…, T, d_v), got "
                         f"{[a.shape for a in arrays]}, {np.shape(v)}")
    tq, tl, tx, ty, tw = (torch.from_numpy(a).to(cd) for a in arrays)
    tv = torch.from_numpy(np.asarray(v, dtype=np.float64)).to(cd)
    if cumulative:  # G_t = fl(G_(t−1) + λ_t) one token at a time in the dtype (torch.cumsum
        # may accumulate in a wider type), each decay e^(G_t − G_(t−1))
        zero = torch.isneginf(tl)
        finite = torch.where(zero, torch.zeros_like(tl), tl)
        run = torch.zeros_like(finite[..., 0, :])
        steps = []
        for t in range(finite.shape[-2]):
            nxt = run + finite[..., t, :]
            steps.append(torch.exp(nxt - run))
            run = nxt
        decay = torch.stack(steps, dim=-2) if steps else torch.exp(tl)
        decay = torch.where(zero, torch.zeros_like(decay), decay)
    else:
        decay = torch.exp(tl)
    d, dv = tq.shape[-1], tv.shape[-1]
    s = torch.zeros((*tq.shape[:-2], d, dv), dtype=cd)
    tk = z = None
    if normalise_k is not None:
        tk = torch.from_numpy(np.asarray(normalise_k, dtype=np.float64)).to(cd)
        z = torch.zeros((*tq.shape[:-2], d), dtype=cd)
    outs = []
    for t in range(tq.shape[-2]):
        u = (ty[..., t, :, None] * s).sum(dim=-2)  # yᵀ S, (…, d_v)
        s = (decay[..., t, :, None] * s + tx[..., t, :, None] * u[..., None, :]
             + tw[..., t, :, None] * tv[..., t, None, :])
        o = (tq[..., t, :, None] * s).sum(dim=-2)
        if z is not None:
            z = decay[..., t, :] * z + tk[..., t, :]
            o = o / (tq[..., t, :] * z).sum(dim=-1, keepdim=True)
        outs.append(o)
    out = torch.stack(outs, dim=-2) if outs else torch.zeros((*tq.shape[:-1], dv), dtype=cd)
    return out.to(torch.float64).numpy()


def recurrence_chunked_plain(q: np.ndarray, v: np.ndarray, lam: np.ndarray, x: np.ndarray,
                             y: np.ndarray, w: np.ndarray, *, compute: str,
                             chunk: int) -> np.ndarray | None:
    """The same recurrence as :func:`recurrence_plain` by the generic chunked (UT-transform)
    algorithm of ``verify/references/recurrence.py`` (its module docstring), in the ``compute``
    dtype, chunks of ``chunk`` tokens: inside a chunk entered with ``S_0``, ``P_i = Σ_(r<i) λ_r``
    (chunk-local running sum, in float64: every decay ``e^(P_i − P_j)`` is formed in float64 and
    rounded once to the dtype, as the token recurrence's ``e^λ``; the error of running sums in
    the dtype is measured apart, :func:`recurrence_plain` with ``cumulative``),
    ``L_ij = y_iᵀ e^(P_i − P_(j+1)) x_j``, ``M_ij = y_iᵀ e^(P_i − P_(j+1)) w_j`` (``j < i``),
    ``(I − L) U = e^(P) ⊙ Y · S_0 + M V`` by forward substitution,
    ``o_i = S_0ᵀ(e^(P_(i+1)) ⊙ q_i) + Σ_(j≤i) (q_iᵀe^(P_(i+1) − P_(j+1)) x_j) u_j
    + (q_iᵀe^(P_(i+1) − P_(j+1)) w_j) v_j``, the state carried to the next chunk. The
    evaluation order of chunked kernels (a triangular solve, decays from chunk-local sums): its
    error can exceed the token recurrence's where the rank-one part couples many tokens. None
    when a log-gate is ``−∞`` or the dtype has no triangular solve (half types)."""
    import torch

    cd = _torch_dtype(compute, "compute")
    if compute in ("float16", "bfloat16") or not np.isfinite(np.asarray(lam)).all():
        return None
    if chunk < 1:
        raise ValueError(f"chunk must be ≥ 1, got {chunk!r}")
    tq, tx, ty, tw = (torch.from_numpy(np.asarray(a, dtype=np.float64)).to(cd)
                      for a in (q, x, y, w))
    tl = torch.from_numpy(np.asarray(lam, dtype=np.float64))  # float64: decays rounded once
    tv = torch.from_numpy(np.asarray(v, dtype=np.float64)).to(cd)
    n, d, dv = tq.shape[-2], tq.shape[-1], tv.shape[-1]
    s0 = torch.zeros((*tq.shape[:-2], d, dv), dtype=cd)
    outs = []
    for a in range(0, n, chunk):
        b = min(a + chunk, n)
        c = b - a
        sl = slice(a, b)
        qc, lc, xc, yc, wc, vc = (t[..., sl, :] for t in (tq, tl, tx, ty, tw, tv))
        run = torch.zeros_like(lc[..., 0, :])
        pre = [run]
        for i in range(c):
            run = run + lc[..., i, :]
            pre.append(run)
        p = torch.stack(pre, dim=-2)  # (…, c + 1, d): P_0 = 0 … P_c
        before, after = p[..., :-1, :], p[..., 1:, :]  # P_i, P_(i+1)
        lower = torch.tril(torch.ones(c, c, dtype=torch.bool), diagonal=-1)
        upto = torch.tril(torch.ones(c, c, dtype=torch.bool))
        # decays e^(P_i − P_(j+1)) (j < i) and e^(P_(i+1) − P_(j+1)) (j ≤ i), (…, c, c, d),
        # in float64, rounded once to the dtype
        z64 = torch.zeros((), dtype=torch.float64)
        d_in = torch.exp(torch.where(lower[..., None], before[..., :, None, :]
                                     - after[..., None, :, :], z64)).to(cd)
        d_out = torch.exp(torch.where(upto[..., None], after[..., :, None, :]
                                      - after[..., None, :, :], z64)).to(cd)
        zero = torch.zeros((), dtype=cd)
        big_l = torch.where(lower, (yc[..., :, None, :] * d_in * xc[..., None, :, :]).sum(-1),
                            zero)
        big_m = torch.where(lower, (yc[..., :, None, :] * d_in * wc[..., None, :, :]).sum(-1),
                            zero)
        rhs = (torch.exp(before).to(cd) * yc) @ s0 + big_m @ vc
        eye = torch.eye(c, dtype=cd)
        u = torch.linalg.solve_triangular(eye - big_l, rhs, upper=False, unitriangular=True)
        qx = torch.where(upto, (qc[..., :, None, :] * d_out * xc[..., None, :, :]).sum(-1), zero)
        qw = torch.where(upto, (qc[..., :, None, :] * d_out * wc[..., None, :, :]).sum(-1), zero)
        outs.append((torch.exp(after).to(cd) * qc) @ s0 + qx @ u + qw @ vc)
        last = torch.exp(p[..., -1:, :] - after).to(cd)  # e^(P_c − P_(j+1)), (…, c, d)
        s0 = (torch.exp(p[..., -1, :]).to(cd)[..., :, None] * s0
              + (last * xc).transpose(-1, -2) @ u + (last * wc).transpose(-1, -2) @ vc)
    out = torch.cat(outs, dim=-2) if outs else torch.zeros((*tq.shape[:-1], dv), dtype=cd)
    return out.to(torch.float64).numpy()


def _grads_in(compute: str, arrays, upstream: np.ndarray, fn) -> list[np.ndarray]:
    """``∂(Σ G⊙fn(*arrays))/∂arrays`` by torch autograd with every array and ``G`` rounded once
    to the ``compute`` dtype and every operation in it; float64 NumPy of the uncast results."""
    import torch

    cd = _torch_dtype(compute, "compute")
    ts = [torch.from_numpy(np.asarray(a, dtype=np.float64)).to(cd).requires_grad_(True)
          for a in arrays]
    tg = torch.from_numpy(np.asarray(upstream, dtype=np.float64)).to(cd)
    out = fn(*ts)
    if tuple(out.shape) != tuple(tg.shape):
        raise ValueError(f"g must have the outputs' shape {tuple(out.shape)}, got "
                         f"{tuple(tg.shape)}")
    grads = torch.autograd.grad((out * tg).sum(), ts, allow_unused=True)
    return [np.zeros(np.shape(a)) if gr is None else gr.to(torch.float64).numpy()
            for a, gr in zip(arrays, grads, strict=True)]


def feature_attention_gradients_plain(fq: np.ndarray, fk: np.ndarray, jq: np.ndarray,
                                      jk: np.ndarray, v: np.ndarray, g: np.ndarray, *,
                                      compute: str, causal: bool) -> list[np.ndarray]:
    """``[∂L/∂q, ∂L/∂k, ∂L/∂v]`` of ``L = Σ G⊙o``, ``o = (A v)/(A 1)``, ``A = φq φkᵀ``
    (``tril`` when ``causal``), evaluated plainly in the ``compute`` dtype: the features
    ``φq, φk (…, T, m)``, their Jacobians ``jq, jk (…, T, m, d)`` (``∂φ_f/∂x_c`` of each token),
    ``v (…, T, d_v)`` and ``G (…, T, d_v)`` rounded once to it, ``∂L/∂(φq, φk, v)`` by torch
    autograd through the quadratic form in it, then ``∂L/∂q_t = Σ_f (∂L/∂φq)_tf J_tf`` (the
    chain rule through the features, in it; likewise ``k``). The reference of the gradient
    criterion (module docstring; docs/math.md §13.2); float64 NumPy of the uncast results."""
    fq, fk, jq, jk, v = (np.asarray(a, dtype=np.float64) for a in (fq, fk, jq, jk, v))
    if (fq.shape != fk.shape or fq.shape[:-1] != v.shape[:-1]
            or jq.shape != jk.shape or jq.shape[:-1] != fq.shape):
        raise ValueError(f"fq, fk must have one shape (…, T, m), jq, jk (…, T, m, d) and v "
                         f"(…, T, d_v), got {fq.shape}, {fk.shape}, {jq.shape}, {jk.shape}, "
                         f"{v.shape}")
    import torch

    def out(q, k, vv):
        w = q @ k.transpose(-1, -2)
        if causal:
            w = torch.tril(w)
        return (w @ vv) / w.sum(dim=-1, keepdim=True)

    gfq, gfk, gv = _grads_in(compute, (fq, fk, v), g, out)
    cd = _torch_dtype(compute, "compute")

    def chain(gf: np.ndarray, jac: np.ndarray) -> np.ndarray:
        # Σ_f (∂L/∂φ)_f ∂φ_f/∂x in the compute dtype (both rounded once to it)
        a, b = (torch.from_numpy(x).to(cd) for x in (gf, jac))
        return (a[..., None] * b).sum(dim=-2).to(torch.float64).numpy()

    return [chain(gfq, jq), chain(gfk, jk), gv]


def softmax_attention_gradients_plain(q: np.ndarray, k: np.ndarray, v: np.ndarray,
                                      g: np.ndarray, *, compute: str,
                                      causal: bool) -> list[np.ndarray]:
    """``[∂L/∂q, ∂L/∂k, ∂L/∂v]`` of ``L = Σ G⊙o``, ``o = softmax(q kᵀ/√d) v`` (keys after the
    query masked when ``causal``; the row maximum subtracted, ``torch.softmax``), by torch
    autograd with ``q, k (…, T, d)``, ``v``, ``G (…, T, d_v)`` rounded once to the ``compute``
    dtype and every operation in it: exact attention's reference for the gradient criterion;
    float64 NumPy of the uncast results."""
    import torch

    q, k, v = (np.asarray(a, dtype=np.float64) for a in (q, k, v))
    if q.shape != k.shape or q.shape[:-1] != v.shape[:-1]:
        raise ValueError(f"q, k must have one shape (…, T, d) and v (…, T, d_v), got "
                         f"{q.shape}, {k.shape}, {v.shape}")

    def out(tq, tk, tv):
        s = (tq @ tk.transpose(-1, -2)) / math.sqrt(tq.shape[-1])
        if causal:
            n = s.shape[-1]
            future = torch.ones(n, n, dtype=torch.bool).triu(1)
            s = s.masked_fill(future, float("-inf"))
        return torch.softmax(s, dim=-1) @ tv

    return _grads_in(compute, (q, k, v), g, out)
