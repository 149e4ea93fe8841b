"""fla's Triton kernels under Triton's interpreter (kernel_verify.adapters.fla): the interpreter
workarounds (kernel_verify.adapters._triton_interpreter) and a smoke run of every kernel target.

The workaround tests need neither fla nor triton. The smoke test runs the kernels in a fresh
subprocess (``TRITON_INTERPRET=1`` must be set before triton is imported; this pytest process may
already have imported it through fla's feature maps) and skips with the reason when fla or
triton is missing (``pip install 'kernel-verify[fla]'``).
"""

from __future__ import annotations

import builtins
import importlib.util
import os
import subprocess
import sys
import textwrap
import types

import pytest

from kernel_verify.adapters import _triton_interpreter as ti


# ------------------------------------------------------------------ loop variables
def test_loop_range_yields_the_builtin_range_values_as_loop_ints():
    for args in ((0,), (5,), (2, 9), (9, 2, -3), (0, 130, 64), (-4, 4, 3)):
        got = list(ti.loop_range(*args))
        assert got == list(builtins.range(*args))
        assert all(type(i) is ti.LoopInt for i in got)
        r = ti.loop_range(*args)
        assert len(r) == len(builtins.range(*args))
        assert list(reversed(r)) == list(reversed(builtins.range(*args)))
        if len(r):
            assert r[-1] == builtins.range(*args)[-1] and type(r[-1]) is ti.LoopInt


def test_loop_int_keeps_its_type_and_value_through_integer_arithmetic():
    i = ti.LoopInt(7)
    cases = {"i * 64": (i * 64, 448), "64 * i": (64 * i, 448), "i + 1": (i + 1, 8),
             "1 + i": (1 + i, 8), "i - 9": (i - 9, -2), "9 - i": (9 - i, 2),
             "i // 2": (i // 2, 3), "i % 4": (i % 4, 3), "-i": (-i, -7), "i << 2": (i << 2, 28),
             "i & 3": (i & 3, 3)}
    for what, (got, want) in cases.items():
        assert got == want and type(got) is ti.LoopInt, what
    assert i == 7 and hash(i) == hash(7) and isinstance(i, int)
    assert type(i / 2) is float  # true division is not integer arithmetic


def test_patch_range_sets_the_module_global_only():
    mod = types.ModuleType("kernels")
    ti.patch_range(mod)
    assert mod.range is ti.loop_range
    assert builtins.range is not ti.loop_range


# ------------------------------------------------------------------ environment and autotuner
def test_enable_sets_the_variable_before_triton_is_imported(monkeypatch):
    monkeypatch.delenv(ti.ENV, raising=False)
    monkeypatch.delitem(sys.modules, "triton", raising=False)
    ti.enable()
    assert os.environ[ti.ENV] == "1" and ti.interpreting()


def test_enable_refuses_when_triton_was_imported_without_it(monkeypatch):
    monkeypatch.setenv(ti.ENV, "0")
    monkeypatch.setitem(sys.modules, "triton", types.ModuleType("triton"))
    with pytest.raises(ti.TritonAlreadyImported, match="TRITON_INTERPRET=1"):
        ti.enable()


def test_every_configuration_gets_the_same_time_without_running():
    ran = []
    times = [ti._same_time(lambda: ran.append(1), quantiles=(0.5, 0.2, 0.8)) for _ in range(3)]
    assert ran == [] and times[0] == times[1] == times[2]
    assert min(range(3), key=lambda j: times[j]) == 0  # the autotuner's min keeps the first


# ------------------------------------------------------------------ smoke run of the kernels
def _missing() -> str | None:
    for mod, dist in (("fla", "fla-core"), ("triton", "triton")):
        if importlib.util.find_spec(mod) is None:
            return f"{dist} is not installed (pip install 'kernel-verify[fla]')"
    return None


SMOKE = textwrap.dedent("""
    import numpy as np, torch
    from kernel_verify.adapters import fla as ad, _fla_confirm as fc
    from kernel_verify.adapters import _triton_interpreter as ti
    import sys
    import triton, triton.language as tl
    assert ti.interpreting()

    @triton.jit
    def loop_kernel(out, N: tl.constexpr):  # fla's idiom: the loop variable's .to(tl.int64)
        acc = tl.zeros([1], dtype=tl.int64)
        for i in range(0, N):
            acc += (i * 2).to(tl.int64)
        tl.store(out + tl.arange(0, 1), acc)

    out = torch.zeros(1, dtype=torch.int64)
    try:
        loop_kernel[(1,)](out, N=4)
        raise AssertionError("the builtin range's ints answered .to: the workaround is moot")
    except Exception as err:
        assert "has no attribute 'to'" in str(err), err
    ti.patch_range(sys.modules[__name__])
    loop_kernel[(1,)](out, N=4)
    assert int(out[0]) == 12, out
    # a launch restores triton.language and its core after the run (patch_nested_lang)
    from triton.runtime import interpreter
    ad.ops()
    assert interpreter._patch_lang._kv_nested
    before = (tl.load, tl.core.load, tl.core.full)
    # every kernel target, a length across the 16-token chunks of fused_chunk_based, d = 4
    q, k, v = fc._inputs(0, 1, 2, 20, 4, 3)
    for tgt in ad.attention_targets:
        want, bound = fc.exact(tgt.name.split("+")[0][4:], q, k, v)
        got = tgt(*(torch.tensor(x, dtype=torch.float32) for x in (q, k, v)), causal=True)
        assert (np.abs(got - want) <= bound).all(), (tgt.name, np.abs(got - want).max())
    assert (tl.load, tl.core.load, tl.core.full) == before
    # one backward pass of a chunked kernel against float64 autograd of the formula
    tgt = ad.attention_targets[1]
    ins = [fc._torch(x, grad=True) for x in (q, k, v)]
    tgt.attention(*ins, causal=True).sum().backward()
    ref = [torch.tensor(x, requires_grad=True) for x in (q, k, v)]
    fc._torch_exact("fused_chunk_linear_attn", *ref).sum().backward()
    from kernel_verify.verify.tolerance import gamma
    tol = 100 * gamma(2 * 20 + 15 + 4, 2.0**-24)  # see the test's docstring
    for a, r in zip(ins, ref):
        err = np.abs(fc._np(a.grad) - r.grad.numpy()).max() / np.abs(r.grad.numpy()).max()
        assert err <= tol, (err, tol)
    print("ok")
""")


@pytest.mark.skipif(_missing() is not None, reason=_missing() or "")
def test_every_fla_kernel_target_runs_under_the_interpreter_within_its_bound(tmp_path):
    """Six kernels forward within the derived float32 bound of ``_fla_confirm.exact`` (T = 20,
    d = 4); a loop kernel with fla's ``i.to(tl.int64)`` idiom (fails without the ``range``
    workaround, gives the compiled result with it); one backward pass
    (fused_chunk_linear_attn) against float64 autograd of the formula, relative to the largest
    gradient entry within ``100·γ_(2T+m+4)(u₃₂)`` (m = 15 Taylor features): the forward
    chain's bound with an assumed factor 100 for the backward's longer chains and cancellation
    (a stated assumption, as in test_gradients' low-precision check; a wrong backward errs by
    O(1); measured 2e-7 to 6e-7). In a subprocess with ``TRITON_INTERPRET`` unset (the adapter
    sets it)."""
    env = {k: v for k, v in os.environ.items() if k != ti.ENV}
    script = tmp_path / "fla_smoke.py"  # a file: the interpreter reads a kernel's source
    script.write_text(SMOKE)
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          env=env, timeout=300, check=False)
    assert proc.returncode == 0 and proc.stdout.strip().endswith("ok"), (
        proc.stdout[-2000:] + proc.stderr[-4000:])


def test_every_fla_finding_and_measurement_has_its_confirmation():
    """The conformance page runs ``confirm.run(name)`` for each fla finding and measurement;
    a missing name stops ``kernel-verify conformance fla`` after its suite run."""
    from kernel_verify.adapters.library import confirmation_owner, record

    lib = record("fla")
    names = [f.confirm for f in lib.findings] + list(lib.measured)
    assert names and all(confirmation_owner(n) is lib for n in names)
