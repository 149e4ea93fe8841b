"""The README's section "Target kinds at a glance" runs as printed: each of its Python blocks
builds its targets, every target passes the declaration probe, and each computes what its
paragraph says, compared here with a direct evaluation of the formula (float64, a few tokens);
the model block's target goes through ``kernel_verify.check`` and gets the model properties'
verdicts."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from kernel_verify.probe import probe_target

README = Path(__file__).resolve().parents[1] / "README.md"
#: The kinds of the section's blocks, in order (the class names of the targets each builds).
KINDS = ("feature map", "attention", "forms", "gated", "hybrid", "model")
#: Agreement of two float64 evaluations of the same O(1) sums over ≤ 6 tokens and ≤ 3 dims:
#: rounding is ~10 u ≈ 2e-15 per value; 1e-12 leaves room for the exponentials and divisions
#: while any defect of the formula (a wrong weight, a missed term) is O(0.1).
TOL = 1e-12


def _section() -> str:
    text = README.read_text(encoding="utf-8")
    start = text.index("## Target kinds at a glance")
    end = text.index("\n## ", start + 1)
    return text[start:end]


def _blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", _section(), re.S)


def _run(index: int) -> dict:
    scope: dict = {}
    exec(compile(_blocks()[index], f"README.md (target kinds, block {index + 1})", "exec"),
         scope)
    return scope


def _targets(scope: dict) -> dict:
    return {k: v for k, v in scope.items()
            if type(v).__name__.endswith("Target") and not isinstance(v, type)}


def test_one_block_per_kind_and_every_target_passes_the_probe():
    blocks = _blocks()
    assert len(blocks) == len(KINDS)
    kinds = []
    for i in range(len(blocks)):
        targets = _targets(_run(i))
        assert targets, f"block {i + 1} builds no target"
        for target in targets.values():
            assert probe_target(target) == [], target.name
        kinds.append(sorted({type(t).__name__ for t in targets.values()}))
    assert kinds == [["FeatureMapTarget"], ["AttentionTarget"], ["AttentionTarget"],
                     ["GatedAttentionTarget"], ["HybridAttentionTarget"], ["ModelTarget"]]
    import kernel_verify

    for name in ("FeatureMapTarget", "AttentionTarget", "GatedAttentionTarget",
                 "RecurrentTarget", "HybridAttentionTarget", "ModelTarget", "l2_features"):
        assert name in kernel_verify.__all__ and getattr(kernel_verify, name) is not None


def test_the_feature_map_gives_positive_features_of_the_declared_width():
    target = _run(0)["target"]
    x = np.random.default_rng(0).standard_normal((5, 3))
    a, b = target.sample_fn(x, 3), target.sample_fn(x, 3)
    assert a.shape == (5, target.m) and (a > 0).all() and np.array_equal(a, b)
    # φ(x)ᵀφ(y) averaged over seeds estimates exp(xᵀy): at x = y = 0 every feature is 1/√m
    zero = target.sample_fn(np.zeros((1, 3)), 0)
    assert np.allclose(zero, 1 / np.sqrt(target.m), rtol=TOL, atol=0)


def test_the_attention_is_softmax_attention():
    target = _run(1)["target"]
    rng = np.random.default_rng(1)
    q, k, v = rng.standard_normal((3, 1, 2, 4, 3))
    out = target.attention(q, k, v, causal=True, seed=0)
    s = np.einsum("bhid,bhjd->bhij", q, k) / np.sqrt(3)
    for i in range(4):  # row i: softmax over keys j ≤ i, written out
        w = np.exp(s[..., i, : i + 1])
        want = np.einsum("bhj,bhjv->bhv", w / w.sum(-1, keepdims=True), v[..., : i + 1, :])
        assert np.abs(out[..., i, :] - want).max() <= TOL


def test_the_forms_target_continues_its_state():
    target = _run(2)["target"]
    rng = np.random.default_rng(2)
    q, k, v = rng.standard_normal((3, 1, 2, 6, 3))
    full = target.attention(q, k, v, causal=True, seed=0)
    first, state = target.stateful(q[:, :, :2], k[:, :, :2], v[:, :, :2])
    rest, _ = target.chunked(q[:, :, 2:], k[:, :, 2:], v[:, :, 2:], chunk_size=3,
                             initial_state=state)
    assert np.abs(np.concatenate([first, rest], axis=2) - full).max() <= TOL
    state, o = target.step(state, q[:, :, 2], k[:, :, 2], v[:, :, 2])
    assert np.abs(o - full[:, :, 2]).max() <= TOL


def _recurrence(q, k, v, update):
    """``S_t = update(S_(t−1), t)`` then ``o_t = S_tᵀ q_t``, one (batch, head) pair at a time."""
    b, h, t, d = q.shape
    out = np.zeros((b, h, t, v.shape[-1]))
    for i in range(b):
        for j in range(h):
            s = np.zeros((d, v.shape[-1]))
            for n in range(t):
                s = update(s, i, j, n)
                out[i, j, n] = s.T @ q[i, j, n]
    return out


def test_the_gated_and_delta_targets_follow_their_recurrences():
    scope = _run(3)
    gated, delta, phi = scope["gated"], scope["delta"], scope["phi"]
    rng = np.random.default_rng(3)
    q, k = rng.standard_normal((2, 1, 2, 5, 3))
    v = rng.standard_normal((1, 2, 5, 2))
    g = -rng.exponential(1.0, (1, 2, 5))
    beta = rng.uniform(0, 1, (1, 2, 5))

    def decay(s, i, j, n):  # S_t = e^(g_t) S_(t−1) + k_t v_tᵀ
        return np.exp(g[i, j, n]) * s + np.outer(k[i, j, n], v[i, j, n])

    out, _ = gated.chunked(q, k, v, g, chunk_size=2)
    assert np.abs(out - _recurrence(q, k, v, decay)).max() <= TOL
    fq, fk = phi(q, "q"), phi(k, "k")

    def delta_rule(s, i, j, n):  # S_t = (I − β k kᵀ) S_(t−1) + β k vᵀ on the features
        kk, bb = fk[i, j, n], beta[i, j, n]
        return s - bb * np.outer(kk, kk @ s) + bb * np.outer(kk, v[i, j, n])

    out, _ = delta.chunked(q, k, v, None, beta=beta, chunk_size=2)
    assert np.abs(out - _recurrence(fq, fk, v, delta_rule)).max() <= TOL


def test_the_hybrid_target_is_window_softmax_plus_linear_attention():
    scope = _run(4)
    target, elu1 = scope["target"], scope["elu1"]
    rng = np.random.default_rng(4)
    q, k = rng.standard_normal((2, 1, 2, 6, 3))
    v = rng.standard_normal((1, 2, 6, 2))
    window = 2
    out, _ = target.attention(q, k, v, window=window)
    for i in range(6):  # weights: e^(qᵀk/√d) inside the window, φ(q)ᵀφ(k) before it
        j = np.arange(i + 1)
        inside = j > i - window
        w = np.where(inside, np.exp(np.einsum("bhd,bhjd->bhj", q[..., i, :], k[..., j, :])
                                    / np.sqrt(3)),
                     np.einsum("bhd,bhjd->bhj", elu1(q[..., i, :]), elu1(k[..., j, :])))
        want = np.einsum("bhj,bhjv->bhv", w / w.sum(-1, keepdims=True), v[..., j, :])
        assert np.abs(out[..., i, :] - want).max() <= TOL


@pytest.mark.filterwarnings("ignore")
def test_the_model_target_runs_the_model_properties_through_check():
    import kernel_verify

    target = _run(5)["target"]
    result = kernel_verify.check([target], profile="ci", keyword="models", progress=False)
    ran = [v for v in result.verdicts if v.family == "models" and v.outcome == "pass"]
    assert result.ok and result.exit_code == 0, str(result)
    # forward, float64, prefill/step are offered: at least the determinism, batch independence
    # and decode properties pass; the calls it lacks (generate, packed, padded) are skipped
    assert {"test_same_seed_and_input_give_the_same_output",
            "test_decode_equals_full_forward_at_every_split"} <= {v.prop for v in ran}, \
        str(result)
    skipped = {v.prop for v in result.verdicts if v.outcome == "skip"}
    assert "test_packed_sequences_equal_separate_runs" in skipped
