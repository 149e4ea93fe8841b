"""nystrom-attention (lucidrains) as protocol targets: ``NystromAttention`` called as a layer.

Nyströmformer (Xiong et al. 2021; docs/math.md §8): with segment-mean landmarks ``Q̃``, ``K̃``
(``num_landmarks`` segments of ``l = ⌈n/num_landmarks⌉`` tokens),
``out = softmax(QK̃ᵀ/√d)·Z·softmax(Q̃Kᵀ/√d)·V`` where ``Z`` approximates
``softmax(Q̃K̃ᵀ/√d)⁺`` by ``pinv_iterations = 6`` steps of the iteration
``Z ← ¼Z(13I − AZ(15I − AZ(7I − AZ)))`` from ``Z₀ = Aᵀ/(max_col_sum·max_row_sum)``. When ``n`` is
not a multiple of ``num_landmarks`` the layer prepends zero tokens ("landmark padding"); a
``mask`` marks them as padding, without one they are attended to like real tokens.

The layer owns its projections, so the adapter feeds ``x = [q | k | v]`` (heads flattened,
``dim = 3·h·d``, ``dim_head = d``) through a layer whose ``to_qkv`` is the identity and whose
``to_out`` keeps the first ``h·d`` channels; ``residual=False`` (the depth-wise convolution of
``V`` is a learned add-on, not attention). Everything else — landmarks, padding, mask handling,
the iterative pseudo-inverse, the ``1/√d`` scale — is the library's code at its defaults.

Targets (no randomness: ``seed`` is ignored): ``nystrom_attention.NystromAttention`` (the default
``num_landmarks = 256``, so every test length is padded), ``…[mask]`` (same, with an all-True
``mask`` so the padding is masked) and ``…[no padding]`` (``num_landmarks`` the largest divisor of
``n`` that is ≤ 8, so no padding happens). None claims permutation equivariance or positive
weights: segment landmarks depend on the token order and ``Z`` has negative entries.
"""

from __future__ import annotations

import numpy as np

from kernel_verify.adapters._lazy import need
from kernel_verify.adapters.library import Finding, Library
from kernel_verify.properties.protocol import AttentionTarget

DEFAULT_LANDMARKS = 256  # NystromAttention's default
#: Seconds of one call of a layer with the default 256 landmarks at the suite's largest sizes
#: (b = h = 3, n = 12, d = 6): every test length is padded to 256 tokens and the pseudo-inverse
#: iterates on 256 × 256 matrices; measured 0.2 s of CPU per call (2-core machine; 0.001 s without
#: padding). Declared as ``call_seconds``: the ci profile runs fewer Hypothesis examples of each
#: property on those two targets, and each verdict says so.
PADDED_CALL_SECONDS = 0.2


def _divisor_landmarks(n: int, cap: int = 8) -> int:
    return max(k for k in range(1, min(n, cap) + 1) if n % k == 0)


def nystrom_layer(h: int, d: int, num_landmarks: int):
    """A float64 ``NystromAttention`` whose projections pass ``[q | k | v]`` through unchanged."""
    lib = need("nystrom_attention")
    import torch

    inner = h * d
    layer = lib.NystromAttention(dim=3 * inner, dim_head=d, heads=h,
                                 num_landmarks=num_landmarks, residual=False).double().eval()
    with torch.no_grad():
        layer.to_qkv.weight.copy_(torch.eye(3 * inner, dtype=torch.float64))
        out = layer.to_out[0]
        out.weight.zero_()
        out.weight[:inner, :].copy_(torch.eye(inner, dtype=torch.float64))
        out.bias.zero_()
    return layer


def run_layer(q, k, v, *, num_landmarks: int | None, mask: bool) -> np.ndarray:
    """``(b, h, n, d)`` attention output of the library's layer (see module docstring)."""
    import torch

    q, k, v = (np.asarray(a, dtype=np.float64) for a in (q, k, v))
    if not (q.shape == k.shape and k.shape[:-1] == v.shape[:-1]):
        raise ValueError(f"q, k, v shapes {q.shape}, {k.shape}, {v.shape}: the layer takes one "
                         "sequence [q | k | v] of one width")
    b, h, n, d = q.shape
    if v.shape[-1] != d:
        # The layer's values have the width of its queries (dim_head). Attention is linear in
        # v and its weights ignore v, so wider or narrower values go through in zero-padded
        # slices of width d.
        slices = range(0, v.shape[-1], d)
        outs = []
        for j in slices:
            part = v[..., j:j + d]
            part = np.concatenate([part, np.zeros((*part.shape[:-1], d - part.shape[-1]))], -1)
            outs.append(run_layer(q, k, part, num_landmarks=num_landmarks, mask=mask))
        return np.concatenate(outs, -1)[..., : v.shape[-1]]
    landmarks = _divisor_landmarks(n) if num_landmarks is None else num_landmarks
    layer = nystrom_layer(h, d, landmarks)
    x = np.concatenate([a.transpose(0, 2, 1, 3).reshape(b, n, h * d) for a in (q, k, v)], -1)
    kwargs = {"mask": torch.ones(b, n, dtype=torch.bool)} if mask else {}
    with torch.no_grad():
        out = layer(torch.as_tensor(x), **kwargs)[..., : h * d].numpy()
    return out.reshape(b, n, h, d).transpose(0, 2, 1, 3)


def attention(*, num_landmarks: int | None, mask: bool):
    def attn(q, k, v, *, causal: bool, seed: int) -> np.ndarray:
        if causal:
            raise ValueError("NystromAttention has no causal mode")
        return run_layer(q, k, v, num_landmarks=num_landmarks, mask=mask)

    return attn


# ---------------------------------------------------------------------- the library's record
# What is known about the library (kernel_verify.adapters.library): the conformance page's text,
# the confirmed findings (its known failures derive from them) and their measurements.
_RIGHT = (
    "With each token its own landmark the layer approximates softmax attention (within "
    "2e-2 at n = 4 after the 6-step pseudo-inverse; tests/test_adapters.py); passing "
    "`mask=` keeps the landmark padding out: with v ≡ 1 the output is 1 to within 1e-4 on "
    "average at n = 4000 (finding 1); outputs stay finite over the input-scale sweep.")
_MINOR = (
    "The layer owns its q/k/v projections; the adapter sets them to the identity and turns "
    "off the depth-wise convolution residual (`residual=False`), so what is tested is the "
    "attention itself. The layer takes one sequence, so the shape checks that pass are the "
    "adapter's, not the library's.")
_FINDINGS = (
    Finding(
        "Landmark padding is attended to when no mask is passed (the default)",
        "nystrom_padding",
        "`forward` prepends `num_landmarks − n mod num_landmarks` zero tokens; only a "
        "`mask` keeps them out of the softmaxes. With `mask=None` (the default) "
        "the zero keys get score 0 and value 0, so every output "
        "is shrunk towards 0 by their attention weight, and the first landmark averages "
        "real and padded tokens.",
        "When `mask` is None and padding is added, build `mask = torch.ones(b, n)` before "
        "padding (so the existing masked path runs), or pad with a mask internally.",
        ()),
    Finding(
        "The iterative pseudo-inverse couples batch elements and heads",
        "nystrom_batch_coupling",
        "`moore_penrose_iter_pinv` starts from Z₀ = Aᵀ/(max col sum · max row sum) with "
        "`torch.max` over the whole tensor (every batch element and head), and 6 "
        "iterations do not converge from a start that is too small; so the output of one "
        "sequence depends on what else is in the batch.",
        "`col = abs_x.sum(-1).amax(-1, keepdim=True)`, `row = abs_x.sum(-2).amax(-1, "
        "keepdim=True)` and divide per matrix: `z = x.transpose(-1, -2) / (col * row)"
        ".unsqueeze(-1)`.",
        ("test_batch_elements_and_heads_are_independent",)),
)
LIBRARY = Library(
    key="nystrom_attention", title="nystrom-attention", module="nystrom_attention",
    dist="nystrom-attention", extra="nystrom",
    dependencies=("einops",),
    right=_RIGHT,
    minor=_MINOR,
    findings=_FINDINGS,
    confirmations=("nystrom_padding", "nystrom_batch_coupling"),
)


#: The iterative pseudo-inverse's start couples batch elements and heads, in all three
#: configurations (the record's finding ``nystrom_batch_coupling``).
KNOWN = LIBRARY.known_failures()

targets = [
    AttentionTarget("nystrom_attention.NystromAttention",
                    attention(num_landmarks=DEFAULT_LANDMARKS, mask=False), frozenset(),
                    known_failures=KNOWN, call_seconds=PADDED_CALL_SECONDS),
    AttentionTarget("nystrom_attention.NystromAttention[mask]",
                    attention(num_landmarks=DEFAULT_LANDMARKS, mask=True), frozenset(),
                    known_failures=KNOWN, call_seconds=PADDED_CALL_SECONDS),
    AttentionTarget("nystrom_attention.NystromAttention[no padding]",
                    attention(num_landmarks=None, mask=False), frozenset(),
                    known_failures=KNOWN),
]


# ---------------------------------------------------------- independent confirmations
# The measurements of LIBRARY.confirmations (python -m kernel_verify.adapters.confirm NAME):
# each finding re-measured by a second route, with its 95 % interval.
def _nystrom(q, k, v, landmarks: int, mask: bool) -> np.ndarray:
    from kernel_verify.adapters.nystrom_attention import run_layer

    return run_layer(q, k, v, num_landmarks=landmarks, mask=mask)


def nystrom_padding(quick: bool = False) -> str:
    """Without a mask, the zero tokens prepended to pad ``n`` to a multiple of
    ``num_landmarks`` are attended to as real keys with value 0. With ``v ≡ 1`` every correct
    attention returns 1; the shortfall is the weight on the padding."""
    from kernel_verify.adapters.confirm import fmt_ci, mean_ci
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
    from kernel_verify.adapters.confirm import fmt_ci, mean_ci
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
