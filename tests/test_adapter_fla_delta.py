"""fla's delta-rule kernels and references (kernel_verify.adapters.fla_delta): every target
builds with the declarations the adapter documents, and one short call of each meets the exact
recurrence (kernel_verify.verify.references.recurrence.recurrence_mp) of its declared transition
and features.

The calls run in a fresh subprocess (``TRITON_INTERPRET=1`` must be set before triton is
imported; this pytest process may already have imported it) and skip with the reason when fla or
triton is missing (``pip install 'kernel-verify[fla]'``). The declarations test needs neither.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import textwrap

import pytest

from kernel_verify.adapters import _triton_interpreter as ti


def _module(monkeypatch):
    """The adapter, imported without turning the interpreter on in this process (its import sets
    ``TRITON_INTERPRET=1`` when triton is not yet imported)."""
    monkeypatch.setenv(ti.ENV, "1")
    from kernel_verify.adapters import fla_delta

    return fla_delta


def test_every_delta_target_builds_with_its_declared_transition(monkeypatch):
    from kernel_verify.impls.systems import TRANSITIONS
    from kernel_verify.properties.gated_protocol import GatedAttentionTarget

    fd = _module(monkeypatch)
    targets = fd.delta_targets()
    names = [t.name for t in targets]
    assert len(names) == len(set(names)) == len(fd.DELTA_KERNELS) + len(fd.NAIVE)
    for t in targets:
        assert isinstance(t, GatedAttentionTarget) and t.dtypes == ("float32",)
        assert t.gates in TRANSITIONS[t.transition][2], t.name
        key = t.name.removeprefix("fla.")
        want = (fd.DELTA_KERNELS[key][2] if key in fd.DELTA_KERNELS else fd.NAIVE[key][1])
        assert t.transition == want, t.name
        if key in fd.DELTA_KERNELS:  # every kernel: state in and out, steps, packed sequences
            assert t.step is not None and t.varlen is not None and t.state_sums is not None
            assert t.call_seconds is not None and t.layout == "BTHD"
    by_name = {t.name: t for t in targets}
    # fla's gk path decays before the delta rule: the kda transition, not gated_delta's
    assert by_name["fla.fused_recurrent_gated_delta_rule+gk"].transition == "kda"
    assert by_name["fla.chunk_gated_delta_rule"].chunk_sizes == (64, 32, 16)
    assert set(by_name["fla.naive_recurrent_comba"].known_failures) == {
        "test_gated_forms_meet_the_exact_recurrence", "test_gated_split_invariance",
        "test_gated_prefill_then_decode"}
    assert not set(fd.NOT_RUNNABLE) & set(fd.DELTA_KERNELS)


def _missing() -> str | None:
    for mod, dist in (("fla", "fla-core"), ("triton", "triton")):
        if importlib.util.find_spec(mod) is None:
            return f"{dist} is not installed (pip install 'kernel-verify[fla]')"
    return None


#: Absolute tolerance of one short call (T = 7, B = 1, H = 2, d = 4, d_v = 3, outputs ≲ 5 in
#: size): float32 rounding of these kernels measured ≤ 7e-7; a misdeclared convention (gate on
#: the wrong side, state transposed, a missing scale or normalisation) errs by 1e-2 or more.
TOL = 1e-5

SCRIPT = textwrap.dedent("""
    import numpy as np, torch
    from kernel_verify.adapters import fla_delta as fd
    from kernel_verify.adapters import _triton_interpreter as ti
    from kernel_verify.verify.references.recurrence import recurrence_mp
    assert ti.interpreting()
    TOL = float(__import__("sys").argv[1])
    B, H, T, D, DV = 1, 2, 7, 4, 3
    rng = np.random.default_rng(7)

    def unit(shape):
        x = rng.standard_normal(shape)
        return x / np.linalg.norm(x, axis=-1, keepdims=True)

    def f32(a):  # float32 values, exactly representable in float64 for the reference
        return torch.tensor(a, dtype=torch.float32)

    def r32(a):
        return None if a is None else f32(a).double().numpy()

    for t in fd.delta_targets():
        q, k, v = (r32(rng.standard_normal((B, H, T, w))) for w in (D, D, DV))
        g = {"scalar": lambda: -rng.uniform(0, 1, (B, H, T)),
             "key_dim": lambda: -rng.uniform(0, 1, (B, H, T, D)),
             "none": lambda: None}[t.gates]()
        g = r32(g)
        ins = {}
        if "beta" in t.token_inputs():
            ins["beta"] = rng.uniform(0, 1, (B, H, T))
        if "p" in t.token_inputs():
            ins["p"] = unit((B, H, T, D)) * rng.uniform(0, 1, (B, H, T, 1))
        if "a" in t.token_inputs():
            kappa = unit((B, H, T, D))
            ins["a"], ins["b"] = -kappa, kappa * rng.uniform(0, 1, (B, H, T, D))
        ins = {n: r32(a) for n, a in ins.items()}
        lay = lambda a: None if a is None else t.to_layout(f32(a))
        kw = {n: lay(a) for n, a in ins.items()}
        args = (lay(q), lay(k), lay(v), lay(g))
        s0 = None
        if t.stateful is not None or t.chunked is not None:
            s0 = r32(rng.standard_normal((B, H, D, DV)))
        if t.stateful is not None:
            o, s = t.stateful(*args, initial_state=(f32(s0),), **kw)
        elif t.chunked is not None:
            o, s = t.chunked(*args, chunk_size=(t.chunk_sizes or (3,))[-1],
                             initial_state=(f32(s0),), **kw)
        else:
            o, s = t.parallel(*args, **kw)
        if t.name == "fla.naive_recurrent_comba":  # the finding: A = e^g(I - beta k p^T)
            ins["p"] = ins["p"] * np.exp(g)[..., None]
        want, s_want = recurrence_mp(t.features(q, "q"), t.features(k, "k"), v,
                                     transition=t.transition, g=g, initial_state=s0, **ins)
        err = np.abs(t.to_layout(o).double().numpy() - want).max()
        assert err <= TOL, (t.name, err)
        if t.state_sums is not None:
            s_err = np.abs(t.state_sums(s)[0] - s_want).max()
            assert s_err <= TOL, (t.name, "state", s_err)
    # the kernels the adapter lists as not runnable still are not
    from fla.ops.delta_rule import chunk_delta_rule
    x = torch.randn(1, 5, 1, 4)
    try:
        chunk_delta_rule(q=x, k=x, v=x, beta=torch.rand(1, 5, 1))
        raise SystemExit("chunk_delta_rule ran in float32: update fla_delta.NOT_RUNNABLE")
    except AssertionError as err:
        assert "does not support float32" in str(err), err
    print("ok")
""")


@pytest.mark.skipif(_missing() is not None, reason=_missing() or "")
def test_every_delta_target_meets_the_exact_recurrence_on_a_short_call(tmp_path):
    """One call of each target's full-sequence form (with an initial state where it takes one)
    at T = 7 in float32, outputs and final state against the exact recurrence of the declared
    transition and features, within :data:`TOL`; ``naive_recurrent_comba`` against its own
    transition (the suite's ``comba`` with ``p`` replaced by ``e^g p``: the finding). In a
    subprocess with ``TRITON_INTERPRET`` unset (the adapter sets it)."""
    env = {k: v for k, v in os.environ.items() if k != ti.ENV}
    script = tmp_path / "fla_delta_smoke.py"  # a file: the interpreter reads a kernel's source
    script.write_text(SCRIPT)
    proc = subprocess.run([sys.executable, str(script), repr(TOL)], capture_output=True,
                          text=True, env=env, timeout=300, check=False)
    assert proc.returncode == 0 and proc.stdout.strip().endswith("ok"), (
        proc.stdout[-2000:] + proc.stderr[-4000:])


def _run_script(tmp_path, name: str, text: str, *args: str, timeout: int = 300):
    """``text`` as a file (the interpreter reads a kernel's source) run in a fresh process with
    ``TRITON_INTERPRET`` unset (the adapter sets it); returns the completed process."""
    env = {k: v for k, v in os.environ.items() if k != ti.ENV}
    script = tmp_path / name
    script.write_text(text)
    return subprocess.run([sys.executable, str(script), *args], capture_output=True, text=True,
                          env=env, timeout=timeout, check=False)


def test_gradient_kernels_are_the_ones_with_a_backward(monkeypatch):
    """Every kernel the backward check runs is declared differentiable, every other kernel
    says why it has no gradient here."""
    fd = _module(monkeypatch)
    by_name = {t.name: t for t in fd.delta_targets()}
    for kernel in fd.DELTA_KERNELS:
        differentiable = by_name[f"fla.{kernel}"].has("differentiable")
        assert differentiable == (kernel in fd.GRADIENT_KERNELS), kernel
        assert (kernel in fd.GRADIENT_KERNELS) != (kernel in fd.NO_BACKWARD), kernel


#: T of the backward check: crosses every block the kernels use along time (16, 32, 64).
GRAD_T = 65

GRAD_SCRIPT = textwrap.dedent("""
    import sys
    from kernel_verify.adapters import fla_delta as fd
    t = int(sys.argv[1])
    bad = []
    for kernel, chunks in fd.GRADIENT_KERNELS.items():
        for chunk in chunks:
            rows, gamma = fd.gradient_check(kernel, t=t, chunk=chunk)
            names = {r.name for r in rows}
            gated = fd.DELTA_KERNELS[kernel][3] != "none"
            need = {"o", "S_T", "q", "k", "v", "h0"} | ({"g"} if gated else set())
            assert need <= names, (kernel, names)
            for r in rows:
                assert r.scale > 0, (kernel, r)  # the reference gradient is not zero
                print(kernel, chunk, r.name, f"{r.error:.2e}", f"{r.tol:.2e}", r.ok)
                if not r.ok:
                    bad.append((kernel, chunk, r))
    assert not bad, bad
    print("ok")
""")


@pytest.mark.skipif(_missing() is not None, reason=_missing() or "")
def test_backward_of_the_delta_kernels_meets_float64_autograd(tmp_path):
    """fla's backward (chunk Gated DeltaNet at C = 16 and 64, chunk KDA at 32, chunk Comba,
    chunk RWKV-7, fused recurrent DeltaNet) at T = 65 with an initial state and a cotangent on
    the final state: the gradients w.r.t. q, k, v, the log-gates, β / p / a / b and the initial
    state (and the forward's output and final state) against float64 autograd through the
    suite's torch recurrence, within the normwise tolerance of
    :func:`kernel_verify.adapters.fla_delta.gradient_check`. (The gated suite's
    gradient properties run in torch float64 only, or for the decay transition only, so they
    do not reach these float32 kernels: this test is their gradient check.)"""
    proc = _run_script(tmp_path, "fla_delta_grad.py", GRAD_SCRIPT, str(GRAD_T))
    assert proc.returncode == 0 and proc.stdout.strip().endswith("ok"), (
        proc.stdout[-3000:] + proc.stderr[-4000:])


PLANTED_SCRIPT = textwrap.dedent("""
    import dataclasses, torch, kernel_verify
    from kernel_verify.adapters import fla_delta as fd
    K = "chunk_gated_delta_rule"
    base = fd._kernel_call(K)

    class ScaleGrad(torch.autograd.Function):
        # identity forward, backward multiplied by c
        @staticmethod
        def forward(ctx, x, c):
            ctx.c = c
            return x.view_as(x)

        @staticmethod
        def backward(ctx, grad):
            return grad * ctx.c, None

    def scaled(*args):  # (a) the kernel with its whole backward scaled by 1.03
        o, s = base(*args)
        return ScaleGrad.apply(o, 1.03), ScaleGrad.apply(s, 1.03)

    def ignore_state(q, k, v, g, kw, s0, cu, chunk):  # (b) the initial state ignored
        return base(q, k, v, g, kw, None, cu, chunk)

    for chunk in (16, 64):
        ok = [r.ok for r in fd.gradient_check(K, t=65, chunk=chunk)[0]]
        assert all(ok), ("control", chunk, ok)
        rows = fd.gradient_check(K, t=65, chunk=chunk, call=scaled)[0]
        killed = [r.name for r in rows if not r.ok]
        print("scaled backward, C =", chunk, "killed on", killed)
        # every gradient, not the forward rows (the forward is unchanged)
        assert set(killed) == {r.name for r in rows} - {"o", "S_T"}, killed
    # the forward of (a) is the kernel's own: the forward properties cannot see it
    x = fd.gradient_inputs(K, t=9)
    args = (x["q"], x["k"], x["v"], x["g"], {"beta": x["beta"]}, x["h0"], None, 16)
    assert torch.equal(base(*args)[0], scaled(*args)[0])

    ctl = dataclasses.replace(fd._kernel_target(K), chunk_sizes=(16,))
    mut = dataclasses.replace(
        fd._kernel_target(K, ignore_state, "fla.chunk_gated_delta_rule@initial_state_ignored"),
        chunk_sizes=(16,))
    res = kernel_verify.check([ctl, mut], profile="ci", keyword="test_gated_split_invariance",
                              jobs=1, progress=False)
    got = {v.target: v.outcome for v in res.verdicts}
    print(got)
    assert got == {ctl.name: "pass", mut.name: "fail"}, got
    print("ok")
""")


@pytest.mark.skipif(_missing() is not None, reason=_missing() or "")
def test_planted_defects_in_the_chunk_gated_delta_kernel_are_killed(tmp_path):
    """Two defects planted in fla's ``chunk_gated_delta_rule`` (the kernel itself, wrapped):
    (a) its backward scaled by 1.03 (forward unchanged, bitwise) is killed by the backward
    check on every input at C = 16 and 64 (3 % of the largest gradient against a tolerance of
    ~4e-4 of it), the unwrapped kernel passing; (b) its initial state ignored is killed by
    ``test_gated_split_invariance`` (the second half continued from the first half's state),
    run by ``kernel_verify.check`` in the ci profile, the unwrapped kernel passing. Both at the
    kernel's smallest block (C = 16, so the suite's layouts cross it at T = 15, 17, 33)."""
    proc = _run_script(tmp_path, "fla_delta_planted.py", PLANTED_SCRIPT, timeout=600)
    assert proc.returncode == 0 and proc.stdout.strip().endswith("ok"), (
        proc.stdout[-3000:] + proc.stderr[-4000:])
