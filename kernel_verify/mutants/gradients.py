"""Gradient mutants (docs/math.md §14): the forward is right, the backward is wrong.

Each defect is a hand-written ``torch.autograd.Function`` (the way fused kernels ship their own
backward), so every forward property passes and only ``properties/test_gradients.py`` can see it:

* ``grad_positive_drops_minus_x``: SM⁺ features whose backward drops the ``−x`` term of
  ``−‖x‖²/2`` (``∂φ_f/∂x = φ_f·w_f`` instead of ``φ_f(w_f − x)``);
* ``grad_positive_scale_wrong``: the ``m^(−1/2)`` right in the forward, missing in the backward;
* ``grad_positive_float16_backward``: the right backward formula accumulated in float16;
* ``grad_causal_backward_sees_future``: causal softmax attention whose backward is the
  non-causal one (keys and values after position i receive gradient from o_i);
* ``grad_normaliser_detached``: causal linear attention (positive features) whose normaliser
  ``D_i = Σ_j a_ij`` is detached in the backward.

Feature-map mutants come white-box (``draw`` + ``torch_fn``, formula ``softmax_positive``) and
black-box (``sample_fn`` taking torch tensors); attention mutants are black-box
``AttentionTarget``s on torch float64. Controls (:data:`GRADIENT_CONTROLS`, spec
``kernel_verify.mutants.gradients:control_<name>``) are the same custom functions with the
right backward: they must pass.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np

from kernel_verify.properties.protocol import AttentionTarget, FeatureMapTarget, Target
from kernel_verify.verify import seeds

_CLAIMS = frozenset({"unbiased", "positive", "gaussian_rows", "psd_kernel", "differentiable",
                     "deterministic_backward"})
_ATT = frozenset({"causal", "positive_weights", "differentiable", "deterministic_backward"})


_CALLS = itertools.count()


def _rotating_matmul(a, b):
    """``a @ b`` summed over the inner index in an order that rotates from call to call: the
    result differs in its last bits between calls, as a reduction by atomic adds in arrival
    order (a GPU kernel's ``atomicAdd`` into one accumulator) does."""
    import torch

    k = a.shape[-1]
    start = next(_CALLS) % k
    out = torch.zeros(*a.shape[:-1], b.shape[-1], dtype=a.dtype, device=a.device)
    for j in [*range(start, k), *range(start)]:
        out = out + a[..., j:j + 1] * b[..., j:j + 1, :]
    return out


def _positive_function(mode: str):
    """``φ = exp(Wx − ‖x‖²/2)/√m`` with a hand-written backward (``mode``: ``right``,
    ``no_minus_x``, ``no_scale``, ``float16``, ``jvp_right``/``jvp_no_minus_x``: the right
    backward and a hand-written forward-mode rule, right or without the ``−xᵀdx`` term,
    ``rows_summed``: the ``Σ_f`` of the ``−x`` term
    taken over every row too (a reduction without its axis), ``atomic_order``: the product with
    ``W`` accumulated in a call-dependent order)."""
    import torch

    class Positive(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, w):
            phi = torch.exp(x @ w.T - 0.5 * (x * x).sum(-1, keepdim=True)) / np.sqrt(w.shape[0])
            ctx.save_for_backward(x, w, phi)
            if mode in ("jvp_right", "jvp_no_minus_x"):
                ctx.save_for_forward(x, w, phi)
            return phi

        @staticmethod
        def jvp(ctx, tx, tw):
            """Forward mode ``dφ = φ ⊙ (W·dx − xᵀdx)`` (``jvp_no_minus_x``: without ``xᵀdx``);
            ``W`` is a constant (its tangent is ignored)."""
            if mode not in ("jvp_right", "jvp_no_minus_x"):
                raise NotImplementedError("no forward-mode rule")
            x, w, phi = ctx.saved_tensors
            inner = tx @ w.T
            if mode == "jvp_right":
                inner = inner - (x * tx).sum(-1, keepdim=True)
            return phi * inner

        @staticmethod
        def backward(ctx, g):
            x, w, phi = ctx.saved_tensors
            if mode == "float16":
                gp = (g.half() * phi.half())
                return (gp @ w.half() - gp.sum(-1, keepdim=True) * x.half()).to(x.dtype), None
            gp = g * phi
            if mode == "no_scale":
                gp = gp * np.sqrt(w.shape[0])
            grad = _rotating_matmul(gp, w) if mode == "atomic_order" else gp @ w
            if mode == "rows_summed":
                grad = grad - gp.sum() * x
            elif mode != "no_minus_x":
                grad = grad - gp.sum(-1, keepdim=True) * x
            if mode == "scaled_1_1":
                grad = grad * 1.1
            return grad, None

    return Positive.apply


def _positive_targets(name: str, mode: str) -> list[Target]:
    def draw(rng: np.random.Generator, d: int, m: int, config: Any) -> dict:
        return {"W": rng.standard_normal((m, d))}

    def apply(x, w):
        # half types computed in float32 and cast back (the project's policy): the forward is
        # right in every dtype
        import torch

        work = torch.float32 if x.dtype in (torch.float16, torch.bfloat16) else x.dtype
        w = torch.as_tensor(w).to(dtype=work, device=x.device)
        return _positive_function(mode)(x.to(work), w).to(x.dtype)

    def torch_fn(x, params, config):
        return apply(x, params["W"])

    def sample_fn(x, seed: int):
        import torch

        w = seeds.rng(seed).standard_normal((16, x.shape[-1]))
        if isinstance(x, np.ndarray):
            return apply(torch.as_tensor(x, dtype=torch.float64), w).detach().numpy()
        return apply(x, w)

    def numpy_fn(x, params, config):
        w = params["W"]
        return np.exp(x @ w.T - 0.5 * np.sum(x * x, -1, keepdims=True)) / np.sqrt(w.shape[0])

    white = FeatureMapTarget(f"{name}@whitebox", "softmax", _CLAIMS, draw=draw,
                             numpy_fn=numpy_fn, torch_fn=torch_fn, formula="softmax_positive",
                             matrix="iid", m=16)
    black = FeatureMapTarget(f"{name}@blackbox", "softmax", _CLAIMS, sample_fn=sample_fn, m=16,
                             formula="softmax_positive", matrix="iid")
    return [white, black]


def _causal_softmax_function(mode: str):
    """Causal softmax attention with a hand-written backward (``right``; ``future``: the
    gradient of the non-causal attention; ``batch_summed``: ∂L/∂k and ∂L/∂v summed over the
    batch, as if k and v were parameters broadcast over it; ``unshifted``: the backward
    recomputes the softmax as ``exp(s)/Σexp(s)`` without subtracting the row maximum, so it
    overflows where the forward does not; ``atomic_order``: ``∂L/∂v = Aᵀg`` accumulated over the
    queries in a call-dependent order; ``jvp_right``/``jvp_weights_constant``: the right backward
    and a hand-written forward-mode rule, right or with the attention weights held constant;
    ``lowp_unscaled``: inputs narrower than float64 (float32 included) take a separate backward
    path, as a kernel dispatching per dtype does, whose chain rule through ``S = QKᵀ/√d`` leaves
    out the ``1/√d`` in ``∂L/∂q`` and ``∂L/∂k``; the float64 path is right)."""
    import torch

    def plain(q, k, v, causal, shift=True):
        s = q @ k.transpose(-1, -2) / np.sqrt(q.shape[-1])
        if causal:
            n = s.shape[-1]
            s = s.masked_fill(torch.ones(n, n, dtype=torch.bool, device=s.device).triu(1),
                              float("-inf"))
        if not shift:
            e = torch.exp(s)
            return (e / e.sum(-1, keepdim=True)) @ v
        return torch.softmax(s, dim=-1) @ v

    class Causal(torch.autograd.Function):
        @staticmethod
        def forward(ctx, q, k, v):
            ctx.save_for_backward(q, k, v)
            if mode in ("jvp_right", "jvp_weights_constant"):
                ctx.save_for_forward(q, k, v)
            return plain(q, k, v, True)

        @staticmethod
        def jvp(ctx, tq, tk, tv):
            """Forward mode ``dO = dA·V + A·dV`` with ``dA = A ⊙ (dS − rowsum(A ⊙ dS))``,
            ``dS = (dQ·Kᵀ + Q·dKᵀ)/√d`` masked like ``S`` (``jvp_weights_constant``: ``A·dV``
            only, the weights treated as constants)."""
            if mode not in ("jvp_right", "jvp_weights_constant"):
                raise NotImplementedError("no forward-mode rule")
            q, k, v = ctx.saved_tensors
            n = q.shape[-2]
            future = torch.ones(n, n, dtype=torch.bool, device=q.device).triu(1)
            s = (q @ k.transpose(-1, -2) / np.sqrt(q.shape[-1])).masked_fill(future,
                                                                             float("-inf"))
            a = torch.softmax(s, dim=-1)
            out = a @ tv
            if mode == "jvp_right":
                ds = ((tq @ k.transpose(-1, -2) + q @ tk.transpose(-1, -2))
                      / np.sqrt(q.shape[-1])).masked_fill(future, 0.0)
                da = a * (ds - (a * ds).sum(-1, keepdim=True))
                out = out + da @ v
            return out

        @staticmethod
        def backward(ctx, g):
            q, k, v = (t.detach().requires_grad_(True) for t in ctx.saved_tensors)
            with torch.enable_grad():
                out = plain(q, k, v, mode != "future", shift=mode != "unshifted")
                gq, gk, gv = torch.autograd.grad(out, (q, k, v), g)
            if mode == "lowp_unscaled" and g.dtype != torch.float64:
                # the reduced-precision kernel's chain rule through S = QKᵀ/√d without the 1/√d
                gq, gk = gq * np.sqrt(q.shape[-1]), gk * np.sqrt(q.shape[-1])
            if mode == "batch_summed":
                gk, gv = (a.sum(0, keepdim=True).expand_as(a) for a in (gk, gv))
            if mode == "atomic_order":
                s = q.detach() @ k.detach().transpose(-1, -2) / np.sqrt(q.shape[-1])
                n = s.shape[-1]
                s = s.masked_fill(torch.ones(n, n, dtype=torch.bool, device=s.device).triu(1),
                                  float("-inf"))
                gv = _rotating_matmul(torch.softmax(s, dim=-1).transpose(-1, -2), g)
            return gq, gk, gv

    return Causal.apply


def _attention_call(fn: Callable) -> Callable:
    def attention(q, k, v, *, causal: bool, seed: int = 0, **_: Any):
        import torch

        if isinstance(q, np.ndarray):
            tq, tk, tv = (torch.as_tensor(a, dtype=torch.float64) for a in (q, k, v))
            with torch.no_grad():
                return fn(tq, tk, tv, seed).numpy().astype(q.dtype, copy=False)
        return fn(q, k, v, seed)

    return attention


def _softmax_target(name: str, mode: str,
                    dtypes: tuple[str, ...] = ("float64",)) -> list[Target]:
    return [AttentionTarget(name, _attention_call(
        lambda q, k, v, seed: _causal_softmax_function(mode)(q, k, v)), _ATT,
        backends=("numpy", "torch"), dtypes=dtypes, feature_count=0)]


def _half_softmax_target(name: str, factors: dict[str, float]) -> list[Target]:
    """Causal softmax attention (the right hand-written backward) taking float64, float16 and
    bfloat16, half inputs computed in float32 and the output rounded once (claims
    ``half_in_float32``, ``feature_count = 0``); ``factors`` scale ∂L/∂q, ∂L/∂k, ∂L/∂v of half
    inputs only (a half-precision kernel's backward off by a constant factor)."""
    import torch

    def fn(q, k, v, seed):
        if q.dtype in (torch.float16, torch.bfloat16):
            if factors:
                q, k, v = _grad_scale(factors)(q, k, v)
            out = _causal_softmax_function("right")(q.float(), k.float(), v.float())
            return out.to(v.dtype)
        return _causal_softmax_function("right")(q, k, v)

    return [AttentionTarget(name, _attention_call(fn), _ATT | {"half_in_float32"},
                            backends=("numpy", "torch"),
                            dtypes=("float64", "float16", "bfloat16"), feature_count=0)]


_LOG_CLAIMS = _CLAIMS | {"log_features"}


def _log_positive_function(mode: str):
    """``log φ = Wx − ‖x‖²/2 − ½ log m`` with a hand-written backward (``mode``: ``right``,
    ``∂/∂x Σ_f g_f log φ_f = Σ_f g_f (w_f − x)``; ``no_minus_x``: ``Σ_f g_f w_f``, the ``−x`` of
    ``−‖x‖²/2`` dropped; ``via_phi``: the chain rule of the logarithm through the plain
    features, ``∂ log φ = ∂φ/φ``: the upstream gradient ``g/φ`` handed to the plain map's
    backward ``(g/φ ⊙ φ)W − Σ_f (g/φ ⊙ φ)_f·x``, with ``φ = exp(log φ)`` recomputed in the
    compute dtype. Mathematically the right gradient; where ``φ`` underflows (float32 at
    input norms ≳ 13: ``exp(−‖x‖²/2)`` below the smallest subnormal) it is ``0/0``)."""
    import torch

    class LogPositive(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, w):
            ctx.save_for_backward(x, w)  # not the output: callers may update it in place
            return x @ w.T - 0.5 * (x * x).sum(-1, keepdim=True) - 0.5 * np.log(w.shape[0])

        @staticmethod
        def backward(ctx, g):
            x, w = ctx.saved_tensors
            if mode == "via_phi":
                phi = torch.exp(x @ w.T - 0.5 * (x * x).sum(-1, keepdim=True)
                                - 0.5 * np.log(w.shape[0]))
                gp = (g / phi) * phi
                return gp @ w - gp.sum(-1, keepdim=True) * x, None
            grad = g @ w
            if mode != "no_minus_x":
                grad = grad - g.sum(-1, keepdim=True) * x
            return grad, None

    return LogPositive.apply


def _log_positive_targets(name: str, mode: str) -> list[Target]:
    """A white-box SM⁺ map offering ``log φ`` (claim ``log_features``: the suite's attention
    runs the log-space path on it) whose torch ``log φ`` has the hand-written backward of
    :func:`_log_positive_function`; ``φ = exp(log φ)``. Half types are computed in float32 and
    cast back (the forward is right in every dtype)."""
    import torch

    def draw(rng: np.random.Generator, d: int, m: int, config: Any) -> dict:
        return {"W": rng.standard_normal((m, d))}

    def log_torch_fn(x, params, config):
        work = torch.float32 if x.dtype in (torch.float16, torch.bfloat16) else x.dtype
        w = torch.as_tensor(params["W"]).to(dtype=work, device=x.device)
        return _log_positive_function(mode)(x.to(work), w).to(x.dtype)

    def torch_fn(x, params, config):
        return torch.exp(log_torch_fn(x, params, config))

    def log_numpy_fn(x, params, config):
        w = params["W"]
        return x @ w.T - 0.5 * np.sum(x * x, -1, keepdims=True) - 0.5 * np.log(w.shape[0])

    def numpy_fn(x, params, config):
        return np.exp(log_numpy_fn(x, params, config))

    return [FeatureMapTarget(f"{name}@whitebox", "softmax", _LOG_CLAIMS, draw=draw,
                             numpy_fn=numpy_fn, torch_fn=torch_fn, log_numpy_fn=log_numpy_fn,
                             log_torch_fn=log_torch_fn, formula="softmax_positive",
                             matrix="iid", m=16)]


def _linear_detached(q, k, v, seed: int, detach: bool):
    """Causal FAVOR+ (positive features, m = 32, seeded W) in log space, with the normaliser
    optionally detached in the backward (the forward value is the same either way).

    ``ℓ_ij = logsumexp_f(log φ(q_i)_f + log φ(k_j)_f)`` (−∞ above the diagonal), the detached row
    maximum ``c_i`` subtracted (an exact rescaling), ``e_ij = exp(ℓ_ij − c_i)``,
    ``o_i = Σ_j e_ij v_j / D_i``, ``D_i = Σ_j e_ij ≥ 1``: finite at any input scale."""
    import torch

    d = q.shape[-1]
    w = torch.as_tensor(seeds.rng(seed).standard_normal((32, d)), dtype=q.dtype,
                        device=q.device)

    def log_feats(x):
        x = x * d**-0.25
        return x @ w.T - 0.5 * (x * x).sum(-1, keepdim=True) - 0.5 * np.log(32)

    lq, lk = log_feats(q), log_feats(k)
    pair = torch.logsumexp(lq.unsqueeze(-2) + lk.unsqueeze(-3), dim=-1)  # (..., n, n)
    n = pair.shape[-1]
    pair = pair.masked_fill(torch.ones(n, n, dtype=torch.bool, device=q.device).triu(1),
                            float("-inf"))
    e = torch.exp(pair - pair.detach().amax(dim=-1, keepdim=True))
    den = e.sum(-1, keepdim=True)
    return (e @ v) / (den.detach() if detach else den)


def _linear_target(name: str, detach: bool) -> list[Target]:
    return [AttentionTarget(name, _attention_call(
        lambda q, k, v, seed: _linear_detached(q, k, v, seed, detach)), _ATT,
        backends=("numpy", "torch"))]


# ------------------------------------------------ float32 Taylor linear attention (issue #29)
def taylor_features_np(x: np.ndarray, coef: float = 0.5) -> np.ndarray:
    """Exact float64 Taylor features with ``φ(x)ᵀφ(y) = 1 + t + coef·t²``, ``t = xᵀy/√d``:
    ``[1, x/d^¼, √coef·x_i²/√d, √(2coef)·(x_i x_j)_(i<j)/√d]`` (Based's map at coef = 1/2)."""
    x = np.asarray(x, dtype=np.float64)
    d = x.shape[-1]
    iu = np.triu_indices(d, 1)
    outer = x[..., :, None] * x[..., None, :]
    return np.concatenate([np.ones_like(x[..., :1]), x / d**0.25,
                           np.sqrt(coef) * np.diagonal(outer, axis1=-2, axis2=-1) / d**0.5,
                           np.sqrt(2 * coef) * outer[..., iu[0], iu[1]] / d**0.5], axis=-1)


def _taylor_torch(x, coef: float = 0.5):
    """:func:`taylor_features_np` on torch tensors (differentiable, in ``x``'s dtype)."""
    import torch

    d = x.shape[-1]
    iu = torch.triu_indices(d, d, 1, device=x.device)
    outer = x[..., :, None] * x[..., None, :]
    return torch.cat([torch.ones_like(x[..., :1]), x / d**0.25,
                      np.sqrt(coef) * torch.diagonal(outer, dim1=-2, dim2=-1) / d**0.5,
                      np.sqrt(2 * coef) * outer[..., iu[0], iu[1]] / d**0.5], dim=-1)


def _grad_scale(factors: dict[str, float]):
    """``(q, k, v) -> (q, k, v)`` unchanged, whose backward multiplies ∂L/∂q, ∂L/∂k, ∂L/∂v by
    ``factors`` (a fused kernel's backward off by a constant factor)."""
    import torch

    class Scale(torch.autograd.Function):
        @staticmethod
        def forward(ctx, q, k, v):
            return q.view_as(q), k.view_as(k), v.view_as(v)

        @staticmethod
        def backward(ctx, gq, gk, gv):
            return (gq * factors.get("q", 1.0), gk * factors.get("k", 1.0),
                    gv * factors.get("v", 1.0))

    return Scale.apply


def _taylor_core(q, k, v, state, causal: bool, coef: float):
    """Linear attention on the Taylor map (BHTD): ``o_i = φ(q_i)ᵀS_i / φ(q_i)ᵀz_i`` with the
    running ``S_i = S_0 + Σ_(j≤i) φ(k_j)v_jᵀ``, ``z_i = z_0 + Σ_(j≤i) φ(k_j)`` (causal), or the
    sums over every key; returns ``(o, (S_T, z_T))``."""
    import torch

    fq, fk = _taylor_torch(q, coef), _taylor_torch(k, coef)
    kv = fk[..., :, None] * v[..., None, :]
    if causal:
        s_run, z_run = torch.cumsum(kv, dim=-3), torch.cumsum(fk, dim=-2)
    else:
        s_run = kv.sum(-3, keepdim=True).expand_as(kv)
        z_run = fk.sum(-2, keepdim=True).expand_as(fk)
    if state is not None:
        s_run = s_run + state[0][..., None, :, :]
        z_run = z_run + state[1][..., None, :]
    num = (fq[..., :, None] * s_run).sum(-2)
    den = (fq * z_run).sum(-1, keepdim=True)
    return num / den, (s_run[..., -1, :, :], z_run[..., -1, :])


def _bf16_backward(coef: float):
    """Causal Taylor attention whose forward runs in the input's dtype and whose backward
    recomputes the forward in bfloat16 and differentiates that (a kernel whose backward
    works in bfloat16 on float32 input); gradients returned in the input's dtype."""
    import torch

    class Bf16(torch.autograd.Function):
        @staticmethod
        def forward(ctx, q, k, v, causal):
            ctx.save_for_backward(q, k, v)
            ctx.causal = causal
            return _taylor_core(q, k, v, None, causal, coef)[0]

        @staticmethod
        def backward(ctx, g):
            low = [t.detach().to(torch.bfloat16).requires_grad_(True) for t in ctx.saved_tensors]
            with torch.enable_grad():
                out = _taylor_core(*low, None, ctx.causal, coef)[0]
                grads = torch.autograd.grad(out, low, g.to(torch.bfloat16))
            return (*(gr.to(g.dtype) for gr in grads), None)

    return Bf16.apply


def taylor_forms(defect: str = "none", coef: float = 0.5) -> dict[str, Any]:
    """``attention``, ``stateful``, ``step`` of float32/float64 Taylor linear attention (BHTD
    torch; NumPy inputs run in float64 without gradients) with one ``defect``: ``none``;
    ``dq``/``dk``/``dv`` ×(1.03, 1.03, 1.01) in the backward of inputs narrower than float64;
    ``bf16_backward``: the backward in bfloat16 for inputs narrower than float64;
    ``state_detached``: ``stateful``/``step`` take the initial state out of the graph;
    ``state_bf16``: the final state rounded through bfloat16. ``state`` is ``(S, z)``
    ``(B, H, m, d_v)``, ``(B, H, m)``."""
    import torch

    factors = {"dq": {"q": 1.03}, "dk": {"k": 1.03}, "dv": {"v": 1.01}}.get(defect)

    def run(q, k, v, state, causal):
        low = q.dtype != torch.float64
        if factors is not None and low:
            q, k, v = _grad_scale(factors)(q, k, v)
        if defect == "bf16_backward" and low and state is None:
            return _bf16_backward(coef)(q, k, v, causal), None
        if defect == "state_detached" and state is not None:
            state = tuple(t.detach() for t in state)
        out, new = _taylor_core(q, k, v, state, causal, coef)
        if defect == "state_bf16":
            new = tuple(t.to(torch.bfloat16).to(t.dtype) for t in new)
        return out, new

    def attention(q, k, v, *, causal: bool, seed: int = 0, **_: Any):
        if isinstance(q, np.ndarray):
            tq, tk, tv = (torch.as_tensor(a, dtype=torch.float64) for a in (q, k, v))
            with torch.no_grad():
                return run(tq, tk, tv, None, causal)[0].numpy()
        return run(q, k, v, None, causal)[0]

    def stateful(q, k, v, *, initial_state=None, seed: int = 0):
        out, new = run(q, k, v, initial_state, True)
        if new is None:  # the bf16-backward defect's full-sequence path keeps no state
            new = _taylor_core(q, k, v, None, True, coef)[1]
        return out, new

    def step(state, q_t, k_t, v_t, *, seed: int = 0):
        out, new = stateful(q_t[..., None, :], k_t[..., None, :], v_t[..., None, :],
                            initial_state=state)
        return new, out[..., 0, :]

    def features(x: np.ndarray, seed: int) -> np.ndarray:
        return taylor_features_np(x)  # the declared map: Based's, coef = 1/2

    def state_sums(state) -> tuple[np.ndarray, np.ndarray]:
        return tuple(t.detach().to("cpu", torch.float64).numpy() for t in state)

    return {"attention": attention, "stateful": stateful, "step": step, "features": features,
            "state_sums": state_sums}


_TAYLOR_ATT = frozenset({"causal", "noncausal", "positive_weights", "differentiable",
                         "deterministic_backward"})


def taylor_target(name: str, defect: str = "none", *, dtypes: tuple[str, ...] = ("float32",),
                  declare: tuple[str, ...] = ("features", "state_sums"),
                  forms: bool = True, coef: float = 0.5) -> list[Target]:
    """One Taylor linear-attention target (:func:`taylor_forms`): torch ``dtypes``, declaring
    the white-box extras in ``declare`` (``features``, ``state_sums``; without ``features`` it
    declares ``feature_count`` instead), with or without its forms."""
    f = taylor_forms(defect, coef)
    extras: dict[str, Any] = {k: f[k] for k in declare}
    if "features" not in declare:
        extras["feature_count"] = 28  # 1 + d + d(d + 1)/2 at the suite's widest d = 6
    if forms:
        extras.update(stateful=f["stateful"], step=f["step"])
    return [AttentionTarget(name, f["attention"], _TAYLOR_ATT, backends=("torch",),
                            dtypes=dtypes, **extras)]


class GradientRow(NamedTuple):
    """One gradient mutant or control: its description, family (:data:`_FAMILIES`), its targets
    under the target name the catalogue gives (``make("mutant:<key>")``, ``make("control:<key>")``)
    and, for a mutant, the properties written to kill it."""

    description: str
    family: str
    make: Callable[[str], list[Target]]
    killers: tuple[str, ...]


#: The family of the targets each builder makes.
_FAMILIES: dict[Callable[..., list[Target]], str] = {
    _positive_targets: "feature_map", _log_positive_targets: "feature_map",
    _softmax_target: "attention", _half_softmax_target: "attention",
    _linear_target: "attention", taylor_target: "attention",
}


def _row(description: str, build: Callable[..., list[Target]], *args: Any,
         killer: str = "gradients", **kwargs: Any) -> GradientRow:
    """A row stating only what is its own: ``build(name, *args, **kwargs)`` makes its targets
    under the name given; ``killer``: the property (``family::test``) written to kill it (the
    default: any property of ``gradients``)."""
    return GradientRow(description, _FAMILIES[build],
                       lambda name: build(name, *args, **kwargs), (killer,))


_G = "gradients::test_"
_D = "declared_features::test_"
#: Taylor linear attention taking float64 and float32, ``feature_count`` declared, no forms.
_LOWP = {"dtypes": ("float64", "float32"), "declare": (), "forms": False}

#: name -> its row (the catalogue gives its targets the name ``mutant:<name>``).
GRADIENT_MUTANTS: dict[str, GradientRow] = {
    "grad_positive_drops_minus_x": _row(
        "SM⁺ features: hand-written backward drops the −x of −‖x‖²/2",
        _positive_targets, "no_minus_x"),
    "grad_positive_scale_wrong": _row(
        "SM⁺ features: m^(−1/2) in the forward, missing in the backward",
        _positive_targets, "no_scale"),
    "grad_positive_float16_backward": _row(
        "SM⁺ features: the right backward accumulated in float16", _positive_targets, "float16"),
    "grad_causal_backward_sees_future": _row(
        "causal softmax attention whose backward is the non-causal one",
        _softmax_target, "future"),
    "grad_normaliser_detached": _row(
        "causal FAVOR+ attention with the normaliser detached in the backward",
        _linear_target, True),
    "grad_positive_rows_summed": _row(
        "SM⁺ features: the backward's Σ_f of the −x term reduces over every row too (a sum "
        "without its axis)", _positive_targets, "rows_summed",
        killer=f"{_G}feature_rows_have_independent_gradients"),
    "grad_positive_atomic_order": _row(
        "SM⁺ features claiming a deterministic backward whose product with W is accumulated "
        "in a call-dependent order (atomic adds)", _positive_targets, "atomic_order",
        killer=f"{_G}feature_map_backward_is_deterministic"),
    "grad_causal_backward_sums_batch": _row(
        "causal softmax attention whose backward sums ∂L/∂k and ∂L/∂v over the batch (as for "
        "a broadcast parameter)", _softmax_target, "batch_summed",
        killer=f"{_G}attention_gradients_batch_and_head_independent"),
    "grad_causal_backward_unshifted": _row(
        "causal softmax attention whose backward recomputes exp(s)/Σexp(s) without the row "
        "maximum: overflows where the stable forward is finite", _softmax_target, "unshifted",
        killer=f"{_G}attention_gradients_finite_where_outputs_are"),
    "grad_positive_jvp_drops_minus_x": _row(
        "SM⁺ features: right backward, hand-written forward-mode rule without the −xᵀdx term",
        _positive_targets, "jvp_no_minus_x",
        killer=f"{_G}forward_mode_matches_reverse_mode_feature_map"),
    "grad_causal_jvp_weights_constant": _row(
        "causal softmax attention: right backward, hand-written forward-mode rule that holds "
        "the attention weights constant (dO = A·dV)", _softmax_target, "jvp_weights_constant",
        killer=f"{_G}forward_mode_matches_reverse_mode_attention"),
    "grad_causal_atomic_order": _row(
        "causal softmax attention claiming a deterministic backward whose ∂L/∂v = Aᵀg is "
        "accumulated in a call-dependent order (atomic adds)", _softmax_target, "atomic_order",
        killer=f"{_G}attention_backward_is_deterministic"),
    "grad_causal_lowp_backward_unscaled": _row(
        "causal softmax attention taking float32 whose reduced-precision backward path (inputs "
        "narrower than float64) leaves the 1/√d of the scores out of ∂L/∂q and ∂L/∂k; float64 "
        "is right", _softmax_target, "lowp_unscaled", ("float64", "float32"),
        killer=f"{_G}low_precision_gradients_near_float64"),
    "grad_log_positive_drops_minus_x": _row(
        "SM⁺ map with log features: the hand-written backward of log φ drops the −x of "
        "−‖x‖²/2 (the suite's log-space attention runs on it)",
        _log_positive_targets, "no_minus_x", killer=f"{_G}feature_attention_gradients_match_exact"),
    "grad_log_positive_via_phi": _row(
        "SM⁺ map with log features: the backward of log φ goes through the plain features "
        "(∂ log φ = ∂φ/φ, φ recomputed): 0/0 where φ underflows, at large input norms in "
        "float32, while the log-space forward stays finite", _log_positive_targets, "via_phi",
        killer=f"{_G}attention_gradients_finite_along_scale_sweep"),
    "grad_positive_scaled_10_percent": _row(
        "SM⁺ features whose hand-written backward is 1.1 times the true gradient (the "
        "estimator's gradient is then biased by 10 %)", _positive_targets, "scaled_1_1",
        killer=f"{_G}gradient_of_unbiased_estimator_is_unbiased"),
    "grad_half_dq_scaled": _row(
        "causal softmax attention (half inputs computed in float32) whose float16/bfloat16 "
        "backward's ∂L/∂q is 1.03 times the true one", _half_softmax_target, {"q": 1.03},
        killer=f"{_G}low_precision_gradients_near_float64"),
    "grad_half_dv_scaled": _row(
        "causal softmax attention (half inputs computed in float32) whose float16/bfloat16 "
        "backward's ∂L/∂v is 1.01 times the true one", _half_softmax_target, {"v": 1.01},
        killer=f"{_G}low_precision_gradients_near_float64"),
    "grad_f32_dq_scaled": _row(
        "float32-only Taylor linear attention (forms, declared features) whose backward's "
        "∂L/∂q is 1.03 times the true one", taylor_target, "dq",
        killer=f"{_D}gradients_meet_declared_features"),
    "grad_f32_dk_scaled": _row(
        "float32-only Taylor linear attention whose backward's ∂L/∂k is 1.03 times the true "
        "one", taylor_target, "dk", killer=f"{_D}gradients_meet_declared_features"),
    "grad_f32_dv_scaled": _row(
        "float32-only Taylor linear attention whose backward's ∂L/∂v is 1.01 times the true "
        "one", taylor_target, "dv", killer=f"{_D}gradients_meet_declared_features"),
    "grad_f32_backward_bfloat16": _row(
        "float32-only Taylor linear attention whose backward recomputes and differentiates "
        "the forward in bfloat16", taylor_target, "bf16_backward",
        killer=f"{_D}gradients_meet_declared_features"),
    "grad_lowp_backward_bfloat16": _row(
        "Taylor linear attention taking float64 and float32 (feature_count declared, no "
        "features) whose float32 backward runs in bfloat16", taylor_target, "bf16_backward",
        **_LOWP, killer=f"{_G}low_precision_gradients_near_float64"),
    "grad_lowp_dq_scaled": _row(
        "Taylor linear attention taking float64 and float32 (feature_count declared, no "
        "features) whose float32 backward's ∂L/∂q is 1.03 times the true one", taylor_target,
        "dq", **_LOWP, killer=f"{_G}low_precision_gradients_near_float64"),
    "grad_f32_initial_state_detached": _row(
        "float32-only Taylor linear attention whose stateful/step forms take the initial "
        "state out of the graph (no gradient reaches the prefix through the state)",
        taylor_target, "state_detached",
        killer="attention_forms::test_gradients_flow_through_the_state"),
    "forms_f32_final_state_bfloat16": _row(
        "float32-only Taylor linear attention (features declared, opaque state) whose final "
        "state is rounded through bfloat16", taylor_target, "state_bf16",
        declare=("features",), killer="attention_forms::test_split_invariance"),
    "based_coefficient_t_squared": _row(
        "float32-only Based attention (Taylor kernel, no forms, features declared as "
        "1 + t + t²/2) computing 1 + t + t²", taylor_target, declare=("features",),
        forms=False, coef=1.0, killer=f"{_D}attention_meets_declared_features"),
}

#: Correct custom backwards, name -> its row: must pass every property (their targets are
#: named ``control:<name>``; ``killers`` is unused).
GRADIENT_CONTROL_ROWS: dict[str, GradientRow] = {
    "grad_positive_custom_backward": _row(
        "SM⁺ features with the right hand-written backward", _positive_targets, "right"),
    "grad_causal_custom_backward": _row(
        "causal softmax attention with the right hand-written backward",
        _softmax_target, "right"),
    "grad_linear_attached_normaliser": _row(
        "causal FAVOR+ attention with the normaliser attached in the backward",
        _linear_target, False),
    "grad_positive_custom_jvp": _row(
        "SM⁺ features with the right hand-written forward-mode rule",
        _positive_targets, "jvp_right"),
    "grad_causal_custom_jvp": _row(
        "causal softmax attention with the right hand-written forward-mode rule",
        _softmax_target, "jvp_right"),
    "grad_causal_float32_backward": _row(
        "causal softmax attention taking float32, the backward in the input's dtype",
        _softmax_target, "right", ("float64", "float32")),
    "grad_log_positive_custom_backward": _row(
        "SM⁺ map with log features and the right hand-written backward of log φ",
        _log_positive_targets, "right"),
    "grad_f32_taylor": _row(
        "float32-only Taylor linear attention with its forms, features and state sums "
        "(the skeleton of the float32 gradient and state mutants)", taylor_target),
    "grad_f32_taylor_opaque_state": _row(
        "float32-only Taylor linear attention with its forms and features, opaque state",
        taylor_target, declare=("features",)),
    "grad_half_softmax": _row(
        "causal softmax attention, half inputs computed in float32 (the half mutants' twin)",
        _half_softmax_target, {}),
    "based_f32_parallel": _row(
        "float32-only Based attention (1 + t + t²/2, features declared, no forms)",
        taylor_target, declare=("features",), forms=False),
    "grad_lowp_taylor": _row(
        "Taylor linear attention taking float64 and float32, feature_count declared",
        taylor_target, **_LOWP),
}
#: name -> the control's targets (``kernel-verify check kernel_verify.mutants.gradients:
#: control_<name>``).
GRADIENT_CONTROLS: dict[str, Callable[[], list[Target]]] = {
    name: functools.partial(row.make, f"control:{name}")
    for name, row in GRADIENT_CONTROL_ROWS.items()
}

def __getattr__(attr: str) -> list[Target]:
    """``control_<name>``: the targets of one control (a ``kernel-verify check`` spec)."""
    if attr.startswith("control_") and attr.removeprefix("control_") in GRADIENT_CONTROLS:
        return GRADIENT_CONTROLS[attr.removeprefix("control_")]()
    raise AttributeError(f"module {__name__!r} has no attribute {attr!r}")
