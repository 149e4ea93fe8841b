"""The declaration probe (kernel_verify/probe.py, issue #45): every built-in and cheap adapter
target passes it (a correct target is never refused), and each kind of inconsistent declaration
is one error naming the target and the field, raised by ``check()`` before any property runs and
printed by ``kernel-verify check`` on stderr with exit status 2."""

from __future__ import annotations

import dataclasses
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

from kernel_verify import (
    AttentionTarget,
    FeatureMapTarget,
    KernelApproxTarget,
    ModelTarget,
    RandomMatrixTarget,
    check,
)
from kernel_verify.cli import main
from kernel_verify.probe import DeclarationError, probe_target, probe_targets
from kernel_verify.properties.builtin_models import CLAIMS as MODEL_CLAIMS


def _builtin() -> list:
    from kernel_verify.properties.builtin import builtin_targets
    from kernel_verify.properties.builtin_approx import approximation_targets
    from kernel_verify.properties.builtin_attention import registry_attention_targets
    from kernel_verify.properties.builtin_delta import builtin_delta_targets
    from kernel_verify.properties.builtin_gated import builtin_gated_targets
    from kernel_verify.properties.builtin_hybrid import builtin_hybrid_targets
    from kernel_verify.properties.builtin_lowrank import lowrank_attention_targets
    from kernel_verify.properties.builtin_models import model_targets

    seen: dict = {}
    for group in (builtin_targets(), builtin_gated_targets(), builtin_delta_targets(),
                  lowrank_attention_targets(), approximation_targets(), model_targets(),
                  builtin_hybrid_targets(), registry_attention_targets()):
        for t in group:
            seen[(type(t).__name__, t.name)] = t
    return list(seen.values())


def test_no_builtin_target_is_refused():
    targets = _builtin()
    kinds = {type(t).__name__ for t in targets}
    assert kinds == {"FeatureMapTarget", "AttentionTarget", "GatedAttentionTarget",
                     "HybridAttentionTarget", "ModelTarget", "RandomMatrixTarget",
                     "KernelApproxTarget"}
    start = time.monotonic()
    problems = {t.name: probe_target(t) for t in targets}
    assert {n: p for n, p in problems.items() if p} == {}
    assert time.monotonic() - start < 60  # one call per declared function: cheap


@pytest.mark.parametrize("spec", ["kernel_verify.examples.my_favor:targets",
                                  "kernel_verify.examples.linear_forms:targets",
                                  "kernel_verify.adapters.sklearn:targets",
                                  "kernel_verify.adapters.performer:targets",
                                  "kernel_verify.adapters.nystrom_attention:targets"])
def test_example_and_adapter_targets_are_not_refused(spec):
    from kernel_verify.properties.loader import load_targets

    module = spec.partition(":")[0]
    library = {"sklearn": "sklearn", "performer": "performer_pytorch",
               "nystrom_attention": "nystrom_attention"}.get(module.rpartition(".")[2])
    if library:
        pytest.importorskip(library)
    targets = load_targets(spec)
    assert targets and [p for t in targets for p in probe_target(t)] == []


# ------------------------------------------------------------------ inconsistent declarations
def _positive(x, seed):
    w = np.random.default_rng(seed).standard_normal((8, x.shape[-1]))
    return np.exp(x @ w.T - 0.5 * np.sum(x * x, axis=-1, keepdims=True)) / np.sqrt(8)


def _twice(x, seed):  # 2m features where m are declared
    return np.concatenate([_positive(x, seed), _positive(x, seed + 1)], axis=-1)


def _rff(x, seed):  # [cos, sin] pairs of a Gaussian kernel at lengthscale 3
    w = np.random.default_rng(seed).standard_normal((x.shape[-1], 8)) / 3.0
    return np.concatenate([np.cos(x @ w), np.sin(x @ w)], -1) / np.sqrt(8)


def _rff_target(name, **kw):
    return FeatureMapTarget(name, "gaussian", frozenset({"unbiased", "bounded"}), sample_fn=_rff,
                            m=8, output_dim=lambda d, m: 2 * m, **kw)


def _softmax(q, k, v, *, causal, seed=0):
    s = q @ k.swapaxes(-1, -2)
    if causal:
        s = np.where(np.tri(*s.shape[-2:], dtype=bool), s, -np.inf)
    w = np.exp(s - s.max(-1, keepdims=True))
    return (w / w.sum(-1, keepdims=True)) @ v


def _elu_forms():
    from kernel_verify.examples import linear_forms as lf

    return lf


def _bad_targets() -> list[tuple[object, str, str]]:
    """(target, the field the error must name, words it must contain)."""
    lf = _elu_forms()
    claims = frozenset({"causal", "noncausal"})
    good_attention = AttentionTarget("ok", lf.attention, claims, stateful=lf.stateful,
                                     step=lf.step, features=lambda x, seed: lf.phi(x),
                                     state_sums=lambda st: st)
    from kernel_verify.properties.builtin_gated import gated_target
    from kernel_verify.properties.builtin_hybrid import hybrid_target
    from kernel_verify.properties.builtin_models import tiny_lm_calls

    gated = gated_target("scalar")
    hybrid = hybrid_target("hyb")
    calls = tiny_lm_calls()
    build = calls["build"]
    return [
        (_rff_target("rff_config_not_kernel", formula="rff_pairs", config={"sigma": 3.0}),
         "kernel_params", "its default sigma=1"),
        (_rff_target("rff_unknown_kernel_param", kernel_params={"lengthscale": 3.0}),
         "kernel_params", "takes sigma; got ['lengthscale']"),
        (FeatureMapTarget("map_2m", "softmax", frozenset({"unbiased", "positive"}),
                          sample_fn=_twice, m=8, formula="softmax_positive"),
         "m", "16"),
        (AttentionTarget("attention_drops_heads", lambda q, k, v, *, causal, seed=0:
                         _softmax(q, k, v, causal=causal)[:, 0], frozenset({"noncausal"})),
         "attention", "shape"),
        (dataclasses.replace(good_attention, name="features_vs_count", feature_count=7),
         "features", "feature_count declares 7"),
        (dataclasses.replace(good_attention, name="stateful_out_only",
                             stateful=lambda q, k, v, *, initial_state=None, seed=0:
                             lf.stateful(q, k, v, initial_state=initial_state)[0]),
         "stateful", "pair"),
        (dataclasses.replace(good_attention, name="step_swapped",
                             step=lambda st, q, k, v, *, seed=0: lf.step(st, q, k, v)[::-1]),
         "step", "swapped"),
        (dataclasses.replace(good_attention, name="chunked_without_chunk_size",
                             chunked=lambda q, k, v, *, initial_state=None, seed=0:
                             lf.stateful(q, k, v, initial_state=initial_state)),
         "chunked", "chunk_size"),
        (dataclasses.replace(good_attention, name="state_sums_wide",
                             state_sums=lambda st: (np.concatenate([st[0], st[0]], 2), st[1])),
         "state_sums", "S of shape"),
        (dataclasses.replace(gated, name="gated_step_swapped",
                             step=lambda st, q, k, v, g, *, seed=0:
                             gated.step(st, q, k, v, g)[::-1]),
         "step", "state"),
        (dataclasses.replace(gated, name="gated_chunked_out_only",
                             chunked=lambda q, k, v, g, *, chunk_size, initial_state=None,
                             seed=0: gated.chunked(q, k, v, g, chunk_size=chunk_size)[0]),
         "chunked", "pair (out, final_state)"),
        (dataclasses.replace(hybrid, name="hybrid_out_only",
                             attention=lambda q, k, v, *, window, initial_state=None:
                             hybrid.attention(q, k, v, window=window)[0]),
         "attention", "pair"),
        (ModelTarget("model_ignores_dtype", **{
            **calls, "build": lambda seed, *, init_scale=1.0, dtype="float32":
            build(seed, init_scale=init_scale, dtype="float32")}, claims=MODEL_CLAIMS),
         "build", "dtype='float64'"),
        (ModelTarget("model_short_vocab", **{**calls, "vocab_size": calls["vocab_size"] + 1},
                     claims=MODEL_CLAIMS),
         "forward", "shape"),
        (RandomMatrixTarget("matrix_transposed", lambda rng, m, d:
                            rng.standard_normal((d, m)), frozenset()),
         "draw", "shape"),
        (KernelApproxTarget("approx_wrong_size", lambda x, kernel, rng:
                            (kernel(x, x)[:-1], np.arange(2)), frozenset()),
         "approximate", "shape"),
    ]


BAD = _bad_targets()


@pytest.mark.parametrize(("target", "field", "words"), BAD, ids=[t.name for t, _, _ in BAD])
def test_an_inconsistent_declaration_is_one_problem_naming_the_field(target, field, words):
    problems = probe_target(target)
    assert len(problems) == 1, problems
    [p] = problems
    assert p.target == target.name and p.field == field, p
    assert words in p.message, p
    with pytest.raises(DeclarationError) as info:
        probe_targets([target])
    text = str(info.value)
    assert text.startswith("1 declaration problem found before any property ran")
    assert f"target {target.name!r}: {field}:" in text


def test_a_correct_variant_of_each_bad_target_passes():
    """The control of the cases above: the unmodified targets they were made from pass."""
    lf = _elu_forms()
    from kernel_verify.properties.builtin_gated import gated_target
    from kernel_verify.properties.builtin_hybrid import hybrid_target
    from kernel_verify.properties.builtin_models import tiny_lm_calls

    good = [FeatureMapTarget("map_m", "softmax", frozenset({"unbiased", "positive"}),
                             sample_fn=_positive, m=8, formula="softmax_positive"),
            _rff_target("rff_ok", formula="rff_pairs", config={"sigma": 3.0},
                        kernel_params={"sigma": 3.0}),
            AttentionTarget("attention_ok", _softmax, frozenset({"noncausal", "causal"})),
            AttentionTarget("forms_ok", lf.attention, frozenset({"causal", "noncausal"}),
                            stateful=lf.stateful, step=lf.step, chunked=lf.chunked,
                            features=lambda x, seed: lf.phi(x), state_sums=lambda st: st,
                            feature_count=3),
            gated_target("scalar"), hybrid_target("hyb"),
            ModelTarget("model_ok", **tiny_lm_calls(), claims=MODEL_CLAIMS),
            RandomMatrixTarget("matrix_ok", lambda rng, m, d: rng.standard_normal((m, d)),
                               frozenset())]
    probe_targets(good)  # raises on any problem


def test_a_model_that_casts_its_own_logits_is_not_a_declaration_problem():
    """build honours the dtype (every weight float64) and the model's forward returns float32
    logits, as transformers' Mamba does: the model properties judge that, the probe does not
    refuse the target; the same forward over weights built in float32 is refused (above)."""
    from kernel_verify.properties.builtin_models import tiny_lm_calls

    calls = tiny_lm_calls()
    forward = calls["forward"]
    casting = ModelTarget("model_casts_logits", **{
        **calls, "forward": lambda model, ids: forward(model, ids).float()},
        claims=MODEL_CLAIMS)
    assert probe_target(casting) == []


def test_every_problem_of_every_target_is_listed_at_once():
    targets = [t for t, _, _ in BAD]
    with pytest.raises(DeclarationError) as info:
        probe_targets(targets)
    assert len(info.value.problems) == len(BAD)
    assert str(info.value).startswith(f"{len(BAD)} declaration problems found")


def test_check_refuses_before_any_property_runs():
    target = next(t for t, _, _ in BAD if t.name == "map_2m")
    start = time.monotonic()
    with pytest.raises(DeclarationError, match="'map_2m': m: does not match sample_fn"):
        check([target], profile="ci")
    assert time.monotonic() - start < 10  # no pytest run
    with pytest.raises(TypeError, match="probe must be a bool"):
        check([target], probe="no")


def test_cli_prints_the_problem_on_stderr_and_exits_2(tmp_path: Path, monkeypatch, capsys):
    (tmp_path / "kv_bad_map_adapter.py").write_text(textwrap.dedent("""
        import numpy as np
        from kernel_verify import FeatureMapTarget

        def features(x, seed):  # returns 2m = 16 features for the declared m = 8
            w = np.random.default_rng(seed).standard_normal((16, x.shape[-1]))
            return np.exp(x @ w.T - 0.5 * np.sum(x * x, axis=-1, keepdims=True)) / 4.0

        targets = [FeatureMapTarget("bad_m", "softmax", frozenset({"unbiased", "positive"}),
                                    sample_fn=features, m=8, formula="softmax_positive")]
        """), encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        code = main(["check", "kv_bad_map_adapter:targets", "--profile", "ci"])
    finally:
        sys.modules.pop("kv_bad_map_adapter", None)
    out, err = capsys.readouterr()
    assert code == 2
    assert "Traceback" not in out + err and "FAIL" not in out
    assert err.startswith("kernel-verify check: error: 1 declaration problem found")
    assert "target 'bad_m': m: does not match sample_fn" in err and "returned 16" in err


def test_a_declared_dtype_the_code_refuses_is_a_declaration_problem():
    """Every declared CPU (library, dtype) pair is probed once the first ran clean: a form that
    raises its own error on float32 while it ran on float64 contradicts ``dtypes`` (one line
    naming the pair, the call and the error); the same target declaring float64 only passes."""
    from kernel_verify.properties.builtin_gated import gated_target

    base = gated_target("scalar")

    def refuse_float32(fn):
        def form(q, *args, **kw):
            if str(getattr(q, "dtype", "")) in ("float32", "torch.float32"):
                raise TypeError("only float64 supported")
            return fn(q, *args, **kw)
        return form

    forms = {f: refuse_float32(getattr(base, f)) for f in ("parallel", "stateful", "chunked")
             if getattr(base, f) is not None}
    bad = dataclasses.replace(base, name="refuses_f32", backends=("numpy",),
                              dtypes=("float64", "float32"), step=None, varlen=None,
                              padded=None, **forms)
    [p] = probe_target(bad)
    assert p.field == "dtypes" and "numpy float32" in p.message, p
    assert "raised TypeError: only float64 supported" in p.message, p
    assert probe_target(dataclasses.replace(bad, dtypes=("float64",))) == []


def test_config_arrays_that_differ_from_the_kernels_are_one_declaration_error():
    """A spectral-mixture map drawn from ``config`` arrays (``pi``, ``mu``, ``L``) but checked
    against a kernel declared with others: refused before any property runs (a new user's ARD
    map declared ``config['L'] = 100·I`` against lengths 0.3–10 and passed 6/0)."""
    import numpy as np

    from kernel_verify import FeatureMapTarget
    from kernel_verify.probe import probe_target

    d = 4
    lengths = np.array([0.3, 3.0, 1.0, 10.0])

    def kernel_params(config, dim):
        return {"pi": np.array([1.0]), "mu": np.zeros((1, dim)),
                "L": np.diag(1.0 / np.resize(lengths, dim))[None]}

    def fn(x, seed):
        w = np.random.default_rng(seed).standard_normal((8, x.shape[-1])) / lengths[:x.shape[-1]]
        return np.concatenate([np.cos(x @ w.T), np.sin(x @ w.T)], axis=-1) / np.sqrt(8)

    def target(L):
        return FeatureMapTarget("ard", "spectral_mixture", frozenset({"unbiased"}),
                                kernel_params=kernel_params, sample_fn=fn, m=8,
                                formula="gmm_rks", matrix="iid",
                                config={"init_seed": 0, "n_components": 1, "pi": np.array([1.0]),
                                        "mu": np.zeros((1, d)), "L": L})

    bad = [str(p) for p in probe_target(target(100 * np.eye(d)[None]))]
    assert any("config['L']" in p and "differs from the kernel" in p for p in bad), bad
    good = [str(p) for p in probe_target(target(kernel_params(None, d)["L"]))]
    assert not any("config[" in p for p in good), good


def test_a_black_box_map_refusing_large_seeds_is_one_declaration_problem():
    """The suite passes seeds in [0, 2³²) to sample_fn; a map that seeds a library refusing
    the largest fails up front, not in property after property (a new user's rfflearn adapter
    with np.random.seed(seed) got five failed properties before)."""
    def phi(x, seed):
        if seed >= 2**31:
            raise ValueError("Seed must be between 0 and 2**31 - 1")
        w = np.random.RandomState(seed).standard_normal((np.shape(x)[-1], 8))
        return np.cos(x @ w) / 2

    def accepts_all(x, seed):
        return phi(x, seed % 2**31)

    bad = FeatureMapTarget("legacy", "gaussian", frozenset({"unbiased"}), sample_fn=phi, m=8)
    problems = probe_target(bad)
    assert [p.field for p in problems] == ["sample_fn"]
    assert "at seed 4294967295" in problems[0].message and "2**31" in problems[0].message
    assert probe_target(dataclasses.replace(bad, sample_fn=accepts_all)) == []


def _softmax_attention(q, k, v, *, causal, seed=0):
    """Exact softmax attention, NumPy, any dtype."""
    s = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
    if causal:
        s = np.where(np.tril(np.ones(s.shape[-2:], dtype=bool)), s, -np.inf)
    w = np.exp(s - s.max(axis=-1, keepdims=True))
    return (w / w.sum(axis=-1, keepdims=True)) @ v


def test_the_first_declared_dtype_that_raises_is_a_declaration_problem():
    """A kernel that raises on float64 (the first pair probed) while it runs on float32, both
    declared: refused naming float64 and the error (memory-efficient-attention-pytorch's
    FlashAttentionFunction made 15 FAIL verdicts of one float64 crash); declared float32 only,
    it passes."""
    def f32_only(q, k, v, *, causal, seed=0):
        if q.dtype == np.float64:
            raise RuntimeError("value cannot be converted to type float without overflow")
        return _softmax_attention(q, k, v, causal=causal)

    bad = AttentionTarget("f32_only", f32_only, frozenset({"causal", "noncausal"}),
                          dtypes=("float64", "float32"), feature_count=0)
    [p] = probe_target(bad)
    assert p.field == "dtypes" and "numpy float64" in p.message, p
    assert "ran on numpy float32" in p.message and "without overflow" in p.message, p
    assert probe_target(dataclasses.replace(bad, dtypes=("float32",))) == []


def test_a_kernel_needing_square_values_without_declaring_it_is_a_declaration_problem():
    """Raising with d_v ≠ d and running with d_v = d: the declaration lacks ``dv_equals_d``
    (one problem naming the field); declaring it passes; a kernel raising at every d_v is not
    blamed on the field."""
    def square(q, k, v, *, causal, seed=0):
        if v.shape[-1] != q.shape[-1]:
            raise RuntimeError("o = zeros_like(q): sizes 3 and 2 differ")
        return _softmax_attention(q, k, v, causal=causal)

    bad = AttentionTarget("square_values", square, frozenset({"causal", "noncausal"}),
                          feature_count=0)
    [p] = probe_target(bad)
    assert p.field == "dv_equals_d" and "dv_equals_d=True" in p.message, p
    assert probe_target(dataclasses.replace(bad, dv_equals_d=True)) == []

    def broken(q, k, v, *, causal, seed=0):
        raise RuntimeError("always")

    assert probe_target(dataclasses.replace(bad, attention=broken)) == []


def test_a_model_claiming_float64_that_cannot_run_it_is_a_declaration_problem():
    """The float32 model runs, the float64 one raises (MiniMax's grouped_mm experts): one
    problem on ``claims`` naming the error, not a FAIL of every float64 and float32 case (the
    float32 tolerances come from the float64 run); without the claim the target passes."""
    import torch

    from kernel_verify.properties.builtin_models import tiny_lm_calls

    calls = tiny_lm_calls()
    forward = calls["forward"]

    def no_float64(model, ids):
        if next(model.parameters()).dtype == torch.float64:
            raise RuntimeError("Expected mat_a to be Float32, got Double")
        return forward(model, ids)

    bad = ModelTarget("model_without_float64", **{**calls, "forward": no_float64},
                      claims=MODEL_CLAIMS | {"float64"})
    [p] = probe_target(bad)
    assert p.field == "claims" and "got Double" in p.message and "float32 model ran" in p.message
    assert probe_target(dataclasses.replace(bad, claims=bad.claims - {"float64"})) == []
