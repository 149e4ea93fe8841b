"""The public interpreter helper (kernel_verify/adapters/triton_interpreter.py): ``prepare()``
before triton imports, and a bfloat16 ``tl.dot`` under the interpreter equals the float32
product of the bfloat16 values (Triton 3.9's interpreter multiplies their bit patterns without
the patch: off by ~1e10), float16 and float32 unchanged. Run in a fresh process: the
interpreter must be on before triton is imported."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

pytest.importorskip("triton")

SCRIPT = textwrap.dedent("""
    from kernel_verify.adapters.triton_interpreter import prepare
    prepare()
    import torch, triton, triton.language as tl

    @triton.jit
    def k_dot(a_ptr, b_ptr, c_ptr, N: tl.constexpr):
        i = tl.arange(0, N)
        a = tl.load(a_ptr + i[:, None] * N + i[None, :])
        b = tl.load(b_ptr + i[:, None] * N + i[None, :])
        tl.store(c_ptr + i[:, None] * N + i[None, :], tl.dot(a, b))

    torch.manual_seed(0)
    A, B = torch.randn(16, 16), torch.randn(16, 16)
    for dt in (torch.bfloat16, torch.float16, torch.float32):
        a, b = A.to(dt), B.to(dt)
        c = torch.empty(16, 16)
        k_dot[(1,)](a, b, c, 16)
        err = float((c - a.float() @ b.float()).abs().max())
        assert err <= 1e-5 * float((a.float() @ b.float()).abs().max()), (dt, err)
    print("ok")
""")


def test_prepare_makes_a_bfloat16_dot_right_under_the_interpreter():
    proc = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True,
                          timeout=300, check=False)
    assert proc.returncode == 0 and proc.stdout.strip().endswith("ok"), proc.stderr[-3000:]
