"""Independent confirmation of the conformance findings, at realistic settings.

Each finding the property suite reports against a library is re-measured here by a second
route (an exact reference, a second method, a much larger sample) and its size given with a 95 %
confidence interval, at the settings people run (d = 64, m = 256, n = 4096, the library's
defaults). ``python -m kernel_verify.adapters.confirm NAME [--quick]`` prints one finding;
without NAME, every one whose library is installed. The conformance pages quote these numbers
(:mod:`kernel_verify.adapters.conformance`).

Intervals: a proportion gets the Wilson interval; a mean over independent seeds gets
``mean ± t_(0.975, S−1)·sd/√S`` (seeds are independent draws, S ≥ 8).
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import io
import math
import sys
from collections.abc import Callable

import numpy as np
from scipy import stats

from kernel_verify.adapters._lazy import missing_reason
from kernel_verify.adapters._torchseed import torch_seeded
from kernel_verify.adapters.library import confirmation_owner, records


def wilson(k: int, n: int, z: float = 1.959964) -> tuple[float, float]:
    """95 % Wilson interval of a proportion ``k/n``."""
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return centre - half, centre + half


def mean_ci(x: np.ndarray) -> tuple[float, float, float]:
    """``(mean, low, high)``: the t interval of the mean of independent values."""
    x = np.asarray(x, dtype=np.float64)
    m, s = float(x.mean()), float(x.std(ddof=1))
    h = float(stats.t.ppf(0.975, len(x) - 1)) * s / math.sqrt(len(x))
    return m, m - h, m + h


def fmt_ci(m: float, lo: float, hi: float, digits: int = 3) -> str:
    return f"{m:.{digits}g} (95 % CI {lo:.{digits}g} … {hi:.{digits}g})"


def exact_softmax_attention(q, k, v, causal: bool = False):
    import torch

    s = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
    if causal:
        n = q.shape[-2]
        s = s.masked_fill(torch.ones(n, n, dtype=torch.bool).triu(1), float("-inf"))
    return torch.softmax(s, dim=-1) @ v


# ------------------------------------------------------------------------------ performer
def performer_orf_signs(quick: bool = False) -> str:
    """Rows of ``gaussian_orthogonal_random_matrix`` are not sign-symmetric: the i-th row of each
    block has its i-th coordinate negative far more often than 1/2 (row 0: always), because
    ``torch.linalg.qr`` returns Householder Q without the sign correction ``Q·diag(sign R_ii)``
    (Mezzadri 2007). Second route: the suite's own ORF draw (sign-corrected), same test."""
    from performer_pytorch.performer_pytorch import gaussian_orthogonal_random_matrix as gorm

    from kernel_verify.impls.random_matrices import draw_matrix

    d, draws = 64, (200 if quick else 2000)
    lib = np.empty((draws, d))
    with torch_seeded(0):
        for i in range(draws):
            lib[i] = np.diagonal(gorm(d, d).double().numpy())
    rng = np.random.default_rng(0)
    ref = np.stack([np.diagonal(draw_matrix("orthogonal", rng, d, d)) for _ in range(draws)])
    lines = [f"d = {d}, {draws} draws of a d×d block: P(W[i, i] < 0) (1/2 for N(0, I) rows)"]
    for name, diag in (("performer", lib), ("suite ORF (sign-corrected)", ref)):
        cells = []
        for i in (0, 1, d // 2, d - 2, d - 1):
            k = int((diag[:, i] < 0).sum())
            lo, hi = wilson(k, draws)
            cells.append(f"row {i}: {k / draws:.3f} [{lo:.3f}, {hi:.3f}]")
        lines.append(f"  {name}: " + "; ".join(cells))
    # Effect on the FAVOR+ estimate of exp(xᵀy) for x = y = r·e_1 (row 0 of each block only).
    m, r = 256, 0.5
    reps = 200 if quick else 4000
    est = np.empty(reps)
    x = np.zeros(d)
    x[0] = r
    with torch_seeded(1):
        for i in range(reps):
            w = gorm(m, d).double().numpy()
            est[i] = np.mean(np.exp(2 * (w @ x) - x @ x))  # φ(x)ᵀφ(x) with positive features
    exact = math.exp(x @ x)
    rel = est / exact - 1
    lines.append(f"  FAVOR+ estimate of exp(‖x‖²) at x = {r}·e₁, d = {d}, m = {m}, {reps} draws: "
                 f"relative bias {fmt_ci(*mean_ci(rel))}")
    return "\n".join(lines)


def _performer_inputs(seed: int, b: int, h: int, n: int, d: int):
    import torch

    g = torch.Generator().manual_seed(seed)
    return tuple(torch.randn(b, h, n, d, generator=g, dtype=torch.float64) for _ in range(3))


def _rel(out, exact) -> float:
    import torch

    return float(torch.linalg.norm(out - exact) / torch.linalg.norm(exact))


def performer_eps(quick: bool = False) -> str:
    """``softmax_kernel`` adds ``ε = 1e-4`` *after* subtracting the maximum of ``ωᵀx'``, which for
    keys is taken over all positions: the ε term is a fixed fraction of the key features, not of
    their scale, and pulls attention towards the uniform average. Second route: the library's
    own ``softmax_kernel`` with ``eps=0`` and the same projection (the ε is a parameter)."""
    from performer_pytorch.performer_pytorch import (
        gaussian_orthogonal_random_matrix,
        linear_attention,
        softmax_kernel,
    )

    d, m, n = 64, 256, (1024 if quick else 4096)
    seeds = 8 if quick else 16
    err_lib, err_0, uni, to_uni = [], [], [], []
    for s in range(seeds):
        q, k, v = _performer_inputs(s, 1, 1, n, d)
        with torch_seeded(s):
            w = gaussian_orthogonal_random_matrix(m, d).double()
        exact = exact_softmax_attention(q, k, v)
        outs = {}
        for eps in (1e-4, 0.0):
            fq = softmax_kernel(q, projection_matrix=w, is_query=True, eps=eps)
            fk = softmax_kernel(k, projection_matrix=w, is_query=False, eps=eps)
            outs[eps] = linear_attention(fq, fk, v)
        err_lib.append(_rel(outs[1e-4], exact))
        err_0.append(_rel(outs[0.0], exact))
        mean_v = v.mean(dim=-2, keepdim=True).expand_as(exact)
        uni.append(_rel(mean_v, exact))
        to_uni.append(_rel(outs[1e-4], mean_v))
    diff = np.array(err_lib) - np.array(err_0)
    return (f"d = {d}, m = {m}, n = {n}, q, k, v ~ N(0, 1), {seeds} seeds; relative Frobenius "
            f"error to exact softmax attention:\n"
            f"  library (ε = 1e-4): {fmt_ci(*mean_ci(err_lib))}\n"
            f"  same projection, ε = 0: {fmt_ci(*mean_ci(err_0))}\n"
            f"  difference (the ε term's share): {fmt_ci(*mean_ci(diff))}\n"
            f"  uniform averaging (mean of v), for scale: {fmt_ci(*mean_ci(uni))}\n"
            f"  library output vs the mean of v, ‖out − v̄‖/‖v̄‖: {fmt_ci(*mean_ci(to_uni))}")


def performer_causal_leak(quick: bool = False) -> str:
    """In causal mode the key stabiliser ``max over all positions`` lets future keys change past
    outputs (through the ε term, which no longer scales with the features). Measured: outputs at
    positions ≤ n/2 before and after replacing every later key by one ×2 larger."""
    import torch
    from performer_pytorch.performer_pytorch import FastAttention

    d, m, n = 64, 256, (1024 if quick else 4096)
    seeds = 8 if quick else 16
    rel = []
    for s in range(seeds):
        q, k, v = _performer_inputs(s, 1, 1, n, d)
        with torch_seeded(s), contextlib.redirect_stdout(io.StringIO()):
            attn = FastAttention(d, nb_features=m, causal=True).double()
        with torch.no_grad():
            out = attn(q, k, v)
            k2 = k.clone()
            k2[..., n // 2:, :] *= 2.0
            out2 = attn(q, k2, v)
        past = slice(0, n // 2)
        rel.append(float(torch.linalg.norm(out2[..., past, :] - out[..., past, :])
                         / torch.linalg.norm(out[..., past, :])))
    return (f"d = {d}, m = {m}, n = {n}, causal FastAttention, {seeds} seeds: relative change of "
            f"the outputs at positions < n/2 when only keys at positions ≥ n/2 change (×2): "
            f"{fmt_ci(*mean_ci(rel))} (a causal map gives 0 up to rounding, ~1e-16)")


def performer_causal_denominator(quick: bool = False) -> str:
    """``causal_linear_attention_noncuda`` (and the CUDA path) add ``1e-6`` to every prefix sum
    of key features in the denominator but not in the numerator, so outputs are shrunk towards
    0 where the prefix sums are small: early positions, and everywhere once ``softmax_kernel``'s
    ε dominates the key features (≈ m^(−1/2)·1e-4 each). Measured with ``v ≡ 1`` (every
    correct attention returns 1)."""
    import torch
    from performer_pytorch.performer_pytorch import FastAttention

    d, m, n = 64, 256, (1024 if quick else 4096)
    seeds = 8
    first, first16, overall = [], [], []
    for s in range(seeds):
        q, k, _ = _performer_inputs(s, 1, 1, n, d)
        v = torch.ones(1, 1, n, d, dtype=torch.float64)
        with torch_seeded(s), contextlib.redirect_stdout(io.StringIO()):
            attn = FastAttention(d, nb_features=m, causal=True).double()
        with torch.no_grad():
            short = (1.0 - attn(q, k, v))[0, 0, :, 0].abs().numpy()
        first.append(float(short[0]))
        first16.append(float(short[:16].mean()))
        overall.append(float(short.mean()))
    return (f"d = {d}, m = {m}, n = {n}, causal FastAttention, v ≡ 1, {seeds} seeds; |1 − out|:\n"
            f"  position 0: {fmt_ci(*mean_ci(first))}\n"
            f"  mean over positions 0–15: {fmt_ci(*mean_ci(first16))}\n"
            f"  mean over all positions: {fmt_ci(*mean_ci(overall))}\n"
            f"  (non-causal linear_attention has no such term: partition of unity holds there)")


# ---------------------------------------------------------------------------- nystrom
def _nystrom(q, k, v, landmarks: int, mask: bool) -> np.ndarray:
    from kernel_verify.adapters.nystrom_attention import run_layer

    return run_layer(q, k, v, num_landmarks=landmarks, mask=mask)


def nystrom_padding(quick: bool = False) -> str:
    """Without a mask, the zero tokens prepended to pad ``n`` to a multiple of
    ``num_landmarks`` are attended to as real keys with value 0. With ``v ≡ 1`` every correct
    attention returns 1; the shortfall is the weight on the padding."""
    d, h, n, landmarks = 64, 1, (1000 if quick else 4000), 256
    seeds = 8
    short = {False: [], True: []}
    for s in range(seeds):
        rng = np.random.default_rng(s)
        q, k = rng.standard_normal((2, 1, h, n, d))
        v = np.ones((1, h, n, d))
        for mask in (False, True):
            out = _nystrom(q, k, v, landmarks, mask)
            short[mask].append(float(np.mean(np.abs(1.0 - out))))
    pad = (-n) % landmarks
    return (f"d = {d}, n = {n} ({pad} padding tokens), num_landmarks = {landmarks}, v ≡ 1, "
            f"{seeds} seeds; mean |1 − out|:\n"
            f"  no mask (the default call): {fmt_ci(*mean_ci(short[False]))}\n"
            f"  mask = all True: {fmt_ci(*mean_ci(short[True]))}")


def nystrom_batch_coupling(quick: bool = False) -> str:
    """``moore_penrose_iter_pinv`` scales its start ``Z₀ = Aᵀ/(max col sum · max row sum)`` by
    maxima over the whole batch and all heads, and 6 iterations do not converge, so one batch
    element's output depends on the others. Measured: batch element 0 alone vs with a second
    element whose inputs are ×4."""
    d, h, n, landmarks = 64, 8, (1024 if quick else 4096), 256
    seeds = 8
    rel = []
    for s in range(seeds):
        rng = np.random.default_rng(s)
        q, k, v = rng.standard_normal((3, 1, h, n, d))
        q2, k2, v2 = 4 * rng.standard_normal((3, 1, h, n, d))
        alone = _nystrom(q, k, v, landmarks, False)[0]
        paired = _nystrom(np.concatenate([q, q2]), np.concatenate([k, k2]),
                          np.concatenate([v, v2]), landmarks, False)[0]
        rel.append(float(np.linalg.norm(paired - alone) / np.linalg.norm(alone)))
    return (f"d = {d}, h = {h}, n = {n}, num_landmarks = {landmarks}, {seeds} seeds: relative "
            f"change of batch element 0 when batch element 1 (inputs ×4) is added: "
            f"{fmt_ci(*mean_ci(rel))} (independent batch elements give 0 up to rounding)")


# ------------------------------------------------------------------------------- sklearn
def sklearn_nystroem_rank_deficient(quick: bool = False) -> str:
    """``Nystroem`` clips singular values of W at an absolute 1e-12 instead of using a relative
    pseudo-inverse cutoff, so for a low-rank kernel (``n_components`` > rank) the rounding noise in
    W's null space is amplified by up to 1e6. Exact reference: for the linear kernel of rank d,
    ``K̃ = K`` exactly; second method: ``C pinv(W) Cᵀ`` (numpy, default relative cutoff)."""
    from sklearn.kernel_approximation import Nystroem

    d, n, comps = 64, (1024 if quick else 4096), 256
    seeds = 8
    e_sk, e_pinv = [], []
    for s in range(seeds):
        X = np.random.default_rng(s).standard_normal((n, d))
        K = X @ X.T
        ny = Nystroem(kernel="linear", n_components=comps, random_state=s).fit(X)
        phi = ny.transform(X)
        idx = ny.component_indices_
        C = K[:, idx]
        kp = C @ np.linalg.pinv(K[np.ix_(idx, idx)], hermitian=True) @ C.T
        scale = np.abs(K).max()
        e_sk.append(float(np.abs(phi @ phi.T - K).max() / scale))
        e_pinv.append(float(np.abs(kp - K).max() / scale))
    return (f"linear kernel, d = {d} (rank {d}), n = {n}, n_components = {comps}, {seeds} seeds; "
            f"max |K̃ − K| / max |K| (exact: 0):\n"
            f"  sklearn Nystroem: {fmt_ci(*mean_ci(e_sk))}\n"
            f"  C·pinv(W)·Cᵀ (relative cutoff): {fmt_ci(*mean_ci(e_pinv))}")


def sklearn_nystroem_sigmoid(quick: bool = False) -> str:
    """For an indefinite kernel (``kernel="sigmoid"``) ``Nystroem``'s features give
    ``K̃ = C |W|⁺ Cᵀ`` (SVD instead of an eigendecomposition), so ``K̃[S, S] = |W| ≠ W``: the
    approximation is not exact on its own landmarks. Exact reference: the eigendecomposition of
    W, ``|W| = V|Λ|Vᵀ``."""
    from sklearn.kernel_approximation import Nystroem
    from sklearn.metrics.pairwise import sigmoid_kernel

    d, n, comps = 64, (1024 if quick else 4096), 256
    seeds = 8
    err, neg, pred = [], [], []
    for s in range(seeds):
        X = np.random.default_rng(s).standard_normal((n, d))
        ny = Nystroem(kernel="sigmoid", n_components=comps, random_state=s).fit(X)
        idx = ny.component_indices_
        phi = ny.transform(X[idx])
        W = sigmoid_kernel(X[idx])
        lam, V = np.linalg.eigh(W)
        absw = (V * np.abs(lam)) @ V.T
        err.append(float(np.abs(phi @ phi.T - W).max() / np.abs(W).max()))
        pred.append(float(np.abs(phi @ phi.T - absw).max() / np.abs(W).max()))
        neg.append(float(-lam[lam < 0].sum() / np.abs(lam).sum()))
    return (f"sigmoid kernel (sklearn defaults γ = 1/d, c₀ = 1), d = {d}, n = {n}, "
            f"n_components = {comps}, {seeds} seeds:\n"
            f"  max |K̃[S, S] − W| / max |W| (exact Nyström: 0): {fmt_ci(*mean_ci(err))}\n"
            f"  max |K̃[S, S] − |W|| / max |W| (the predicted value): {fmt_ci(*mean_ci(pred))}\n"
            f"  share of W's spectrum that is negative (Σ|λ<0| / Σ|λ|): {fmt_ci(*mean_ci(neg))}")


# ------------------------------------------------------------------------------ running them
def _in_subprocess(module: str, name: str, quick: bool) -> str:
    """``python -m <module> NAME [--quick]`` in a fresh process: fla's kernels and models need
    ``TRITON_INTERPRET=1`` before triton is imported, and this process may have imported it
    (the library check imports fla)."""
    import os
    import subprocess

    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    cmd = [sys.executable, "-m", module, name, *(["--quick"] if quick else [])]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
    if proc.returncode != 0:
        return f"failed (exit {proc.returncode}): {proc.stderr.strip()[-2000:]}"
    return proc.stdout.strip()


def names() -> list[str]:
    """Every independent measurement, in the order of the library records
    (:attr:`kernel_verify.adapters.library.Library.confirmations`)."""
    return [name for lib in records().values() for name in lib.confirmations]


def run(name: str, quick: bool = False) -> str:
    """The output of measurement ``name``, or why it was skipped (its library is missing)."""
    lib = confirmation_owner(name)
    reason = missing_reason(lib.key)
    if reason:
        return f"skipped: {reason}"
    if lib.confirm_in_subprocess:
        return _in_subprocess(lib.confirm_module, name, quick)
    fn: Callable[[bool], str] = getattr(importlib.import_module(lib.confirm_module), name)
    return fn(quick)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m kernel_verify.adapters.confirm",
                                     description=__doc__.split("\n\n")[0])
    known = names()
    parser.add_argument("names", nargs="*", choices=[[], *known], metavar="NAME",
                        help=f"one of {', '.join(known)} (default: all)")
    parser.add_argument("--quick", action="store_true", help="smaller n and fewer seeds")
    args = parser.parse_args(argv)
    for name in args.names or known:
        print(f"## {name}\n{run(name, args.quick)}\n", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
