"""Second-route measurements of fla's attention kernels under Triton's interpreter.

``python -m kernel_verify.adapters._fla_confirm NAME [--quick]`` prints one measurement; it runs
in its own process because the kernels need ``TRITON_INTERPRET=1`` before ``triton`` is
imported (:mod:`kernel_verify.adapters._triton_interpreter`); :mod:`kernel_verify.adapters.
confirm` calls it through a subprocess.

* ``fla_kernels_exact``: every kernel in float32 against the exact formula at lengths across
  fla's chunk boundaries (T = 1, 63, 64, 65, 128), d = 16, within a derived rounding bound;
  the linear-attention kernels also split at t₀ with the state carried (initial_state) and
  packed (cu_seqlens); gradients against float64 autograd of the exact formula, within the
  derived first-order bound of :func:`gradient_bound`.
* ``fla_rebased_eps``: ``parallel_rebased`` divides by ``z + 1e-5``; the shortfall from a
  partition of unity, measured with V ≡ 1 and against the float64 formula;
* ``fla_shape_overflow``: with fewer value rows than keys the linear-attention kernels write
  past their output buffer (processes aborted by glibc's heap checks).

Bounds (the plain-feature analysis of :mod:`kernel_verify.verify.forms_bounds`, any evaluation
order, unit roundoff ``u = 2⁻²⁴``): every kernel's weight ``w_ij`` is ``φ(q_i)ᵀφ(k_j)`` of
exact float64 features ``φ`` (fla's Taylor map for linear attention and Based, ``vec(xxᵀ)/√d``
for ReBased), and each product term's extra roundings enter as ``extra``:

* linear attention: fla's ``TaylorFeatureMap`` evaluates each feature with at most 3 roundings
  in float32 (product, the float32 constant, the division), and the kernel multiplies q by its
  scale (1 more): ``extra = 2·3 + 1 + 1`` (one spare);
* Based: ``s = Σ_i fl(q_i·c)·k_i`` errs by ``γ_(d+1)·a`` with ``a = c·Σ|q_i k_i|`` and
  ``w = fl(1 + s + fl(0.5·s·s))`` by at most ``γ_(d+1)a(1 + a) + (γ_(d+1)a)²/2 +
  γ_3(1 + a + a²/2) ≤ 3γ_(d+4)·(1 + a + a²/2)``, and ``1 + a + a²/2 = Σ_f |φq_f φk_f|`` for the
  Taylor features: ``extra = 3(d + 4)``;
* ReBased: ``w = s²`` errs by ``≤ (2γ_(d+1) + γ_(d+1)² + u)·a² ≤ 3γ_(d+2)·a²``, ``a² =
  Σ_f |φq_f φk_f|``: ``extra = 3(d + 2)``;

plus the normaliser's epsilon (``o·ε/(z + ε)``, at most ``|o|·ε/z``) and the float64
reference's own rounding (the same bound at ``u = 2⁻⁵³``). Inputs are float32 values; the
reference uses them exactly.

Gradients of ``L = Σ G⊙o`` (:func:`gradient_bound`). With ``w_ij = k(s_ij)``, ``s = qᵀk/√d``
(Taylor: ``k = 1 + s + s²/2``, ``k' = 1 + s``; ReBased: ``k = s²``, ``k' = 2s``),
``z_i = Σ_(j≤i) w_ij``, ``o_i = Σ_j w_ij v_j / z_i``, the exact gradients are
``∂L/∂v_j = Σ_(i≥j) (w_ij/z_i) G_i``, ``Ḡ_ij = ∂L/∂w_ij = G_iᵀ(v_j − o_i)/z_i``,
``∂L/∂q_i = Σ_j Ḡ_ij k'_ij k_j/√d``, ``∂L/∂k_j = Σ_i Ḡ_ij k'_ij q_i/√d``. Whatever order fla's
backward sums them in, each computed quantity is a sum of products whose every term carries
at most ``N = 2n + m + 4 + extra + 8`` roundings (the forward's count, the backward's chain of
at most 8 more: the feature map's Jacobian, the scale, ``1/z``, the product with ``G`` and
``v − o``), so the standard model bounds its error by ``γ_N`` times the same sum with every term
in absolute value; the inputs of the chain carry their own errors: a weight ``≤ γ_N a_ij``
(``a_ij = Σ_f |φ(q_i)_f φ(k_j)_f|``), the normaliser ``≤ γ_N A_i`` (``A_i = Σ_j a_ij``), an
output ``≤ E_i`` (the forward bound above). To first order in ``u`` (second-order terms are
``O(N²u²)`` relative, ~1e-9 here):

* ``|Δ∂L/∂v_j| ≤ Σ_i |G_i|·(γ_N a_ij + (w_ij/z_i)·γ_N A_i)/z_i + γ_N Σ_i (w_ij/z_i)|G_i|``;
* ``|ΔḠ_ij| ≤ Σ_c |G_ic|(E_ic + γ_N|v_jc − o_ic|)/z_i + |Ḡ|_ij·γ_N A_i/z_i`` with
  ``|Ḡ|_ij = Σ_c |G_ic||v_jc − o_ic|/z_i``;
* ``|Δ∂L/∂q_i| ≤ Σ_j (|ΔḠ_ij||k'_ij| + |Ḡ|_ij·γ_N·k̄'_ij + γ_N|Ḡ|_ij k̄'_ij)·|k_j|/√d`` and the
  same over ``i`` with ``|q_i|`` for ``∂L/∂k_j``, where ``k̄'`` is ``k'`` of ``s̄ = |q|ᵀ|k|/√d``
  (the derivative's own terms in absolute value);

plus the normaliser's epsilon (``z + ε`` for ``z``: ``ε/z_i`` relative on every term through
``1/z_i``) and the float64 reference's rounding (the same bound at ``u = 2⁻⁵³``, negligible).
Measured against the float64 autograd of the exact formula; a gradient off by a relative 1e-4 of its
size fails wherever the bound is below that (the line prints the bound's size too).
"""

from __future__ import annotations

import argparse
import itertools
import math
import time

import numpy as np

from kernel_verify.adapters import _fla_feature_maps as _fm
from kernel_verify.adapters import fla as ad
from kernel_verify.verify.forms_bounds import plain_forms_error_bound

U32, U64 = 2.0**-24, 2.0**-53
#: Extra roundings per product term (module docstring), by kernel family, at width d.
EXTRA = {"linear_attn": lambda d: 8, "based": lambda d: 3 * (d + 4),
         "rebased": lambda d: 3 * (d + 2)}


def _family(kernel: str) -> str:
    return "linear_attn" if "linear_attn" in kernel else ("rebased" if "rebased" in kernel
                                                           else "based")


def _features(kernel: str, x: np.ndarray) -> np.ndarray:
    return ad.square_features(x) if _family(kernel) == "rebased" else ad.taylor_features(x)


def exact(kernel: str, q, k, v, initial_state=None) -> tuple[np.ndarray, np.ndarray]:
    """``(o, bound)`` for BHTD float64 inputs: the float64 formula (no epsilon) and the bound of
    the module docstring for fla's float32 evaluation (epsilon and reference rounding
    included). ``initial_state``: exact ``(S0 (B,H,m,dv), z0 (B,H,m))``."""
    fq, fk = _features(kernel, q), _features(kernel, k)
    w = np.tril(fq @ np.swapaxes(fk, -1, -2))
    num, den = w @ v, w.sum(-1, keepdims=True)
    if initial_state is not None:
        num = num + fq @ initial_state[0]
        den = den + fq @ initial_state[1][..., None]
    o = num / den
    d = q.shape[-1]
    extra = EXTRA[_family(kernel)](d)
    bound = plain_forms_error_bound(fq, fk, v, u=U32, initial_state=initial_state, extra=extra)
    bound = bound + plain_forms_error_bound(fq, fk, v, u=U64, initial_state=initial_state)
    eps = ad.EPS[_family(kernel)]
    return o, bound + np.abs(o) * eps / den


def gradient_bound(kernel: str, q, k, v, g) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per-entry bounds on ``|∂L/∂(q, k, v)|`` of fla's float32 evaluation against the exact
    gradients of ``L = Σ G⊙o`` (module docstring), BHTD float64 inputs; first order in u."""
    from kernel_verify.verify.tolerance import gamma

    fam = _family(kernel)
    fq, fk = _features(kernel, q), _features(kernel, k)
    n, m, d = q.shape[-2], fq.shape[-1], q.shape[-1]
    gn = gamma(2 * n + m + 4 + EXTRA[fam](d) + 8, U32) + gamma(2 * n + m + 12, U64)
    o, e = exact(kernel, q, k, v)
    mask = np.tril(np.ones((n, n), dtype=bool))
    w = np.where(mask, fq @ np.swapaxes(fk, -1, -2), 0.0)
    a = np.where(mask, np.abs(fq) @ np.swapaxes(np.abs(fk), -1, -2), 0.0)
    z, big_a = w.sum(-1), a.sum(-1)  # (B, H, T)
    s = q @ np.swapaxes(k, -1, -2) / math.sqrt(d)
    s_abs = np.abs(q) @ np.swapaxes(np.abs(k), -1, -2) / math.sqrt(d)
    dk_ = 2 * s if fam == "rebased" else 1 + s
    dk_abs = np.where(mask, 2 * s_abs if fam == "rebased" else 1 + s_abs, 0.0)
    dk_ = np.where(mask, dk_, 0.0)
    zi = z[..., :, None]
    eps = ad.EPS[fam] / zi  # the normaliser's epsilon, relative: z + ε instead of z
    diff = np.abs(v[..., None, :, :] - o[..., :, None, :])  # (B, H, i, j, c)
    ga = np.abs(g)[..., :, None, :]
    gbar_abs = np.where(mask, (ga * diff).sum(-1) / zi, 0.0)
    d_gbar = np.where(mask, (ga * (e[..., :, None, :] + gn * diff)).sum(-1) / zi
                      + gbar_abs * (gn * big_a[..., :, None] / zi + eps), 0.0)
    dv = (np.swapaxes(gn * a / zi + (w / zi) * (gn * big_a[..., :, None] / zi + eps), -1, -2)
          @ np.abs(g)) + gn * (np.swapaxes(w / zi, -1, -2) @ np.abs(g))
    per = d_gbar * np.abs(dk_) + 2 * gn * gbar_abs * dk_abs  # (B, H, i, j)
    dq = per @ np.abs(k) / math.sqrt(d)
    dkk = np.swapaxes(per, -1, -2) @ np.abs(q) / math.sqrt(d)
    return dq, dkk, dv


def _torch(x, grad: bool = False):
    import torch

    return torch.tensor(np.swapaxes(x, 1, 2), dtype=torch.float32, requires_grad=grad)


def _np(t) -> np.ndarray:
    return np.swapaxes(t.detach().double().numpy(), 1, 2)


def _inputs(seed: int, b: int, h: int, t: int, d: int, dv: int):
    rng = np.random.default_rng(seed)
    q, k = (rng.standard_normal((b, h, t, d)) for _ in range(2))
    v = rng.standard_normal((b, h, t, dv))
    return tuple(x.astype(np.float32).astype(np.float64) for x in (q, k, v))


def _torch_exact(kernel: str, q, k, v):
    """The exact formula in float64 torch (for autograd), BHTD."""
    import torch

    d = q.shape[-1]
    s = q @ k.transpose(-1, -2) / math.sqrt(d)
    fam = _family(kernel)
    w = s * s if fam == "rebased" else 1 + s + s * s / 2
    w = torch.tril(w)
    return (w @ v) / w.sum(-1, keepdim=True)


def fla_kernels_exact(quick: bool = False) -> str:
    """Every kernel against the exact formula across chunk boundaries (module docstring)."""
    import torch

    lengths = (1, 63, 65) if quick else (1, 63, 64, 65, 128)
    b, h, d, dv = 1, 2, 16, 16
    lines, worst = [], {}
    t0 = time.time()
    for kernel in ad.KERNELS:
        target = next(t for t in ad.attention_targets if t.name.startswith(f"fla.{kernel}"))
        for n in lengths:
            q, k, v = _inputs(n, b, h, n, d, dv)
            want, bound = exact(kernel, q, k, v)
            got = target(_torch(q).transpose(1, 2), _torch(k).transpose(1, 2),
                         _torch(v).transpose(1, 2), causal=True)
            ratio = float((np.abs(got - want) / bound).max())
            worst[kernel] = max(worst.get(kernel, 0.0), ratio)
            lines.append(f"{kernel:28s} T={n:3d}: max |o − exact| = "
                         f"{np.abs(got - want).max():.2e}, max err/bound = {ratio:.3f}")
        if target.offers("stateful"):
            n, cut = (65, 40) if quick else (128, 70)
            q, k, v = _inputs(1000 + n, b, h, n, d, dv)
            want, bound = exact(kernel, q, k, v)
            o1, st = target.stateful(*(_torch(x[:, :, :cut]) for x in (q, k, v)))
            o2, _ = target.stateful(*(_torch(x[:, :, cut:]) for x in (q, k, v)),
                                    initial_state=st)
            got = np.concatenate([_np(o1), _np(o2)], axis=2)
            ratio = float((np.abs(got - want) / bound).max())
            worst[kernel] = max(worst[kernel], ratio)
            lines.append(f"{kernel:28s} T={n} split at {cut} (state carried): "
                         f"max err/bound = {ratio:.3f}")
            cu = [0, 7, 7 + 50, n]  # three sequences, one crossing the 64-token chunk edge
            got = _np(target.varlen(*(_torch(x[:1]) for x in (q, k, v)),
                                    cu_seqlens=torch.tensor(cu, dtype=torch.int64))[0])
            ratio = 0.0
            for a, e in itertools.pairwise(cu):
                w_, bd = exact(kernel, *(x[:1, :, a:e] for x in (q, k, v)))
                ratio = max(ratio, float((np.abs(got[:, :, a:e] - w_) / bd).max()))
            worst[kernel] = max(worst[kernel], ratio)
            lines.append(f"{kernel:28s} packed {cu}: max err/bound = {ratio:.3f}")
        n = 65
        q, k, v = _inputs(2000 + n, b, h, n, d, dv)
        g = np.random.default_rng(7).standard_normal((b, h, n, dv))
        ins = [_torch(x, grad=True) for x in (q, k, v)]
        out = target.attention(*ins, causal=True)
        (out * _torch(g)).sum().backward()
        ref = [torch.tensor(x, requires_grad=True) for x in (q, k, v)]
        (_torch_exact(kernel, *ref) * torch.tensor(g)).sum().backward()
        bounds = gradient_bound(kernel, q, k, v, g)
        errs = [np.abs(_np(a.grad) - r.grad.numpy()) for a, r in zip(ins, ref, strict=True)]
        ratios = [float((err / bd).max()) for err, bd in zip(errs, bounds, strict=True)]
        sizes = [float(bd.max() / np.abs(r.grad.numpy()).max())
                 for bd, r in zip(bounds, ref, strict=True)]
        worst[kernel] = max(worst[kernel], *ratios)
        lines.append(f"{kernel:28s} T={n} gradients vs float64 autograd of the formula: max "
                     f"err/bound = q {ratios[0]:.3f}, k {ratios[1]:.3f}, v {ratios[2]:.3f} "
                     f"(bound / max|grad| = {sizes[0]:.1e}, {sizes[1]:.1e}, {sizes[2]:.1e})")
    ok = all(r <= 1 for r in worst.values())
    head = (f"d = {d}, d_v = {dv}, B = {b}, H = {h}, float32, Triton interpreter (NumPy on a CPU; "
            f"GPU rounding not exercised): every output and gradient within its derived bound: "
            f"{'yes' if ok else 'NO'} ({time.time() - t0:.0f} s)")
    return "\n".join([head, *lines])


def fla_rebased_eps(quick: bool = False) -> str:
    """``parallel_rebased`` divides by ``z_i + 1e-5`` with ``z_i = Σ_(j≤i) s_ij²``,
    ``s = qᵀk/√d``: with V ≡ 1 the output is ``z_i/(z_i + 1e-5)`` instead of 1.

    (1) Beyond rounding: nonnegative q, k (no cancellation in ``s``, so the derived float32
    bound of :func:`exact` is a few ulps relative) at small norms: the shortfall against the
    bound without its epsilon term. (2) How often at fla's setting: d = 16, T = 64, q, k with
    unit-variance entries (``s ≈ N(0, 1)``), independent seeds: the fraction of rows short of 1
    by more than 1e-3 (Wilson interval) and the float64 prediction ``z/(z + 1e-5)`` of the
    kernel's output (the second route)."""
    from kernel_verify.adapters.confirm import wilson

    target = next(t for t in ad.attention_targets if t.name == "fla.parallel_rebased")

    def run(q, k, v):
        return target(*(torch.tensor(x, dtype=torch.float32) for x in (q, k, v)), causal=True)

    import torch

    d, n = 16, 64
    rng = np.random.default_rng(0)
    q = np.abs(rng.standard_normal((1, 1, n, d))).astype(np.float32).astype(np.float64) * 0.02
    k = np.abs(rng.standard_normal((1, 1, n, d))).astype(np.float32).astype(np.float64) * 0.02
    v = np.ones((1, 1, n, 1))
    got = run(q, k, v)[0, 0, :, 0]
    s = np.tril(q @ np.swapaxes(k, -1, -2))[0, 0] / math.sqrt(d)
    z = (s * s).sum(-1)
    _, bound = exact("parallel_rebased", q, k, v)
    rounding = bound[0, 0, :, 0] - ad.EPS["rebased"] / z
    first = (f"(1) q, k ≥ 0 entrywise at scale 0.02, d = {d}, T = {n}, V ≡ 1: output "
             f"{got.min():.4f} … {got.max():.4f} (row 0: {got[0]:.4f}); shortfall / rounding "
             f"bound ≥ {float(((1 - got) / rounding).min()):.3g} on every row; the float64 "
             f"formula z/(z + 1e-5) predicts every output to "
             f"{float(np.abs(got - z / (z + ad.EPS['rebased'])).max()):.1e}")
    seeds = 8 if quick else 32
    short = rows = 0
    pred = 0.0
    for seed in range(seeds):
        q, k, _ = _inputs(seed, 1, 4, n, d, 1)
        v = np.ones((1, 4, n, 1))
        out = run(q, k, v)[..., 0]
        s = np.tril(q @ np.swapaxes(k, -1, -2)) / math.sqrt(d)
        z = (s * s).sum(-1)
        pred = max(pred, float(np.abs(out - z / (z + ad.EPS["rebased"])).max()))
        short += int((1 - out > 1e-3).sum())
        rows += out.size
    lo, hi = wilson(short, rows)
    second = (f"(2) d = {d}, T = {n}, H = 4, entries N(0, 1), {seeds} seeds: rows short of 1 by "
              f"more than 1e-3: {short}/{rows} = {short / rows:.3g} (95 % CI {lo:.3g} … "
              f"{hi:.3g}); float64 z/(z + 1e-5) predicts the kernel's output to {pred:.1e}")
    return first + "\n" + second


SHAPE_SCRIPT = """
import torch
from kernel_verify.adapters import fla
fn = fla.ops()[{kernel!r}]
for _ in range(20):
    q, k = torch.rand(1, 4, 2, 8), torch.rand(1, 4, 2, 8)
    fn(q, k, torch.randn(1, 3, 2, 2))  # v with 3 rows, q and k with 4
print("no abort")
"""


def fla_shape_overflow(quick: bool = False) -> str:
    """fla's linear-attention wrappers do not check that v has as many rows as q and k; the
    kernels then write past the end of the output buffer, which they allocate like v. Second
    route: fresh processes (without the adapter's shape check) each making 20 such calls;
    glibc's heap checks abort a process whose heap was overwritten. Reported: processes
    aborted out of those run (Wilson interval) and the messages."""
    import os
    import subprocess
    import sys

    from kernel_verify.adapters.confirm import wilson

    runs = 3 if quick else 5
    lines = []
    for kernel in ("chunk_linear_attn", "fused_recurrent_linear_attn"):
        env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
        aborted, msgs = 0, set()
        for _ in range(runs):
            p = subprocess.run([sys.executable, "-c", SHAPE_SCRIPT.format(kernel=kernel)],
                               capture_output=True, text=True, env=env, check=False)
            if p.returncode != 0:
                aborted += 1
                tail = [ln for ln in p.stderr.strip().splitlines() if ln.strip()]
                msgs.add(tail[-1][:80] if tail else f"exit {p.returncode}")
        lo, hi = wilson(aborted, runs)
        lines.append(f"{kernel}(q, k (1, 4, 2, 8), v (1, 3, 2, 2)) × 20 per process: "
                     f"{aborted}/{runs} processes aborted (95 % CI {lo:.2f} … {hi:.2f}): "
                     f"{'; '.join(sorted(msgs)) or '-'}")
    return "\n".join(lines)


MEASUREMENTS = {"fla_kernels_exact": fla_kernels_exact, "fla_rebased_eps": fla_rebased_eps,
                "fla_shape_overflow": fla_shape_overflow,
                # the gated kernels (simple GLA, GLA, retention): kernel_verify/adapters/fla_gated
                "fla_gated_exact": lambda quick=False: _gated_exact(quick),
                # the feature-map modules: kernel_verify/adapters/_fla_feature_maps.py
                "fla_rebased_map": _fm.fla_rebased_map,
                "fla_hedgehog_joint_softmax": _fm.fla_hedgehog_joint_softmax,
                "fla_polysketch_square": _fm.fla_polysketch_square}


def _gated_exact(quick: bool = False) -> str:
    from kernel_verify.adapters.fla_gated import fla_gated_exact

    return fla_gated_exact(quick)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m kernel_verify.adapters._fla_confirm")
    p.add_argument("name", choices=sorted(MEASUREMENTS))
    p.add_argument("--quick", action="store_true")
    a = p.parse_args(argv)
    print(MEASUREMENTS[a.name](a.quick))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
