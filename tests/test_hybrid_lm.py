"""The hybrid LM (impls/torch/hybrid_lm.py): its mixer against the formula written out token by
token, its ring buffer's layout, its cache never written into, its declared cut points, bad
sizes refused, and each ring-buffer mutant failing its intended check while the twin passes
(issue #43 item 4)."""

from __future__ import annotations

import math

import pytest
import torch

import kernel_verify.mutants.hybrid_lm as hm
from kernel_verify.impls.torch.hybrid_lm import HybridLMConfig, build_hybrid_lm
from kernel_verify.impls.torch.tiny_lm import _phi, _rmsnorm
from kernel_verify.properties import model_checks as mc
from kernel_verify.properties.builtin_models import hybrid_lm_target

U64 = torch.finfo(torch.float64).eps


def _ids(b: int, t: int, seed: int = 0) -> torch.Tensor:
    return torch.randint(0, 32, (b, t), generator=torch.Generator().manual_seed(seed))


def _reference_logits(model, ids: torch.Tensor) -> torch.Tensor:
    """The module docstring's formula, one query and one key at a time, in float64."""
    cfg = model.cfg
    w, hd = cfg.window, cfg.d_model // cfg.n_heads
    h = model.embed(ids)
    for blk in model.blocks:
        hn = _rmsnorm(h, blk.norm1)
        pad = torch.cat([hn.new_zeros(hn.shape[0], cfg.conv_width - 1, hn.shape[2]), hn], 1)
        u = torch.stack([sum(pad[:, t + i] * blk.conv[:, i] for i in range(cfg.conv_width))
                         for t in range(ids.shape[1])], 1)
        q, k, v = (x.reshape(*x.shape[:2], cfg.n_heads, hd) for x in blk.qkv(u).split(
            cfg.d_model, -1))
        a = torch.zeros_like(q)
        for b in range(ids.shape[0]):
            for head in range(cfg.n_heads):
                for t in range(ids.shape[1]):
                    num, den = torch.zeros(hd, dtype=q.dtype), torch.zeros((), dtype=q.dtype)
                    for s in range(t + 1):
                        if s > t - w:
                            wt = cfg.mix * torch.exp(q[b, t, head] @ k[b, s, head]
                                                     / math.sqrt(hd))
                        else:
                            wt = _phi(q[b, t, head]) @ _phi(k[b, s, head])
                        num, den = num + wt * v[b, s, head], den + wt
                    a[b, t, head] = num / den
        h = h + blk.out(a.reshape(*a.shape[:2], -1))
        h = h + blk.down(torch.nn.functional.gelu(blk.up(_rmsnorm(h, blk.norm2))))
    return model.head(_rmsnorm(h, model.norm))


@torch.no_grad()
def test_forward_and_step_equal_the_formula_token_by_token():
    """Both routes (parallel forward; prefill of 3 then ring-buffer steps past two wraps of
    W = 4) equal the formula evaluated directly, to a few float64 roundings per term."""
    model = build_hybrid_lm(5, init_scale=8.0, dtype=torch.float64)
    ids = _ids(2, 11)
    want = _reference_logits(model, ids)
    full, _ = model(ids)
    logits, cache = model(ids[:, :3])
    steps = [logits]
    for t in range(3, 11):
        out, cache = model.step(ids[:, t], cache)
        steps.append(out[:, None])
    tol = 1e3 * U64 * float(want.abs().max())
    assert float((full - want).abs().max()) <= tol
    assert float((torch.cat(steps, 1) - want).abs().max()) <= tol


@torch.no_grad()
def test_ring_slot_of_token_p_is_p_mod_w_and_step_never_writes_the_cache():
    """After T tokens the ring holds token p's key in slot p mod W for the last W tokens (both
    routes give the same ring), and a step leaves the cache it was given unchanged."""
    model = build_hybrid_lm(1, dtype=torch.float64)
    w = model.cfg.window
    ids = _ids(1, 2 * w + 1)
    _, by_forward = model(ids)
    _, cache = model(ids[:, :1])
    for t in range(1, ids.shape[1]):
        before = [tuple(x.clone() for x in st) for st in cache]
        _, new = model.step(ids[:, t], cache)
        for st, kept in zip(cache, before, strict=True):
            assert all(torch.equal(a, b) for a, b in zip(st, kept, strict=True))
        cache = new
    blk = model.blocks[0]
    u, _ = blk.convolve(blk.empty_state(1, model.head.weight)[0], _rmsnorm(model.embed(ids),
                                                                           blk.norm1))
    k = blk._qkv(u)[1]
    n = ids.shape[1]
    for p in range(n - w, n):
        assert torch.equal(by_forward[0][1][:, :, p % w], k[:, :, p])
    for a, b in zip(by_forward, cache, strict=True):
        for x, y in zip(a, b, strict=True):
            assert x.dtype == y.dtype and float((x - y).abs().max()) <= 1e-13


@torch.no_grad()
def test_rows_with_different_counts_continue_each_as_alone():
    """A padded prefill leaves rows at different counts; ``forward`` from it (each row by its
    own count) equals each row run alone."""
    model = build_hybrid_lm(2, dtype=torch.float64)
    ids = _ids(2, 9)
    mask = torch.ones_like(ids)
    mask[0, :3] = 0
    _, cache = model.forward_padded(ids, mask)
    more = _ids(2, 5, seed=1)
    got, _ = model(more, cache)
    for b, start in ((0, 3), (1, 0)):
        alone, _ = model(torch.cat([ids[b:b + 1, start:], more[b:b + 1]], 1))
        assert float((got[b] - alone[0, -5:]).abs().max()) <= 1e-13


def test_target_declares_its_window_as_cut_points():
    t = hybrid_lm_target()
    w = HybridLMConfig().window
    assert {w - 1, w, w + 1, 2 * w + 1} <= set(t.cut_points())
    assert all(t.offers(c) for c in ("extend", "copy_cache", "rollback", "padded_prefill"))


@pytest.mark.parametrize(("kw", "word"), [({"window": 1}, "window"), ({"window": 2.0}, "window"),
                                          ({"mix": 0.0}, "mix"), ({"mix": math.inf}, "mix"),
                                          ({"n_heads": 3}, "n_heads")])
def test_bad_sizes_are_refused_naming_the_field(kw, word):
    with pytest.raises(ValueError, match=word):
        HybridLMConfig(**kw)


def test_build_refuses_a_tiny_lm_config():
    from kernel_verify.impls.torch.tiny_lm import TinyLMConfig

    with pytest.raises(TypeError, match="config"):
        build_hybrid_lm(0, config=TinyLMConfig())


INTENDED = {"model_hybrid_ring_attends_w_plus_1": (mc.decode, mc.generate),
            "model_hybrid_ring_slot_after_wrap": (mc.decode, mc.generate),
            "model_hybrid_window_not_restored": (mc.restore, mc.continuations, mc.speculative)}


def test_every_hybrid_lm_mutant_has_its_intended_checks():
    assert set(INTENDED) == set(hm.HYBRID_LM_MUTANTS)
    for name, checks in INTENDED.items():
        killers = hm.HYBRID_LM_MUTANTS[name][1]
        for check in checks:
            assert any(check.__name__.split("_")[0] in k for k in killers), (name, check)


@pytest.mark.parametrize("name", sorted(INTENDED))
def test_each_ring_mutant_fails_its_check_and_the_twin_passes(name):
    """On the control cases at the default init, float64 and float32: the mutant fails each
    intended check, the correct twin passes it."""
    mutant = getattr(hm, f"target_{name}")[0]
    twin = hm.control_model_hybrid_lm[0]
    for check in INTENDED[name]:
        for dtype in ("float64", "float32"):
            case = (mc.serving_control_case(mutant) if check in mc.SERVING_CHECKS
                    else mc.control_case(mutant))
            assert check(mutant, dtype, 1.0, case, False) is not None, (name, check, dtype)
            assert check(twin, dtype, 1.0, case, False) is None, (name, check, dtype)
