"""performer-pytorch (lucidrains) as protocol targets, called as its users call it.

FAVOR+ (Choromanski et al. 2021; docs/math.md §2, §9): ``FastAttention(dim_heads, nb_features,
ortho_scaling=0, causal, generalized_attention)`` draws its projection from
``gaussian_orthogonal_random_matrix`` (blocks of ``Qᵀ`` from ``torch.linalg.qr`` of a Gaussian
block, rows rescaled by the norms of independent Gaussian rows (``scaling=0``) or by ``√d``
(``scaling=1``)) and computes

* ``softmax_kernel``: ``φ(x) = m^(−1/2)·(exp(ωᵀx' − ‖x'‖²/2 − c) + ε)``, ``x' = d^(−1/4)x``,
  ``ε = 1e-4``, ``c`` the maximum of ``ωᵀx'`` over the features of each query row, and over all
  features *and all positions* for keys;
* ``generalized_kernel``: ``φ(x) = ReLU(ωᵀx') + 0.001``;
* non-causal ``linear_attention`` (``D⁻¹φ(Q)(φ(K)ᵀV)``) and, for ``causal=True``, the CUDA
  ``CausalDotProduct`` of fast-transformers when it imports, else
  ``causal_linear_attention_noncuda`` (prefix sums; the denominator gets ``+1e-6``).

Targets (all draws seeded through torch's global generator, restored afterwards):

* ``performer.gaussian_orthogonal_random_matrix`` (``scaling=0``): random-matrix target claiming
  Gaussian rows and orthogonal blocks, as the paper's ORF construction does;
* ``performer.gaussian_orthogonal_random_matrix[scaling=1]``: orthogonal blocks, fixed norms;
* ``performer.FastAttention`` and ``…[causal]``: black-box attention at the library's defaults
  (``nb_features = ⌊d·ln d⌋``, at least 1, unless the property asks for ``m``), drawn and
  computed in float64 (``torch.set_default_dtype``; the protocol's precision);
* ``performer.FastAttention[generalized]``: ReLU generalized attention (not softmax).

No forms (docs/math.md §13): causal ``FastAttention`` has no state API — no initial or final
state, no one-token step — so the targets declare none and the forms-and-state properties skip.
"""

from __future__ import annotations

import contextlib
import io
import math

import numpy as np

from kernel_verify.adapters._lazy import need
from kernel_verify.adapters._torchseed import as_torch, torch_seeded
from kernel_verify.adapters.library import Finding, Library
from kernel_verify.properties.protocol import AttentionTarget, RandomMatrixTarget


@contextlib.contextmanager
def float64_default():
    """The library draws with ``torch.randn`` in torch's default dtype: make it float64 (the
    protocol's precision), as a user does with ``torch.set_default_dtype``; restored after."""
    import torch

    old = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        yield
    finally:
        torch.set_default_dtype(old)


def default_nb_features(d: int) -> int:
    """FastAttention's default ``int(d·ln d)``, which is 0 for d = 1 (the library then fails in
    ``torch.cat`` on an empty list; reported on the conformance page): at least 1 here."""
    return max(1, int(d * math.log(d)))


def orthogonal_matrix(scaling: int):
    """``draw(rng, m, d)`` through ``gaussian_orthogonal_random_matrix(m, d, scaling)``."""

    def draw(rng: np.random.Generator, m: int, d: int) -> np.ndarray:
        lib = need("performer", "performer_pytorch")
        with torch_seeded(int(rng.integers(2**62))), float64_default():
            w = lib.gaussian_orthogonal_random_matrix(m, d, scaling=scaling)
        return w.double().numpy()

    return draw


def fast_attention(*, generalized: bool = False):
    """``attention(q, k, v, causal, seed, m=None)`` through ``FastAttention`` in float64."""

    def attention(q, k, v, *, causal: bool, seed: int, m: int | None = None) -> np.ndarray:
        lib = need("performer", "performer_pytorch")
        import torch

        d = q.shape[-1]
        with (torch_seeded(seed), float64_default(),
              contextlib.redirect_stdout(io.StringIO())):
            # the constructor prints a notice when the CUDA causal kernel is unavailable
            module = lib.FastAttention(d, nb_features=m or default_nb_features(d),
                                       causal=causal, generalized_attention=generalized)
        try:
            if isinstance(q, torch.Tensor):  # torch in, torch out: differentiable by autograd
                return module.to(q.device)(q, k, v)
            tq, tk, tv = as_torch(q, k, v)
            with torch.no_grad():
                return module(tq, tk, tv).numpy()
        except RuntimeError as err:  # torch's shape errors: the protocol's ValueError
            raise ValueError(str(err)) from err

    return attention


#: What the library's backward is known to get wrong (docs/math.md §14): ``softmax_kernel``
#: subtracts a *detached* maximum of ``ωᵀx'`` and then adds ``ε = 1e-4``, so the shift no longer
#: cancels and the forward depends on the maximising entry through a path the backward drops.
#: Measured: float64 central differences and autograd differ by about 1 % (gradcheck, fast mode,
#: d = 4, m = 16, causal and non-causal).
GRADIENT_KNOWN = {
    "test_gradcheck_float64_attention": "performer-pytorch's softmax_kernel subtracts a detached "
    "max and then adds eps=1e-4: the backward is not the derivative of the forward (about 1 % "
    "off, measured with central differences)",
}
#: FastAttention takes torch tensors (float64, the protocol's precision) and autograd gives its
#: gradients: the targets take torch tensors only (the library is torch; NumPy input would only
#: be converted), so every property runs once, on torch, and the gradient properties run
#: (properties/test_gradients.py).
GRADIENTS = frozenset({"differentiable", "deterministic_backward"})

targets = [
    RandomMatrixTarget("performer.gaussian_orthogonal_random_matrix", orthogonal_matrix(0),
                       frozenset({"gaussian_rows", "orthogonal"})),
    RandomMatrixTarget("performer.gaussian_orthogonal_random_matrix[scaling=1]",
                       orthogonal_matrix(1), frozenset({"orthogonal"})),
    AttentionTarget("performer.FastAttention", fast_attention(),
                    frozenset({"noncausal", "positive_weights", "approximates_softmax"})
                    | GRADIENTS, backends=("torch",), known_failures=GRADIENT_KNOWN),
    AttentionTarget("performer.FastAttention[causal]", fast_attention(),
                    frozenset({"causal", "positive_weights", "approximates_softmax"}) | GRADIENTS,
                    backends=("torch",), known_failures=GRADIENT_KNOWN),
    AttentionTarget("performer.FastAttention[generalized]", fast_attention(generalized=True),
                    frozenset({"noncausal", "causal", "positive_weights"}) | GRADIENTS,
                    backends=("torch",)),
]


# ---------------------------------------------------------------------- the library's record
# What is known about the library (kernel_verify.adapters.library): the conformance page's text,
# the confirmed findings (its known failures derive from them) and their measurements.
_RIGHT = (
    "`gaussian_orthogonal_random_matrix` rows are orthogonal within blocks to float64 "
    "rounding and the draws are reproducible; non-causal `FastAttention` is a partition "
    "of unity (outputs are convex combinations of the values), treats batch elements and "
    "heads independently, is permutation equivariant, and stays finite over the input-"
    "scale sweep; generalized (ReLU) attention is causal. On a CPU the causal mode always "
    "uses `causal_linear_attention_noncuda` (the fast-transformers CUDA kernel does not "
    "import); it prints a notice at construction.")
_MINOR = (
    "`FastAttention(dim_heads=1)` with the default `nb_features = int(d·ln d)` = 0 fails in "
    "`torch.cat` on an empty list (head dimension 1 only; the adapter uses at least 1 "
    "feature). `gaussian_orthogonal_random_matrix` draws in torch's default dtype: in "
    "float32 its rows are orthogonal only to float32 rounding "
    "(|wᵢᵀwⱼ| = 1.5e-10 at d = 2 against the float64 bound 2.1e-16); the adapter sets "
    "the default dtype to float64 so that the suite's float64 bounds apply. Causal "
    "`FastAttention` has no state API — no initial or final state, no one-token step "
    "(`causal_linear_attention_noncuda` recomputes its prefix sums from the whole "
    "sequence) — so the adapter declares no forms and the forms-and-state properties "
    "(properties/test_attention_forms.py) are skipped for it with that reason.")
_FINDINGS = (
    Finding(
        "gaussian_orthogonal_random_matrix: rows are not sign-symmetric (no QR sign fix)",
        "performer_orf_signs",
        "`orthogonal_matrix_chunk` returns Qᵀ from `torch.linalg.qr` of a Gaussian block "
        "without multiplying by diag(sign Rᵢᵢ), so Q is not Haar-distributed (Mezzadri "
        "2007): row i of each block has its i-th coordinate negative with probability 1 "
        "(row 0) down to ≈ 1/3 (last row). Rows are therefore not marginally N(0, I), "
        "which the ORF estimator's unbiasedness rests on (Performer, Theorem 2). For a "
        "query or key along a coordinate axis the kernel estimate is biased; the exact "
        "predicted bias at x = 0.5·e₁, m = 256, d = 64 is −(4/256)·(1 − 2Φ(−1)) = −1.07 % "
        "(row 0 of the 4 blocks only).",
        "In `orthogonal_matrix_chunk`: `q, r = torch.linalg.qr(block); q = q * "
        "torch.sign(torch.diagonal(r)).unsqueeze(-2)` before `q.t()` (one line).",
        ("test_rows_are_standard_gaussian",)),
    Finding(
        "softmax_kernel: ε = 1e-4 added after the global key shift turns attention uniform",
        "performer_eps",
        "Key features are exp(ωᵀk' − ‖k'‖²/2 − c) + ε with c the maximum of ωᵀk' over all "
        "features and positions. At unit-variance inputs (d = 64, ‖k'‖² ≈ 8, c ≈ 14 at "
        "n = 4096) the exponential is ~1e-8 for almost every key feature, so ε dominates "
        "and every key gets (almost) the same features: the output is the plain average of "
        "v. The shift itself is harmless (shared by all keys, it cancels); the ε added "
        "after it does not cancel, and its effect depends on n through c.",
        "Scale ε with the features it is added to (exp(a − c) + ε·exp(−c), i.e. add it "
        "before the shift, where it is negligible), or drop it and guard only the "
        "denominator, or compute in log space (two softmaxes, no ε; docs/math.md §9). "
        "Note the ε = 0 estimator is itself very noisy at these norms "
        "(relative error ≈ 4): what users get from the library is mean pooling.",
        ("test_large_scale_keeps_the_argmax_value",
         "test_error_to_softmax_attention_falls_as_m_grows")),
    Finding(
        "FastAttention(causal=True): past outputs depend on future keys",
        "performer_causal_leak",
        "The key stabiliser c = max over *all* positions of ωᵀk' (`amax(dim=(-1, -2))`) is "
        "computed before the prefix sums, so changing keys after position i changes c, "
        "hence the relative size of ε in every key feature, hence outputs at positions "
        "≤ i. Without ε the shift would cancel; with it, causality is broken.",
        "Take the key maximum per prefix (or a constant bound such as ‖k'‖·max‖ω‖), or "
        "drop ε (see the previous finding); both restore causality.",
        ("test_past_outputs_ignore_the_future",)),
    Finding(
        "Causal path: 1e-6 added to the denominator only shrinks outputs towards 0",
        "performer_causal_denominator",
        "`causal_linear_attention_noncuda` (the path every CPU user gets) computes "
        "D = φ(q)·(Σ_(j≤i) φ(k_j) + 1e-6) but the numerator without the 1e-6, so the "
        "weights sum to less than 1: with v ≡ 1 the output is below 1. The shortfall is "
        "large where the prefix sums are small — the first positions, and every position "
        "when softmax_kernel's ε dominates the key features (each ≈ 1e-4/√m).",
        "Add the same term to the numerator's prefix sum or, better, guard the denominator "
        "only against 0 (`D.clamp_min(tiny)`) instead of shifting it.",
        ("test_partition_of_unity", "test_outputs_are_convex_combinations_of_visible_values")),
)
LIBRARY = Library(
    key="performer", title="performer-pytorch", module="performer_pytorch",
    dist="performer-pytorch", extra="performer",
    dependencies=("einops", "local-attention", "axial-positional-embedding"),
    right=_RIGHT,
    minor=_MINOR,
    findings=_FINDINGS,
    confirmations=("performer_orf_signs",
                   "performer_eps",
                   "performer_causal_leak",
                   "performer_causal_denominator"),
)


# ---------------------------------------------------------- independent confirmations
# The measurements of LIBRARY.confirmations (python -m kernel_verify.adapters.confirm NAME):
# each finding re-measured by a second route, with its 95 % interval.
def performer_orf_signs(quick: bool = False) -> str:
    """Rows of ``gaussian_orthogonal_random_matrix`` are not sign-symmetric: the i-th row of each
    block has its i-th coordinate negative far more often than 1/2 (row 0: always), because
    ``torch.linalg.qr`` returns Householder Q without the sign correction ``Q·diag(sign R_ii)``
    (Mezzadri 2007). Second route: the suite's own ORF draw (sign-corrected), same test."""
    from performer_pytorch.performer_pytorch import gaussian_orthogonal_random_matrix as gorm

    from kernel_verify.adapters.confirm import fmt_ci, mean_ci, wilson
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

    from kernel_verify.adapters.confirm import exact_softmax_attention, fmt_ci, mean_ci

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

    from kernel_verify.adapters.confirm import fmt_ci, mean_ci

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

    from kernel_verify.adapters.confirm import fmt_ci, mean_ci

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
