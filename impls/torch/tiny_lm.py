"""A tiny causal language model built from this project's own linear-attention forms: the
reference model target of the model properties (docs/math.md §15).

Architecture (pre-norm, ``n_layers`` blocks)::

    h₀ = E[x_t]                                   embeddings (V × D)
    for each block:
        u  = conv_w(rmsnorm(h))                   causal depthwise convolution, width W,
                                                  over the current sequence only
        q, k, v = u W_q, u W_k, u W_v             H heads of D/H
        a  = linear attention(φ(q), φ(k), v)      φ(x) = elu(x) + 1 > 0, normalised:
                                                  a_t = φ(q_t)ᵀS_t / φ(q_t)ᵀz_t,
                                                  S_t = Σ_(s≤t) φ(k_s)v_sᵀ, z_t = Σ_(s≤t) φ(k_s)
        h  = h + a W_o
        h  = h + W₂ gelu(W₁ rmsnorm(h))           MLP
    logits = rmsnorm(h) W_head

The state of a block (its part of the *cache*) is ``(c, S, z)``: the last ``W − 1`` inputs of
its convolution (zeros before the first token) and the attention state ``(S, z)``
(:mod:`kernel_verify.impls.torch.forms`). Its size does not depend on T.

Calls (all causal; ``ids`` is a ``(B, T)`` int64 tensor):

* :meth:`TinyLM.forward` ``(ids, cache=None) -> (logits (B, T, V), cache)``: the chunk-parallel
  form (:func:`~kernel_verify.impls.torch.forms.linear_attention_chunked`, chunk
  ``chunk_size``) from the state ``cache`` (None: empty);
* :meth:`TinyLM.step` ``(ids_t (B,), cache) -> (logits (B, V), cache)``: one token of the
  recurrence (:func:`~kernel_verify.impls.torch.forms.linear_attention_step`): a second
  route to the same numbers;
* :meth:`TinyLM.forward_packed` ``(ids (1, T), cu_seqlens) -> (logits, cache)``: sequences
  packed along time, each from the empty state (the convolution window and the attention
  state reset at every boundary); the cache holds one state per sequence along the batch;
* :meth:`TinyLM.forward_padded` ``(ids, attention_mask) -> (logits, cache)``: each row on its
  valid positions only (padding is removed, never zero-filled: ``φ(0) = 1 ≠ 0`` and a zero
  convolution input is still an input); logits at padded positions are 0;
* :meth:`TinyLM.generate` ``(ids, max_new_tokens) -> (tokens (B, n), scores (B, n, V))``:
  greedy decoding with the cache; ``scores[:, i]`` are the logits that chose token ``i``.

At very large weights every feature of a row can underflow (``elu(x) + 1 = eˣ`` for ``x < 0``);
such a row attends to nothing and its attention output is 0 (the forms' ``zero_denominator =
"zero"``), never NaN.

Every call runs in the parameters' dtype (float32 or float64) and is differentiable.
"""

from __future__ import annotations

import itertools
import numbers
from dataclasses import dataclass
from typing import ClassVar

import torch
from torch import nn
from torch.nn import functional as F

from kernel_verify.impls.torch.forms import linear_attention_chunked, linear_attention_step

__all__ = ["TinyLM", "TinyLMConfig", "build_tiny_lm"]

#: One block's state: convolution window (B, W − 1, D), S (B, H, D/H, D/H), z (B, H, D/H).
BlockState = tuple[torch.Tensor, torch.Tensor, torch.Tensor]
Cache = list[BlockState]


@dataclass(frozen=True)
class TinyLMConfig:
    """Sizes of :class:`TinyLM`; ``init_std`` is the standard deviation of every weight matrix
    at initialisation (before the suite's init scale multiplies it)."""

    vocab_size: int = 32
    d_model: int = 16
    n_layers: int = 2
    n_heads: int = 2
    d_ff: int = 32
    conv_width: int = 3
    chunk_size: int = 4
    init_std: float = 0.02

    def __post_init__(self) -> None:
        for name in ("vocab_size", "d_model", "n_layers", "n_heads", "d_ff", "conv_width",
                     "chunk_size"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"TinyLMConfig.{name} must be a positive int, got {value!r}")
        if self.d_model % self.n_heads:
            raise ValueError(f"TinyLMConfig.d_model ({self.d_model}) must be a multiple of "
                             f"n_heads ({self.n_heads})")
        if not self.init_std > 0:
            raise ValueError(f"TinyLMConfig.init_std must be > 0, got {self.init_std!r}")


def _rmsnorm(x: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight


def _phi(x: torch.Tensor) -> torch.Tensor:
    """``elu(x) + 1``: positive features, so the normaliser never vanishes."""
    return F.elu(x) + 1.0


class Block(nn.Module):
    """One pre-norm block: convolution, linear attention, MLP (module docstring)."""

    def __init__(self, cfg: TinyLMConfig) -> None:
        super().__init__()
        d, w = cfg.d_model, cfg.conv_width
        self.cfg = cfg
        self.norm1 = nn.Parameter(torch.ones(d))
        self.norm2 = nn.Parameter(torch.ones(d))
        self.conv = nn.Parameter(torch.zeros(d, w))  # tap w − 1 is the current token
        self.qkv = nn.Linear(d, 3 * d, bias=False)
        self.out = nn.Linear(d, d, bias=False)
        self.up = nn.Linear(d, cfg.d_ff, bias=False)
        self.down = nn.Linear(cfg.d_ff, d, bias=False)

    # -- pieces shared by both routes
    def _heads(self, u: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """``u (B, T, D)`` → φ(q), φ(k), v as ``(B, H, T, D/H)``."""
        b, t, d = u.shape
        h = self.cfg.n_heads
        q, k, v = self.qkv(u).split(d, dim=-1)
        q, k, v = (x.reshape(b, t, h, d // h).transpose(1, 2) for x in (q, k, v))
        return _phi(q), _phi(k), v

    def _finish(self, x: torch.Tensor, a: torch.Tensor) -> torch.Tensor:
        """Residual attention output ``a (B, H, T, D/H)`` then the MLP."""
        b, _, t, _ = a.shape
        x = x + self.out(a.transpose(1, 2).reshape(b, t, -1))
        return x + self.down(F.gelu(self.up(_rmsnorm(x, self.norm2))))

    def empty_state(self, batch: int, like: torch.Tensor) -> BlockState:
        d, h = self.cfg.d_model, self.cfg.n_heads
        return (like.new_zeros(batch, self.cfg.conv_width - 1, d),
                like.new_zeros(batch, h, d // h, d // h), like.new_zeros(batch, h, d // h))

    def convolve(self, window: torch.Tensor, hn: torch.Tensor
                 ) -> tuple[torch.Tensor, torch.Tensor]:
        """Causal depthwise convolution of ``hn (B, T, D)`` after the ``W − 1`` inputs of
        ``window``: the output and the new window."""
        w = self.cfg.conv_width
        full = torch.cat([window, hn], dim=1)
        t = hn.shape[1]
        u = sum(full[:, i:i + t] * self.conv[:, i] for i in range(w))
        return u, full[:, full.shape[1] - (w - 1):]

    # -- the two routes
    def forward(self, x: torch.Tensor, state: BlockState) -> tuple[torch.Tensor, BlockState]:
        """The chunk-parallel route over ``x (B, T, D)`` from ``state``."""
        u, window = self.convolve(state[0], _rmsnorm(x, self.norm1))
        fq, fk, v = self._heads(u)
        a, (s, z) = linear_attention_chunked(fq, fk, v, chunk_size=self.cfg.chunk_size,
                                             initial_state=(state[1], state[2]),
                                             zero_denominator="zero")
        return self._finish(x, a), (window, s, z)

    def step(self, x: torch.Tensor, state: BlockState) -> tuple[torch.Tensor, BlockState]:
        """One token ``x (B, 1, D)`` through the recurrence."""
        u, window = self.convolve(state[0], _rmsnorm(x, self.norm1))
        fq, fk, v = self._heads(u)
        (s, z), a = linear_attention_step((state[1], state[2]), fq[:, :, 0], fk[:, :, 0],
                                          v[:, :, 0], zero_denominator="zero")
        return self._finish(x, a.unsqueeze(2)), (window, s, z)


class TinyLM(nn.Module):
    """The tiny causal LM of the module docstring. ``block_cls`` builds its blocks (a subclass
    may swap the mixer: :mod:`kernel_verify.impls.torch.hybrid_lm`); every call is written over
    the blocks' ``forward``/``step``/``empty_state``, the cache being one state per block."""

    block_cls: ClassVar[type[nn.Module]] = Block

    def __init__(self, cfg: TinyLMConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.embed = nn.Embedding(cfg.vocab_size, cfg.d_model)
        self.blocks = nn.ModuleList(self.block_cls(cfg) for _ in range(cfg.n_layers))
        self.norm = nn.Parameter(torch.ones(cfg.d_model))
        self.head = nn.Linear(cfg.d_model, cfg.vocab_size, bias=False)

    def _check_ids(self, ids: torch.Tensor, name: str = "ids") -> None:
        if not isinstance(ids, torch.Tensor) or ids.dtype not in (torch.int64, torch.int32):
            raise TypeError(f"{name} must be an int64 tensor of token ids, got "
                            f"{getattr(ids, 'dtype', type(ids).__name__)}")
        if ids.numel() and (int(ids.min()) < 0 or int(ids.max()) >= self.cfg.vocab_size):
            raise ValueError(f"{name} must lie in [0, {self.cfg.vocab_size}), got "
                             f"[{int(ids.min())}, {int(ids.max())}]")

    def empty_cache(self, batch: int) -> Cache:
        like = self.head.weight
        return [blk.empty_state(batch, like) for blk in self.blocks]

    def _logits(self, h: torch.Tensor) -> torch.Tensor:
        return self.head(_rmsnorm(h, self.norm))

    def forward(self, ids: torch.Tensor, cache: Cache | None = None
                ) -> tuple[torch.Tensor, Cache]:
        self._check_ids(ids)
        if ids.ndim != 2:
            raise ValueError(f"ids must be (B, T), got shape {tuple(ids.shape)}")
        cache = self.empty_cache(ids.shape[0]) if cache is None else cache
        h = self.embed(ids)
        new: Cache = []
        for blk, state in zip(self.blocks, cache, strict=True):
            h, st = blk(h, state)
            new.append(st)
        return self._logits(h), new

    def step(self, ids_t: torch.Tensor, cache: Cache | None) -> tuple[torch.Tensor, Cache]:
        """One token per row, ``ids_t (B,)``, from ``cache``: logits ``(B, V)`` and the cache."""
        self._check_ids(ids_t, "ids_t")
        ids_t = ids_t.reshape(-1)
        cache = self.empty_cache(ids_t.shape[0]) if cache is None else cache
        h = self.embed(ids_t)[:, None]
        new: Cache = []
        for blk, state in zip(self.blocks, cache, strict=True):
            h, st = blk.step(h, state)
            new.append(st)
        return self._logits(h)[:, 0], new

    @staticmethod
    def stack(caches: list[Cache]) -> Cache:
        """Caches of single rows → one cache along the batch."""
        return [tuple(torch.cat(parts, dim=0) for parts in zip(*states, strict=True))
                for states in zip(*caches, strict=True)]

    def forward_packed(self, ids: torch.Tensor, cu_seqlens: torch.Tensor
                       ) -> tuple[torch.Tensor, Cache]:
        """Sequences ``ids[:, c_i:c_(i+1)]`` packed in a batch of 1, each from the empty
        state; the cache holds each sequence's final state along the batch."""
        self._check_ids(ids)
        bounds = [int(c) for c in cu_seqlens.tolist()]
        if ids.ndim != 2 or ids.shape[0] != 1:
            raise ValueError(f"packed ids must be (1, T), got shape {tuple(ids.shape)}")
        if (len(bounds) < 2 or bounds[0] != 0 or bounds[-1] != ids.shape[1]
                or any(b <= a for a, b in itertools.pairwise(bounds))):
            raise ValueError(f"cu_seqlens must rise strictly from 0 to T = {ids.shape[1]}, "
                             f"got {bounds}")
        outs, caches = [], []
        for a, b in itertools.pairwise(bounds):
            out, cache = self(ids[:, a:b])
            outs.append(out)
            caches.append(cache)
        return torch.cat(outs, dim=1), self.stack(caches)

    def forward_padded(self, ids: torch.Tensor, attention_mask: torch.Tensor
                       ) -> tuple[torch.Tensor, Cache]:
        """Each row on its valid positions (``attention_mask`` True/1); logits 0 elsewhere."""
        self._check_ids(ids)
        if tuple(attention_mask.shape) != tuple(ids.shape):
            raise ValueError(f"attention_mask must have the shape of ids {tuple(ids.shape)}, "
                             f"got {tuple(attention_mask.shape)}")
        rows, caches = [], []
        for b in range(ids.shape[0]):
            idx = torch.nonzero(attention_mask[b].bool()).reshape(-1)
            if idx.numel() == 0:
                raise ValueError(f"attention_mask row {b} has no valid position")
            out, cache = self(ids[b:b + 1, idx])
            row = out.new_zeros(1, ids.shape[1], out.shape[-1])
            rows.append(row.index_copy(1, idx, out))
            caches.append(cache)
        return torch.cat(rows, dim=0), self.stack(caches)

    @torch.no_grad()
    def generate(self, ids: torch.Tensor, max_new_tokens: int
                 ) -> tuple[torch.Tensor, torch.Tensor]:
        """Greedy decoding with the cache: tokens ``(B, n)`` and the scores that chose them
        ``(B, n, V)``."""
        logits, cache = self(ids)
        scores, tokens = [logits[:, -1]], []
        for i in range(max_new_tokens):
            tok = scores[-1].argmax(-1)
            tokens.append(tok)
            if i + 1 < max_new_tokens:
                step, cache = self.step(tok, cache)
                scores.append(step)
        return torch.stack(tokens, dim=1), torch.stack(scores, dim=1)


def build_tiny_lm(seed: int, *, init_scale: float = 1.0, dtype: torch.dtype = torch.float32,
                  config: TinyLMConfig | None = None, cls: type[TinyLM] = TinyLM) -> TinyLM:
    """A :class:`TinyLM` (or subclass ``cls``) at a seeded random init: every weight matrix and
    the embeddings ``N(0, (init_scale · init_std)²)``, the convolution the identity plus
    ``N(0, (init_scale · init_std)²)`` per tap, norms 1. Drawn in float32 from ``seed`` and then
    cast, so the float64 model has exactly the float32 model's weights."""
    cfg = config or TinyLMConfig()
    if isinstance(seed, bool) or not isinstance(seed, numbers.Integral):
        raise TypeError(f"seed must be an integer, got {type(seed).__name__} {seed!r}")
    if not 0 <= seed < 2**63:
        raise ValueError(f"seed must lie in [0, 2**63), got {seed!r}")
    if not init_scale > 0:
        raise ValueError(f"init_scale must be > 0, got {init_scale!r}")
    gen = torch.Generator().manual_seed(int(seed))
    model = cls(cfg)
    std = cfg.init_std * float(init_scale)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith(("norm", "norm1", "norm2")):
                continue
            p.copy_(torch.randn(p.shape, generator=gen, dtype=torch.float32) * std)
            if name.endswith("conv"):
                p[:, -1] += 1.0
    return model.to(dtype).eval()
