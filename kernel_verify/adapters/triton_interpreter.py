"""Your own Triton kernels on a CPU, under Triton's interpreter (``TRITON_INTERPRET=1``), for
``kernel-verify check``: the workarounds the shipped fla adapters use, as one call.

In the module that wraps your kernels, before anything imports ``triton``::

    from kernel_verify.adapters.triton_interpreter import prepare
    prepare()                      # TRITON_INTERPRET=1, autotuner and bfloat16 tl.dot fixed
    import my_kernels              # your @triton.jit / @triton.autotune kernels
    prepare("my_kernels")          # loop indices that answer .to(tl.int64), in those modules

What each workaround does and why it leaves the kernel's arithmetic unchanged is in
``kernel_verify/adapters/_triton_interpreter.py``: the autotuner keeps its first configuration
(no GPU driver to time them; the interpreter's ``0 active drivers`` error otherwise), loop
variables are Python ints that lack ``.to``, and the interpreter's ``tl.dot`` multiplies the
bit patterns of bfloat16 operands (a bfloat16 target would fail by ~1e10 through no fault of
its own). The interpreter runs the algorithm in NumPy, program by program: GPU rounding and
which configuration a GPU picks are not exercised; declare ``call_seconds`` (small inputs, few
examples: ``--max-examples``).
"""

from __future__ import annotations

from kernel_verify.adapters._triton_interpreter import (
    TritonAlreadyImported,
    enable,
    interpreting,
    patch_autotuner,
    patch_bf16_dot,
    patch_kernel_modules,
)

__all__ = ["TritonAlreadyImported", "enable", "interpreting", "patch_autotuner",
           "patch_bf16_dot", "patch_kernel_modules", "prepare"]


def prepare(*module_prefixes: str) -> list[str]:
    """:func:`enable` (``TRITON_INTERPRET=1``; raises :class:`TritonAlreadyImported` when triton
    was imported without it), then, once triton imports, :func:`patch_autotuner` and
    :func:`patch_bf16_dot`, and :func:`patch_kernel_modules` for each prefix given (call again
    with your kernels' module names after importing them); returns the modules patched."""
    enable()
    patch_autotuner()
    patch_bf16_dot()
    return [m for prefix in module_prefixes for m in patch_kernel_modules(prefix)]
