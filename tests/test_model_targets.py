"""Model targets (properties/model_protocol.py): declarations are validated with errors that name
the field; the model checks hold on the built-in tiny LM and their planted defects fail; a smoke
run of the shipped model adapters (fla's models under Triton's interpreter in a subprocess,
transformers' on the torch path), each skipping with the reason when its library is missing.
The full model properties run in properties/test_models.py (built-in) and through
``kernel-verify check kernel_verify.adapters.fla_models:targets``."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest
import torch

from kernel_verify.properties import model_checks as mc
from kernel_verify.properties.builtin_models import tiny_lm_calls, tiny_lm_target
from kernel_verify.properties.model_protocol import ModelTarget
from tests.library_marks import needs


def _fields(**kw):
    claims = frozenset({"float64", "left_padding", "right_padding"})
    return {**tiny_lm_calls(), "claims": claims, **kw}


@pytest.mark.parametrize(("kw", "error", "words"), [
    ({"forward": None}, TypeError, "forward"),
    ({"vocab_size": 1}, ValueError, "vocab_size"),
    ({"max_len": 3}, ValueError, "max_len"),
    ({"init_scales": ()}, TypeError, "init_scales"),
    ({"init_scales": (4.0, 1.0)}, ValueError, "must rise"),
    ({"init_scales": (0.0,)}, ValueError, "positive"),
    ({"claims": frozenset({"fast"})}, ValueError, "fast"),
    ({"step": None}, ValueError, "step"),
    ({"claims": frozenset({"left_padding"}), "padded": None}, ValueError, "padded call"),
    ({"claims": frozenset()}, ValueError, "padded"),
    ({"call_seconds": -1}, ValueError, "call_seconds"),
    ({"known_failures": {"test_x": ""}}, TypeError, "known_failures"),
])
def test_bad_model_declarations_name_the_field(kw, error, words):
    with pytest.raises(error, match=words):
        ModelTarget("m", **_fields(**kw))


def test_the_built_in_lm_offers_every_call_and_runs_in_float64():
    t = tiny_lm_target()
    assert all(t.offers(c) for c in ("prefill", "step", "generate", "packed", "padded"))
    m32, m64 = (t.build(3, init_scale=2.0, dtype=d) for d in ("float32", "float64"))
    for a, b in zip(m32.parameters(), m64.parameters(), strict=True):
        assert b.dtype == torch.float64 and torch.equal(a.double(), b)
    with pytest.raises(ValueError, match="call must be one of"):
        t.offers("beam_search")


@pytest.mark.parametrize("check", [mc.decode, mc.generate, mc.packed, mc.left_padding,
                                   mc.right_padding, mc.gradients, mc.second_backward,
                                   mc.batch_independent, mc.same_seed, mc.finite],
                         ids=lambda f: f.__name__)
def test_each_check_passes_on_the_built_in_lm_and_its_defect_fails(check):
    """The power control, float64 and float32: the planted defect fails at the default init
    (the finiteness sweep in float64 needs init 4: its naive log-softmax overflows only past
    logits of ~709), and the correct model passes at every scale climbed."""
    t = tiny_lm_target()
    case = mc.control_case(t)
    for dtype in ("float64", "float32"):
        power = mc.power_ladder(t, check, dtype, "planted defect")
        assert power.problem is None and power.scale is not None, power
        want = 4.0 if (check is mc.finite and dtype == "float64") else 1.0
        assert power.scale == want
        assert check(t, dtype, power.scale, case, True) is not None


def test_a_false_float64_claim_is_refused():
    """A float64 model that is not the float32 model's function makes tolerances underivable:
    the check says so instead of deriving a huge tolerance."""
    base = tiny_lm_calls()

    def build(seed, *, init_scale=1.0, dtype="float32"):
        return base["build"](seed + (dtype == "float64"), init_scale=init_scale, dtype=dtype)

    t = ModelTarget("liar", **_fields(build=build, claims=frozenset({"float64"}),
                                      padded=None))
    with pytest.raises(AssertionError, match="does not compute its float32"):
        mc.decode(t, "float32", 1.0, mc.control_case(t), False)


# ------------------------------------------------------------------ shipped adapters (smoke)
_FLA_SMOKE = textwrap.dedent("""
    from kernel_verify.adapters import fla_models
    from kernel_verify.properties import model_checks as mc
    t = fla_models.family_target("linear_attn")
    t = t.__class__(**{**t.__dict__, "max_len": 6})
    case = mc.control_case(t)
    assert mc.decode(t, "float32", 16.0, case, False) is None
    assert mc.decode(t, "float32", 16.0, case, True) is not None
    # the finding: LinearAttentionForCausalLM drops cu_seqlens (state carried across)
    problem = mc.packed(t, "float32", 16.0, case, False)
    assert problem and "packed sequences" in problem, problem
    print("ok")
""")


@needs("fla_models")
def test_fla_model_smoke_under_the_interpreter():
    """One fla family: cached decoding equals the full forward at init ×16 (its control fails),
    and packing still shows the dropped ``cu_seqlens`` (a fresh process: the interpreter must
    be on before triton is imported)."""
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["OMP_NUM_THREADS"] = "1"
    proc = subprocess.run([sys.executable, "-c", _FLA_SMOKE], capture_output=True, text=True,
                          env=env, timeout=300, check=False)
    assert proc.returncode == 0 and proc.stdout.strip().endswith("ok"), proc.stderr[-3000:]


@needs("transformers_models")
def test_transformers_model_smoke():
    """transformers' Mamba decodes like its full forward (float32); RWKV's batched one-token
    step mixes rows (the finding: logits (B, B, V))."""
    from kernel_verify.adapters import transformers_models as tm

    mamba = tm.family_target("mamba")
    case = mc.control_case(mamba)
    assert mc.decode(mamba, "float32", 1.0, case, False) is None
    rwkv = tm.family_target("rwkv")
    m = rwkv.build(0)
    ids = torch.randint(0, rwkv.vocab_size, (2, 5), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        state = m(input_ids=ids[:, :4], use_cache=True).state
        logits = m(input_ids=ids[:, 4:], state=state, use_cache=True).logits
    assert tuple(logits.shape) == (2, 2, rwkv.vocab_size)


# ------------------------------------------------------------ the delta-rule model families
_DELTA = ("delta_net", "gated_deltanet", "kda", "comba")


def test_fla_delta_families_are_declared_and_not_run_is_disjoint():
    """The delta families are model targets (each with the kernel its layer picks) and what
    does not run says why; no family is both (read without importing fla)."""
    from kernel_verify.adapters import fla_models as fm

    assert set(_DELTA) <= set(fm.FAMILIES) and set(_DELTA) == set(fm.DELTA_MODES)
    assert not set(fm.NOT_RUN) & set(fm.FAMILIES)
    assert "does not support float32" in fm.NOT_RUN["gated_deltaproduct"]
    assert all(fm.family_target(f).max_len == fm.DELTA_MAX_LEN for f in _DELTA)
    # one layer for the delta families; the others keep two (one cache entry per layer)
    layers = {f: fm.FAMILIES[f][2].get("num_hidden_layers", 2) for f in fm.FAMILIES}
    assert {layers[f] for f in _DELTA} == {fm.DELTA_LAYERS} == {1}
    assert {n for f, n in layers.items() if f not in _DELTA} == {2}
    assert set(fm.DECODE_MASK) == {"retnet"}
    # DeltaNet's constant-state backward is declared on the gradient property, and only there
    grad = "test_gradients_through_the_cache_equal_full_forward"
    assert set(fm.CONSTANT_STATE_BACKWARD) == {"delta_net"}
    assert [f for f in fm.FAMILIES if grad in fm.known_failures(f)] == ["delta_net"]
    with pytest.raises(ValueError, match="fla family"):
        fm.family_target("gated_deltaproduct")


_FLA_DELTA_SMOKE = textwrap.dedent("""
    import torch
    from kernel_verify.adapters import fla_models as fm
    ids = torch.randint(0, 64, (1, 4), generator=torch.Generator().manual_seed(0))
    for family in fm.DELTA_MODES:
        t = fm.family_target(family)
        m = t.build(0)
        with torch.no_grad():
            assert t.forward(m, ids).shape == (1, 4, 64), family
    # GatedDeltaProduct refuses float32 (NOT_RUN says so, with the message)
    fm.FAMILIES["gdp"] = ("GatedDeltaProductConfig", "GatedDeltaProductForCausalLM",
                          {"num_heads": 2, "head_dim": 16})
    t = fm.family_target("gdp")
    try:
        t.forward(t.build(0), ids)
        raise SystemExit("GatedDeltaProduct ran in float32")
    except AssertionError as err:
        assert "does not support float32" in str(err), err
    # a backward through a cached step reaches causal_conv1d's dh0 kernel (the mask workaround)
    t = fm.family_target("delta_net")
    m = t.build(0)
    logits, cache = t.prefill(m, ids[:, :3])
    step, _ = t.step(m, cache, ids[:, 3])
    step.sum().backward()
    grads = [p.grad for p in m.parameters() if p.grad is not None]
    assert grads and all(bool(torch.isfinite(g).all()) for g in grads)
    # the DeltaNet finding on the kernel alone: a constant initial state breaks the backward
    lines = fm.constant_state_backward().splitlines()
    assert "requires_grad=True: backward ran" in lines[0], lines
    assert "requires_grad=False: InterpreterError" in lines[1], lines
    print("ok")
""")


@needs("fla_models")
def test_fla_delta_families_build_under_the_interpreter():
    """Each delta family builds and runs a forward in float32; GatedDeltaProduct refuses float32
    with the message NOT_RUN quotes; a backward through a cached step runs; DeltaNet's
    kernel raises in backward with a constant initial state (the page's finding)."""
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["OMP_NUM_THREADS"] = "1"
    proc = subprocess.run([sys.executable, "-c", _FLA_DELTA_SMOKE], capture_output=True,
                          text=True, env=env, timeout=300, check=False)
    assert proc.returncode == 0 and proc.stdout.strip().endswith("ok"), proc.stderr[-3000:]


_QWEN_SMOKE = textwrap.dedent("""
    import sys, inspect
    from kernel_verify.adapters import transformers_models as tm
    from kernel_verify.properties import model_checks as mc
    t = tm.family_target("qwen3_next")
    m = t.build(0)
    mq = sys.modules["transformers.models.qwen3_next.modeling_qwen3_next"]
    impl = inspect.getclosurevars(mq.torch_chunk_gated_delta_rule).nonlocals["implementation"]
    assert impl.__module__ == mq.__name__, impl.__module__
    assert m.config.layer_types == ["linear_attention", "full_attention"]
    case = mc.control_case(t)
    assert mc.decode(t, "float32", 1.0, case, False) is None
    assert mc.decode(t, "float32", 1.0, case, True) is not None
    # the float64 model decodes with float32 accuracy (the page's Minor)
    problem = mc.decode(t, "float64", 1.0, case, False)
    assert problem and "float64" in problem, problem
    print("ok")
""")


@needs("transformers_models")
def test_transformers_qwen3_next_runs_its_torch_delta_rule():
    """Qwen3-Next is built on transformers' PyTorch gated delta rule even where fla is
    importable (a fresh process: the binding happens at import), decodes like its full forward
    in float32 (its control fails), and its float64 model does not reach float64 accuracy."""
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = subprocess.run([sys.executable, "-c", _QWEN_SMOKE], capture_output=True, text=True,
                          env=env, timeout=300, check=False)
    assert proc.returncode == 0 and proc.stdout.strip().endswith("ok"), proc.stderr[-3000:]


# ------------------------------------------- a padded prefill whose positions count the pads
class _CountsPads(torch.nn.Module):
    """An HF-style recurrent LM whose state leaves the pads out but whose positions are the
    cache's length corrected by the attention mask it is given (as fla's RetNet rotates q and
    k): ``state_t = Σ_{valid s ≤ t} E[x_s]``, ``logits_t = (state_t + P[pos_t]) Eᵀ`` with
    ``pos_t = seen + t − (zeros of the mask)``."""

    def __init__(self):
        super().__init__()
        self.emb = torch.nn.Parameter(torch.randn(32, 8))
        self.pos = torch.nn.Parameter(torch.randn(16, 8))

    def forward(self, input_ids, past_key_values=None, use_cache=True, attention_mask=None):
        from types import SimpleNamespace

        b, t = input_ids.shape
        seen, state = ((0, torch.zeros(b, 8, dtype=self.emb.dtype)) if past_key_values is None
                       else past_key_values)
        mask = (torch.ones(b, seen + t, dtype=torch.int64) if attention_mask is None
                else attention_mask)
        new, pads = mask[:, -t:].to(self.emb.dtype), (mask == 0).sum(1)
        out = []
        for i in range(t):
            state = state + new[:, i:i + 1] * self.emb[input_ids[:, i]]
            pos = (seen + i - pads).clamp(min=0)
            out.append((state + self.pos[pos]) @ self.emb.T)
        return SimpleNamespace(logits=torch.stack(out, 1), past_key_values=(seen + t, state))


def test_a_padded_prefill_passes_its_mask_on_where_positions_count_the_pads():
    """hf_models' ``decode_mask``: steps after a masked prefill without the mask run each row's
    positions on from the padded length (the check fails, as fla's RetNet did); with the mask
    extended by ones (what ``generate`` passes) they pass, and the planted defect (pads in the
    state) still fails."""
    from kernel_verify.adapters.hf_models import hf_model_target

    def target(decode_mask: bool):
        return hf_model_target("counts-pads", _CountsPads, vocab_size=32, generate=False,
                               float64=True, claims=frozenset({"left_padding"}),
                               padded_prefill=True, decode_mask=decode_mask)

    for dtype in ("float64", "float32"):
        without, with_mask = target(False), target(True)
        case = mc.serving_control_case(without)
        problem = mc.padded_decode(without, dtype, 1.0, case, False)
        assert problem and "steps after a prefill left-padded" in problem, problem
        assert mc.padded_decode(with_mask, dtype, 1.0, case, False) is None
        assert mc.padded_decode(with_mask, dtype, 1.0, case, True) is not None
        assert mc.decode(with_mask, dtype, 1.0, mc.control_case(with_mask), False) is None
