"""Broken delta rules (docs/math.md §23): the defect classes the field reported in 2025–26 for
Gated DeltaNet, KDA and their chunked kernels, as
:class:`~kernel_verify.properties.gated_protocol.GatedAttentionTarget` mutants.

One skeleton in NumPy (float64 and float32 inputs, computed in float64), the gated delta rule
``S_t = e^(g_t)(I − β_t k_t k_tᵀ)S_(t−1) + β_t k_t v_tᵀ`` with scalar log-gates (or KDA's
``(I − β_t k_t k_tᵀ)Diag(e^(g_t))`` with ``kda=True``), q and k L2-normalised with ε = 10⁻⁶
inside the root (declared), q scaled by ``d^(−1/2)``; forms: ``parallel`` (one chunk),
``stateful`` (chunks of 3), ``chunked`` (the UT transform, chunk by chunk with an explicit
state, the structure of fla's kernels), ``step``, ``varlen``, ``padded``. Each mutant flips one
switch; the controls run the same code with every switch off.

* ``delta_decay_after_error``: the error term reads the undecayed state,
  ``A = e^g I − βkkᵀ`` instead of ``e^g(I − βkkᵀ)``, in every form;
* ``delta_decay_after_update``: the update decayed too, ``S_t = e^g(S + βk(v − Sᵀk)ᵀ)``;
* ``delta_eps_outside_root``: q and k normalised ``x/(√Σx² + ε)`` while ``x/√(Σx² + ε)`` is
  declared (visible at small norms only);
* ``delta_beta_one_side``: β in the transition but not in the update (``w = k``);
* ``delta_truncated_inverse``: the chunk's ``(I − L)⁻¹`` replaced by ``I + L`` (the
  triangular solve cut after its first term; exact for chunks of ≤ 2 tokens);
* ``delta_chunk_state_off_by_one``: the state carried to the next chunk is the one after the
  chunk's second-to-last token;
* ``delta_initial_state_ignored_chunked``: the chunked forms start from zero whatever the
  initial state (the step takes it);
* ``delta_packed_state_not_reset``: packed sequences continue from the previous sequence's
  final state;
* ``delta_decay_reference_at_chunk_end``: the in-chunk decays as
  ``e^(G_t − G_end)·e^(G_end − G_s)`` through the chunk's last cumulative gate — exact in real
  arithmetic, but every row of a chunk now depends on the gates of its future tokens through
  rounding (not causal bitwise).
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Callable

import numpy as np

from kernel_verify.impls.packed import run_padded
from kernel_verify.properties.gated_protocol import GatedAttentionTarget, l2_features

__all__ = ["DELTA_CONTROLS", "DELTA_KILLERS", "DELTA_MUTANTS", "DeltaSwitches",
           "make_delta_target"]

CLAIMS = frozenset({"validates_input"})
EPS = 1e-6


@dataclasses.dataclass(frozen=True)
class DeltaSwitches:
    """The defects (all off: the correct control)."""

    decay_after_error: bool = False
    decay_after_update: bool = False
    eps_outside_root: bool = False
    beta_one_side: bool = False
    truncated_inverse: bool = False
    chunk_state_off_by_one: bool = False
    initial_state_ignored_chunked: bool = False
    packed_no_reset: bool = False
    decay_reference_at_chunk_end: bool = False


def _phi(sw: DeltaSwitches, x: np.ndarray, role: str) -> np.ndarray:
    x = np.asarray(x, dtype=np.float64)
    ss = np.sum(x * x, axis=-1, keepdims=True)
    y = x / (np.sqrt(ss) + EPS) if sw.eps_outside_root else x / np.sqrt(ss + EPS)
    return y * x.shape[-1] ** -0.5 if role == "q" else y


def _check(q, k, v, g, beta, kda: bool):
    for name, a in (("q", q), ("k", k), ("v", v), ("g", g), ("beta", beta)):
        if not isinstance(a, np.ndarray) or not np.isfinite(a).all():
            raise ValueError(f"{name} must be a finite NumPy array")
    if q.shape != k.shape or v.shape[:-1] != q.shape[:-1]:
        raise ValueError(f"q, k, v shapes disagree: {q.shape}, {k.shape}, {v.shape}")
    want = q.shape if kda else q.shape[:-1]
    if g.shape != want:
        raise ValueError(f"g must have shape {want}, got {g.shape}")
    if beta.shape != q.shape[:-1]:
        raise ValueError(f"beta must have shape {q.shape[:-1]}, got {beta.shape}")
    if (g > 0).any():
        raise ValueError("g (log-gates) must be <= 0")


def _terms(sw: DeltaSwitches, kda: bool, k, g, beta):
    """``(λ (…, T, d), x, y, w)`` of the transition ``A = Diag(e^λ) + x yᵀ`` under ``sw``."""
    lam = g if kda else np.broadcast_to(g[..., None], k.shape)
    bk = beta[..., None] * k
    if kda:
        x, y = -bk, np.exp(lam) * k
    elif sw.decay_after_error:
        x, y = -bk, k
    else:
        x, y = -np.exp(lam) * bk, k
    w = k if sw.beta_one_side else bk
    if sw.decay_after_update:  # e^g(S + x uᵀ + w vᵀ): the update decayed too
        w = np.exp(lam) * w
    return lam, x, y, w


def _step(sw, s, q_t, v_t, lam, x, y, w):
    u = np.einsum("...f,...fc->...c", y, s)
    s = (np.exp(lam)[..., None] * s + x[..., :, None] * u[..., None, :]
         + w[..., :, None] * v_t[..., None, :])
    return s, np.einsum("...f,...fc->...c", q_t, s)


def _decays(sw: DeltaSwitches, gl: np.ndarray, rows: np.ndarray, cols: np.ndarray):
    """``exp(G_rows − G_cols)`` (…, R, S, d) masked to ``rows ≥ cols`` (0 elsewhere)."""
    a, b = gl[..., rows, None, :], gl[..., None, cols, :]
    keep = (rows[:, None] >= cols[None, :])[..., None]
    if sw.decay_reference_at_chunk_end:
        end = gl[..., -1:, None, :]
        d = np.exp(np.where(keep, a - end, 0.0)) * np.exp(np.where(keep, end - b, 0.0))
    else:
        d = np.exp(np.where(keep, a - b, 0.0))
    return np.where(keep, d, 0.0)


def _chunk(sw: DeltaSwitches, s0, q, v, lam, x, y, w):
    """One chunk of the UT transform (docs/math.md §23) from state ``s0``: ``(o, S_end)``."""
    c = q.shape[-2]
    gl = np.concatenate([np.zeros_like(lam[..., :1, :]), np.cumsum(lam, axis=-2)], axis=-2)
    idx = np.arange(c + 1)
    dec = _decays(sw, gl, idx, idx)  # (…, C+1, C+1, d): Γ between cumulative positions
    # positions: token t (0-based) has cumulative index t + 1; Γ_(t−1, s) -> dec[t, s + 1]
    read = dec[..., :c, 1:, :]  # Γ from after token s to before token t: (…, t, s, d)
    strict = np.tril(np.ones((c, c)), -1)
    low = np.einsum("...tf,...tsf,...sf->...ts", y, read, x) * strict
    mix = np.einsum("...tf,...tsf,...sf->...ts", y, read, w) * strict
    y_hat = y * dec[..., :c, 0, :]
    rhs = np.einsum("...tf,...fc->...tc", y_hat, s0) + mix @ v
    eye = np.eye(c)
    if sw.truncated_inverse:
        u = (eye + low) @ rhs
    else:
        u = np.linalg.solve(eye - low, rhs)
    out_dec = dec[..., 1:, 1:, :]  # Γ_(t, s) for s ≤ t: (…, t, s, d)
    both = np.tril(np.ones((c, c)))
    qx = np.einsum("...tf,...tsf,...sf->...ts", q, out_dec, x) * both
    qw = np.einsum("...tf,...tsf,...sf->...ts", q, out_dec, w) * both
    o = np.einsum("...tf,...fc->...tc", q * dec[..., 1:, 0, :], s0) + qx @ u + qw @ v
    last = c - 1 if not sw.chunk_state_off_by_one or c < 2 else c - 2
    to_end = dec[..., last + 1, 1:, :] * (idx[1:] <= last + 1)[:, None]  # Γ_(last, s)
    s_end = (dec[..., last + 1, 0, :][..., :, None] * s0
             + np.einsum("...sf,...sc->...fc", to_end * x, u)
             + np.einsum("...sf,...sc->...fc", to_end * w, v))
    return o, s_end


def _start(initial_state, lead, d, dv):
    if initial_state is None:
        return np.zeros((*lead, d, dv))
    return np.asarray(initial_state[0], dtype=np.float64)


def make_forms(sw: DeltaSwitches, kda: bool = False) -> dict[str, Callable]:
    """The forms of the skeleton under ``sw`` (module docstring)."""

    def prepared(q, k, v, g, beta):
        _check(q, k, v, g, beta, kda)
        fq, fk = _phi(sw, q, "q"), _phi(sw, k, "k")
        return fq, np.asarray(v, np.float64), _terms(sw, kda, fk, np.asarray(g, np.float64),
                                                     np.asarray(beta, np.float64))

    def chunked(q, k, v, g, *, chunk_size, initial_state=None, seed=0, beta=None):
        fq, vv, (lam, x, y, w) = prepared(q, k, v, g, beta)
        s = _start(None if sw.initial_state_ignored_chunked else initial_state,
                   q.shape[:-2], q.shape[-1], v.shape[-1])
        outs = []
        for a in range(0, q.shape[-2], chunk_size):
            e = min(a + chunk_size, q.shape[-2])
            o, s = _chunk(sw, s, fq[..., a:e, :], vv[..., a:e, :], lam[..., a:e, :],
                          x[..., a:e, :], y[..., a:e, :], w[..., a:e, :])
            outs.append(o)
        out = np.concatenate(outs, axis=-2) if outs else np.zeros(v.shape)
        return out.astype(v.dtype), (s,)

    def parallel(q, k, v, g, *, initial_state=None, seed=0, beta=None):
        return chunked(q, k, v, g, chunk_size=max(q.shape[-2], 1), initial_state=initial_state,
                       beta=beta)

    def stateful(q, k, v, g, *, initial_state=None, seed=0, beta=None):
        return chunked(q, k, v, g, chunk_size=3, initial_state=initial_state, beta=beta)

    def step(state, q_t, k_t, v_t, g_t, *, seed=0, beta=None):
        _check(q_t[..., None, :], k_t[..., None, :], v_t[..., None, :],
               g_t[..., None, :] if kda else g_t[..., None], np.asarray(beta)[..., None], kda)
        fq, fk = _phi(sw, q_t, "q"), _phi(sw, k_t, "k")
        lam, x, y, w = _terms(sw, kda, fk[..., None, :], np.asarray(g_t, np.float64)[
            ..., None, :] if kda else np.asarray(g_t, np.float64)[..., None],
            np.asarray(beta, np.float64)[..., None])
        s = _start(state, q_t.shape[:-1], q_t.shape[-1], v_t.shape[-1])
        s, o = _step(sw, s, fq, np.asarray(v_t, np.float64), lam[..., 0, :], x[..., 0, :],
                     y[..., 0, :], w[..., 0, :])
        return (s,), o.astype(v_t.dtype)

    def varlen(q, k, v, g, *, cu_seqlens, initial_state=None, seed=0, beta=None):
        cu = [int(c) for c in np.asarray(cu_seqlens)]
        outs, states, prev = [], [], None
        for i, (a, b) in enumerate(itertools.pairwise(cu)):
            init = None if initial_state is None else (initial_state[0][i:i + 1],)
            if sw.packed_no_reset and prev is not None:
                init = prev
            gg = g[:, :, a:b]
            o, st = stateful(q[:, :, a:b], k[:, :, a:b], v[:, :, a:b], gg, initial_state=init,
                             beta=beta[:, :, a:b])
            outs.append(o)
            states.append(st)
            prev = st
        return np.concatenate(outs, axis=-2), (np.concatenate([s[0] for s in states]),)

    def padded(q, k, v, g, *, mask, initial_state=None, seed=0, beta=None):
        rows = [np.asarray(mask, dtype=bool)[b] for b in range(q.shape[0])]
        return run_padded(lambda a, b, c, gb, bb, st: stateful(a, b, c, gb, initial_state=st,
                                                               beta=bb),
                          (q, k, v, g, beta), rows, out_like=np.zeros(v.shape),
                          initial_state=initial_state)

    def state_sums(state):
        return np.asarray(state[0], dtype=np.float64), None

    return {"parallel": parallel, "stateful": stateful, "chunked": chunked, "step": step,
            "varlen": varlen, "padded": padded, "state_sums": state_sums}


def make_delta_target(name: str, sw: DeltaSwitches, kda: bool = False) -> GatedAttentionTarget:
    """A delta-rule target of the skeleton with switches ``sw`` (module docstring)."""
    return GatedAttentionTarget(name, gates="key_dim" if kda else "scalar",
                                transition="kda" if kda else "gated_delta", claims=CLAIMS,
                                features=l2_features(eps=EPS, convention="sum_inside"),
                                dtypes=("float64", "float32"), feature_ulps=6,
                                **make_forms(sw, kda))


DELTA_MUTANTS: dict[str, tuple[str, DeltaSwitches]] = {
    "delta_decay_after_error": (
        "A = e^g I − βkkᵀ: the error term reads the undecayed state (the decay applied after "
        "the error term), in every form", DeltaSwitches(decay_after_error=True)),
    "delta_decay_after_update": (
        "S_t = e^g(S + βk(v − Sᵀk)ᵀ): the update decayed as well, in every form",
        DeltaSwitches(decay_after_update=True)),
    "delta_eps_outside_root": (
        "q and k normalised x/(√Σx² + ε) while x/√(Σx² + ε) is declared",
        DeltaSwitches(eps_outside_root=True)),
    "delta_beta_one_side": (
        "β in the transition but not in the update (w = k)", DeltaSwitches(beta_one_side=True)),
    "delta_truncated_inverse": (
        "the chunk's (I − L)⁻¹ replaced by I + L (the triangular solve truncated)",
        DeltaSwitches(truncated_inverse=True)),
    "delta_chunk_state_off_by_one": (
        "the state carried to the next chunk is the one after the chunk's second-to-last token",
        DeltaSwitches(chunk_state_off_by_one=True)),
    "delta_initial_state_ignored_chunked": (
        "the chunked forms start from zero whatever the initial state",
        DeltaSwitches(initial_state_ignored_chunked=True)),
    "delta_packed_state_not_reset": (
        "packed sequences continue from the previous sequence's final state",
        DeltaSwitches(packed_no_reset=True)),
    "delta_decay_reference_at_chunk_end": (
        "in-chunk decays e^(G_t − G_end)·e^(G_end − G_s) through the chunk's end: future gates "
        "enter earlier rows through rounding", DeltaSwitches(decay_reference_at_chunk_end=True)),
}

_EXACT = "gated_forms::test_gated_forms_meet_the_exact_recurrence"
#: The property each mutant is written for.
DELTA_KILLERS: dict[str, tuple[str, ...]] = {
    **dict.fromkeys(DELTA_MUTANTS, (_EXACT,)),
    "delta_initial_state_ignored_chunked": ("gated_forms::test_gated_split_invariance",),
    "delta_packed_state_not_reset": (
        "gated_forms::test_gated_packed_sequences_equal_separate_runs",),
    "delta_decay_reference_at_chunk_end": ("gated_forms::test_gated_outputs_are_causal_bitwise",),
}

#: Correct twins: every switch off (gated delta; KDA).
DELTA_CONTROLS: dict[str, Callable[[], list]] = {
    "delta_correct": lambda: [make_delta_target("control:delta_correct", DeltaSwitches())],
    "delta_correct_kda": lambda: [make_delta_target("control:delta_correct_kda",
                                                    DeltaSwitches(), kda=True)],
}


def __getattr__(attr: str) -> list:
    """``<mutant name>`` / ``control_<name>``: the targets (``kernel-verify check
    kernel_verify.mutants.delta:delta_truncated_inverse``)."""
    if attr in DELTA_MUTANTS:
        _, sw = DELTA_MUTANTS[attr]
        return [make_delta_target(f"mutant:{attr}", sw)]
    if attr.startswith("control_") and attr.removeprefix("control_") in DELTA_CONTROLS:
        return DELTA_CONTROLS[attr.removeprefix("control_")]()
    raise AttributeError(f"module {__name__!r} has no attribute {attr!r}")
