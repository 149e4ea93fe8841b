"""A tiny causal LM whose mixer is the hybrid of sliding-window softmax attention and linear
attention (docs/math.md §22, LoLCATs, Zhang et al. 2024, arXiv 2410.10254): the tiny LM of
:mod:`kernel_verify.impls.torch.tiny_lm` with its blocks' linear attention swapped for
:func:`kernel_verify.impls.torch.hybrid_attention.hybrid_attention`, so a model target verifies
the window's buffer and the recurrent state together (docs/math.md §15).

Each block (``n_layers`` of them, pre-norm, as the tiny LM)::

    u = conv_w(rmsnorm(h))                      causal depthwise convolution (the tiny LM's)
    q, k, v = u W_q, u W_k, u W_v               H heads of D/H; φ(x) = elu(x) + 1
    a_t = [Σ_(t−W<s≤t) μ e^(q_tᵀk_s/√(D/H)) v_s + φ(q_t)ᵀ Σ_(s≤t−W) φ(k_s) v_sᵀ]
        / [Σ_(t−W<s≤t) μ e^(q_tᵀk_s/√(D/H))     + φ(q_t)ᵀ Σ_(s≤t−W) φ(k_s)]
    h = h + a W_o, then the MLP

with the window ``W = window`` and the weight ``μ = mix``: the last ``W`` tokens (the current
one included) by softmax, every older one by the linear-attention state ``(S, z)``.

**The cache** of a block is ``(c, K, Φ, V, n, S, z)``: the convolution's last ``W_c − 1``
inputs; a *ring buffer* of the window's last ``W`` keys, features and values, token ``p`` (from
0) in slot ``p mod W``; ``n (B,)`` int64, the tokens consumed per row (rows of a padded prefill
differ); the linear-attention state ``(S, z)`` of every token that has left the window.
``step`` returns a new ring (it never writes into the cache it is given): the token leaving the
window (slot ``n mod W`` once ``n ≥ W``) is added to ``(S, z)``, the new key written in its
slot, and the query attends over the ``min(n + 1, W)`` filled slots (order does not matter to
the sum). ``forward`` from a cache reads the ring in time order (slot ``(n − W + i) mod W`` at
place ``i``), runs the parallel form from that state and writes the new state back as a ring.
The two routes share no code past the projections: decoding = the full forward is a check of
the ring's indexing against the parallel form's masks.

Sizes are :class:`HybridLMConfig` (the tiny LM's, plus ``window`` and ``mix``; the tiny LM's
``chunk_size`` is not read: the parallel form is not chunked). Every call of the tiny LM
(prefill, step, generate, packed, padded) works unchanged over these blocks.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass

import torch

from kernel_verify.impls.torch.hybrid_attention import combine, hybrid_attention
from kernel_verify.impls.torch.tiny_lm import (
    Block,
    TinyLM,
    TinyLMConfig,
    _phi,
    _rmsnorm,
    build_tiny_lm,
)

__all__ = ["HybridBlock", "HybridLM", "HybridLMConfig", "build_hybrid_lm"]

#: One block's state: conv window (B, W_c − 1, D); ring K, Φ, V (B, H, W, D/H); n (B,) int64;
#: S (B, H, D/H, D/H); z (B, H, D/H).
HybridState = tuple[torch.Tensor, ...]


@dataclass(frozen=True)
class HybridLMConfig(TinyLMConfig):
    """:class:`TinyLMConfig` plus the softmax window ``window`` (≥ 2) and its weight ``mix``
    (> 0, finite) against the linear part."""

    window: int = 4
    mix: float = 1.0

    def __post_init__(self) -> None:
        super().__post_init__()
        w = self.window
        if isinstance(w, bool) or not isinstance(w, int) or w < 2:
            raise ValueError(f"HybridLMConfig.window must be an int ≥ 2 (a window of one token "
                             f"is linear attention plus the diagonal), got {w!r}")
        mix = self.mix
        if (isinstance(mix, bool) or not isinstance(mix, numbers.Real)
                or not math.isfinite(mix) or not mix > 0):
            raise ValueError(f"HybridLMConfig.mix must be a finite number > 0, got {mix!r}")


class HybridBlock(Block):
    """A tiny-LM block whose mixer is the hybrid (module docstring)."""

    cfg: HybridLMConfig

    def _qkv(self, u: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """``u (B, T, D)`` → q, k, v, φ(q), φ(k) as ``(B, H, T, D/H)``."""
        b, t, d = u.shape
        h = self.cfg.n_heads
        q, k, v = self.qkv(u).split(d, dim=-1)
        q, k, v = (x.reshape(b, t, h, d // h).transpose(1, 2) for x in (q, k, v))
        return q, k, v, _phi(q), _phi(k)

    def empty_state(self, batch: int, like: torch.Tensor) -> HybridState:
        d, h, w = self.cfg.d_model, self.cfg.n_heads, self.cfg.window
        ring = like.new_zeros(batch, h, w, d // h)
        return (like.new_zeros(batch, self.cfg.conv_width - 1, d), ring, ring.clone(),
                ring.clone(), torch.zeros(batch, dtype=torch.int64, device=like.device),
                like.new_zeros(batch, h, d // h, d // h), like.new_zeros(batch, h, d // h))

    # -- the ring buffer
    def _slot(self, n: torch.Tensor) -> torch.Tensor:
        """The slot token ``n`` (from 0) is written to: ``n mod W`` (``n (B,)``)."""
        return n % self.cfg.window

    def _gather(self, ring: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
        """``ring (B, H, W, e)`` reordered along the window by ``index (B, W)``."""
        idx = index[:, None, :, None].expand(-1, ring.shape[1], -1, ring.shape[-1])
        return torch.gather(ring, 2, idx)

    def _places(self, n: torch.Tensor) -> torch.Tensor:
        """Slot of place ``i`` of the time-ordered window after ``n`` tokens: ``(n − W + i) mod
        W`` (places ``i < W − n`` are empty while ``n < W``)."""
        w = self.cfg.window
        return (n[:, None] - w + torch.arange(w, device=n.device)) % w

    def _write(self, ring: tuple[torch.Tensor, ...], n: torch.Tensor, s: torch.Tensor,
               z: torch.Tensor, k: torch.Tensor, fk: torch.Tensor, v: torch.Tensor
               ) -> tuple[tuple[torch.Tensor, ...], torch.Tensor, torch.Tensor]:
        """Token ``n`` (``k, fk, v (B, H, e)``) enters the ring; the one it replaces (present
        once ``n ≥ W``) leaves the window for ``(S, z)``."""
        kw, fw, vw = ring
        hit = (torch.arange(self.cfg.window, device=n.device) == self._slot(n)[:, None])
        hit = hit[:, None, :, None]
        out_f = torch.where(hit, fw, 0).sum(2)
        out_v = torch.where(hit, vw, 0).sum(2)
        full = (n >= self.cfg.window)[:, None, None]
        s = s + torch.where(full[..., None], out_f[..., :, None] * out_v[..., None, :], 0)
        z = z + torch.where(full, out_f, 0)
        ring = tuple(torch.where(hit, new[:, :, None], old)
                     for old, new in ((kw, k), (fw, fk), (vw, v)))
        return ring, s, z

    def _attend(self, q: torch.Tensor, fq: torch.Tensor, keys: torch.Tensor,
                vals: torch.Tensor, valid: torch.Tensor, s: torch.Tensor, z: torch.Tensor
                ) -> torch.Tensor:
        """One query ``q, fq (B, H, e)`` over the slots ``valid (B, slots)`` of ``keys, vals``
        by softmax and over ``(S, z)`` linearly: the hybrid quotient, ``(B, H, e)``."""
        raw = (keys @ q[..., :, None])[..., 0] / math.sqrt(q.shape[-1])
        scores = torch.where(valid[:, None], raw, -math.inf)[..., None, :]
        no_lin = scores.new_zeros(scores.shape)
        fq1 = fq[..., None, :]
        return combine(scores, no_lin, vals, fq1 @ s, fq1 @ z[..., :, None], self.cfg.mix,
                       "raise")[..., 0, :]

    # -- the two routes
    def forward(self, x: torch.Tensor, state: HybridState) -> tuple[torch.Tensor, HybridState]:
        """The parallel form over ``x (B, T, D)`` from ``state`` (rows with different counts
        run one by one: the parallel form takes one window count per call)."""
        n = state[4]
        if n.numel() > 1 and bool((n != n[0]).any()):
            rows = [self.forward(x[b:b + 1], tuple(p[b:b + 1] for p in state))
                    for b in range(x.shape[0])]
            return (torch.cat([r[0] for r in rows]),
                    tuple(torch.cat(parts) for parts in zip(*(r[1] for r in rows), strict=True)))
        conv, kw, fw, vw, _, s, z = state
        w, t = self.cfg.window, x.shape[1]
        u, conv = self.convolve(conv, _rmsnorm(x, self.norm1))
        q, k, v, fq, fk = self._qkv(u)
        places = self._places(n)
        count = torch.clamp(n, max=w)[:, None].expand(-1, q.shape[1]).to(q.dtype)
        before = (*(self._gather(r, places) for r in (kw, fw, vw)), count, s, z)
        a, after = hybrid_attention(q, k, v, fq, fk, window=w, mix=self.cfg.mix,
                                    initial_state=before)
        n = n + t
        back = (torch.arange(w, device=n.device) - n[:, None]) % w  # place of each slot
        ring = tuple(self._gather(r, back) for r in after[:3])
        return self._finish(x, a), (conv, *ring, n, after[4], after[5])

    def step(self, x: torch.Tensor, state: HybridState) -> tuple[torch.Tensor, HybridState]:
        """One token ``x (B, 1, D)`` through the ring buffer and the recurrence."""
        conv, kw, fw, vw, n, s, z = state
        u, conv = self.convolve(conv, _rmsnorm(x, self.norm1))
        q, k, v, fq, fk = (p[:, :, 0] for p in self._qkv(u))
        ring, s, z = self._write((kw, fw, vw), n, s, z, k, fk, v)
        n = n + 1
        valid = torch.arange(self.cfg.window, device=n.device) < n[:, None]
        a = self._attend(q, fq, ring[0], ring[2], valid, s, z)
        return self._finish(x, a[:, :, None]), (conv, *ring, n, s, z)


class HybridLM(TinyLM):
    """The tiny LM over :class:`HybridBlock` (module docstring)."""

    block_cls = HybridBlock


def build_hybrid_lm(seed: int, *, init_scale: float = 1.0, dtype: torch.dtype = torch.float32,
                    config: HybridLMConfig | None = None, cls: type[HybridLM] = HybridLM
                    ) -> HybridLM:
    """A :class:`HybridLM` (or subclass ``cls``) at a seeded random init, drawn as
    :func:`~kernel_verify.impls.torch.tiny_lm.build_tiny_lm` draws the tiny LM (float32 from
    ``seed``, then cast: the float64 model has the float32 model's weights)."""
    config = config or HybridLMConfig()
    if not isinstance(config, HybridLMConfig):
        raise TypeError(f"config must be a HybridLMConfig, got {type(config).__name__}")
    return build_tiny_lm(seed, init_scale=init_scale, dtype=dtype, config=config, cls=cls)

