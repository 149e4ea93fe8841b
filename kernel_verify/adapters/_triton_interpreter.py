"""Run Triton kernels under Triton's interpreter on a CPU (``TRITON_INTERPRET=1``).

With ``TRITON_INTERPRET=1`` in the environment before ``triton.jit`` decorates a kernel, Triton
runs each kernel's body with NumPy, program by program (triton 3.9: ``triton.runtime.
interpreter``). :func:`enable` sets the variable, refusing (``RuntimeError``) when ``triton`` was
already imported without it — the decorators would then have built compiled kernels, which
need a GPU driver. Two obstacles stand between fla's kernels and the interpreter, each removed
here without changing what a kernel computes:

1. **The autotuner times its configurations** with the active GPU driver's benchmarker
   (``Autotuner.do_bench`` → ``driver.active.get_benchmarker()``); the interpreter has no
   driver (``RuntimeError: 0 active drivers ([]). There should only be one.``).
   :func:`patch_autotuner` gives every configuration the same time without running it, so the
   autotuner keeps its first (pruned) configuration (``min`` over equal timings returns the
   first). The kernel then runs once, with that configuration, as the autotuner would run the
   winner. Which configuration a GPU would pick is therefore not exercised: block sizes
   change the order of accumulation, not the algorithm.
2. **Loop variables are Python ints under the interpreter.** Compiled Triton gives the variable
   of ``for i in range(...)`` inside a kernel as a scalar int32 tensor, so kernels write
   ``i.to(tl.int64)`` and ``(i * BT).to(tl.int64)``; under the interpreter ``range`` is
   Python's and ``i`` a plain ``int``: ``AttributeError: 'int' object has no attribute 'to'``.
   :func:`patch_range` puts into a kernel module's globals a ``range`` whose items are
   :class:`LoopInt` — an ``int`` that answers ``.to(dtype)`` by the interpreter's own scalar
   conversion (the 0-d tensor compiled Triton would hold, then ``tensor.to``) and keeps its
   type through integer arithmetic. Host code of the same module that calls ``range`` still
   gets ints (a subclass), equal in value and in every integer operation.

A third, for the kernels that use it (:func:`patch_gather`): fla binds ``gather = tl.gather``
at import, a builtin the interpreter's launch-time patching does not reach; the modules'
``gather`` is rebound to a function that looks ``tl.gather`` up when the kernel runs.

One change of speed only (:func:`patch_nested_lang`): the interpreter re-patches
``triton.language`` on *every* call of a ``@triton.jit`` helper inside a kernel (once per program
per call, never restored: the patches wrap the already patched functions), which took ~40 % of
a small fla call. Here a launch patches both ``triton.language`` and ``triton.language.core``
(the helpers of ``triton.language.standard``, e.g. ``tl.sum``, see both and would patch
``core`` on their first call anyway) and restores both at its end; while it is active, a helper
whose language modules it covers is called without re-patching. Every operation then runs the
same interpreter function as before.

What the interpreter does not exercise (stated beside every verdict obtained this way): it
executes the kernel's algorithm — indexing, masks, chunk boundaries, state passing, the
backward mathematics — in NumPy on a CPU; GPU rounding (TF32, tensor-core accumulation
order), shared-memory races and the ordering of atomics are outside it.
"""

from __future__ import annotations

import builtins
import os
import sys
from collections.abc import Iterator
from types import ModuleType, SimpleNamespace
from typing import Any

ENV = "TRITON_INTERPRET"

#: Beside every verdict on a target run under the interpreter (the conformance pages' scope).
TAG = ("[Triton interpreter: NumPy on a CPU; GPU rounding (TF32, tensor-core accumulation "
       "order) not exercised]")

#: The workarounds, as the conformance page lists them.
WORKAROUNDS = (
    "`TRITON_INTERPRET=1` is set by the adapter before `triton` is imported (the check runs "
    "the suite in a subprocess that imports the adapter first; a process that imported "
    "triton without it gets a RuntimeError saying so).",
    "Autotuner: the interpreter has no GPU driver to time configurations with "
    "(`RuntimeError: 0 active drivers`), so every configuration is given the same time "
    "without being run and the autotuner keeps its first configuration; the kernel then runs "
    "once with it. Block sizes a GPU's autotuner would pick are not exercised.",
    "Loop variables: under the interpreter `for i in range(...)` yields Python ints, while "
    "fla's chunked kernels call `i.to(tl.int64)` on them (compiled Triton gives a scalar "
    "tensor). The kernel modules get a `range` whose items are an `int` subclass answering "
    "`.to(dtype)` through the interpreter's own scalar conversion; values and integer "
    "arithmetic are unchanged.",
    "Speed only: the interpreter re-patches `triton.language` on every call of a jit helper "
    "inside a kernel; while a launch's patch is active and covers the helper's language "
    "modules, the helper is called without re-patching (the same patched functions run).",
)


#: The fourth workaround, applied by the adapters whose kernels need it
#: (:func:`patch_gather`; fla's RWKV-7 chunk kernels).
GATHER_WORKAROUND = (
    "`tl.gather` bound at import: fla binds `gather = tl.gather` in its kernel modules "
    "(`fla.ops.utils.op` and the DPLR chunk modules that import it), which the interpreter's "
    "launch-time patching of `triton.language` does not reach (`InterpreterError: "
    "ValueError('Did you forget to add @triton.jit ? ...')`). The modules' `gather` is "
    "rebound to a function that calls `tl.gather` when the kernel runs, so the interpreter's "
    "own gather executes; the kernel's arithmetic is unchanged.")


class TritonAlreadyImported(RuntimeError):
    """``triton`` was imported in this process without ``TRITON_INTERPRET=1``."""


def enable() -> None:
    """Set ``TRITON_INTERPRET=1`` for this process, before ``triton`` is imported.

    Raises :class:`TritonAlreadyImported` when ``triton`` is already in ``sys.modules`` and the
    variable was not ``1`` at that time (its kernels would be compiled ones, which need a GPU
    driver): run in a fresh process, or set ``TRITON_INTERPRET=1`` in the environment."""
    if os.environ.get(ENV) == "1":
        return
    if "triton" in sys.modules:
        raise TritonAlreadyImported(
            f"triton was imported in this process without {ENV}=1, so its kernels are "
            "compiled ones (they need a GPU driver); the fla adapter runs them under Triton's "
            f"interpreter: set {ENV}=1 in the environment, or import "
            "kernel_verify.adapters.fla before anything imports triton")
    os.environ[ENV] = "1"


def interpreting() -> bool:
    """Whether Triton's interpreter is on in this process (after :func:`enable`)."""
    return os.environ.get(ENV) == "1"


class LoopInt(int):
    """A loop index of a kernel: an ``int`` that also answers ``.to(dtype)`` like the scalar
    tensor compiled Triton gives (``interpreter_semantic.to_tensor(i).to(dtype)``), and stays a
    :class:`LoopInt` through integer arithmetic (``i * BT``, ``i + 1``, ``-i``, …)."""

    __slots__ = ()

    def to(self, dtype: Any, *args: Any, **kwargs: Any) -> Any:
        from triton.runtime.interpreter import interpreter_semantic

        return interpreter_semantic.to_tensor(int(self)).to(dtype, *args, **kwargs)

    def __repr__(self) -> str:
        return f"LoopInt({int(self)})"


def _wrap(name: str):
    base = getattr(int, name)

    def method(self, *args):
        out = base(self, *args)
        return LoopInt(out) if type(out) is int else out

    method.__name__ = name
    return method


for _name in ("__add__", "__radd__", "__sub__", "__rsub__", "__mul__", "__rmul__",
              "__floordiv__", "__rfloordiv__", "__mod__", "__rmod__", "__neg__", "__pos__",
              "__abs__", "__lshift__", "__rshift__", "__and__", "__or__", "__xor__"):
    setattr(LoopInt, _name, _wrap(_name))
del _name


class loop_range:  # lower case: it stands in for the builtin ``range``
    """``range(*args)`` whose items are :class:`LoopInt`; otherwise the builtin range
    (``len``, indexing, ``in``, equality via the underlying ``range``)."""

    __slots__ = ("_r",)

    def __init__(self, *args: Any) -> None:
        self._r = builtins.range(*(int(a) if isinstance(a, int) else a for a in args))

    def __iter__(self) -> Iterator[LoopInt]:
        return (LoopInt(i) for i in self._r)

    def __reversed__(self) -> Iterator[LoopInt]:
        return (LoopInt(i) for i in reversed(self._r))

    def __len__(self) -> int:
        return len(self._r)

    def __getitem__(self, i: Any) -> Any:
        out = self._r[i]
        return LoopInt(out) if isinstance(out, int) else out

    def __contains__(self, x: object) -> bool:
        return x in self._r

    def __eq__(self, other: object) -> bool:
        return self._r == (other._r if isinstance(other, loop_range) else other)

    def __hash__(self) -> int:
        return hash(self._r)

    def __repr__(self) -> str:
        return repr(self._r)

    @property
    def start(self) -> int:
        return self._r.start

    @property
    def stop(self) -> int:
        return self._r.stop

    @property
    def step(self) -> int:
        return self._r.step


def patch_range(module: ModuleType) -> None:
    """Give ``module`` (a module defining Triton kernels) the :class:`loop_range` as its global
    ``range``: the interpreter executes a kernel in its module's globals, so the kernel's loops
    yield :class:`LoopInt`. Idempotent."""
    module.__dict__["range"] = loop_range


def _same_time(kernel_call: Any, quantiles: Any = None, **kwargs: Any) -> list[float]:
    """The benchmark the autotuner gets under the interpreter: every configuration takes the
    same (nominal) time and is not run, so the autotuner keeps its first configuration."""
    return [1.0, 1.0, 1.0] if quantiles else 1.0


def patch_autotuner() -> None:
    """Replace ``triton.runtime.autotuner.Autotuner.do_bench`` (a property returning the
    driver's benchmarker) by :func:`_same_time`. Only under the interpreter. Idempotent."""
    if not interpreting():
        raise RuntimeError(f"patch_autotuner is for Triton's interpreter ({ENV}=1) only")
    from triton.runtime.autotuner import Autotuner

    Autotuner.do_bench = property(lambda self: _same_time)


def patch_bf16_dot() -> None:
    """Make the interpreter's ``tl.dot`` read bfloat16 operands as numbers. Triton 3.9's
    interpreter stores bfloat16 as its uint16 bit patterns and ``create_dot`` multiplies them
    as they are (a 16×16 bfloat16 ``tl.dot`` is off by ~2e10; float16 and float32 are exact):
    here a bfloat16 operand is converted to float32 first, as the GPU's ``tl.dot`` forms every
    product of two bfloat16 values exactly in its float32 accumulator. Only under the
    interpreter. Idempotent."""
    if not interpreting():
        raise RuntimeError(f"patch_bf16_dot is for Triton's interpreter ({ENV}=1) only")
    import numpy as np
    import triton.language as tl
    from triton.runtime import interpreter as it

    builder = it.InterpreterBuilder
    if getattr(builder.create_dot, "_kv_bf16", False):
        return
    original = builder.create_dot

    def create_dot(self, a, b, d, input_precision, max_num_imprecise_acc):
        def wide(x):
            if x.dtype.scalar == tl.bfloat16:
                data = it._convert_float(x.data, tl.bfloat16, tl.float32, None).view(np.float32)
                return it.TensorHandle(data, tl.float32)
            return x

        return original(self, wide(a), wide(b), d, input_precision, max_num_imprecise_acc)

    create_dot._kv_bf16 = True
    builder.create_dot = create_dot


def patch_kernel_modules(prefix: str) -> list[str]:
    """:func:`patch_range` on every imported module named ``prefix…`` that defines a Triton
    kernel (an attribute that is a ``triton.runtime.jit.KernelInterface``: jit, autotune and
    heuristics wrappers); returns their names. Call after importing the kernels' modules."""
    from triton.runtime.jit import KernelInterface

    done = []
    for name, mod in list(sys.modules.items()):
        if not name.startswith(prefix) or mod is None:
            continue
        if any(isinstance(v, KernelInterface) for v in list(vars(mod).values())):
            patch_range(mod)
            done.append(name)
    return sorted(done)


def _gather(src: Any, index: Any, axis: int, **kwargs: Any) -> Any:
    """``tl.gather(src, index, axis)`` looked up when the kernel runs (the interpreter's patched
    builtin during a launch)."""
    import triton.language as tl

    return tl.gather(src, index, axis)


def patch_gather(prefix: str) -> list[str]:
    """Rebind the module-level name ``gather`` of every imported module named ``prefix…`` whose
    ``gather`` is ``triton.language.gather`` itself (bound at import, outside the
    interpreter's patching) to :func:`_gather`; returns their names. Interpreter only;
    idempotent. Call after importing the kernels' modules."""
    if not interpreting():
        raise RuntimeError(f"patch_gather is for Triton's interpreter ({ENV}=1) only")
    import triton.language as tl

    done = []
    for name, mod in list(sys.modules.items()):
        if name.startswith(prefix) and mod is not None \
                and vars(mod).get("gather") is tl.gather:
            mod.__dict__["gather"] = _gather
            done.append(name)
    return sorted(done)


class _NoScope:
    """The patch scope of a helper called inside an active launch: nothing to restore."""

    def restore(self) -> None:
        return None


class _LaunchScope:
    """A launch's own patch scope; restoring it also ends the launch's record."""

    def __init__(self, scope: Any, active: list) -> None:
        self._scope, self._active = scope, active

    def restore(self) -> None:
        try:
            self._scope.restore()
        finally:
            self._active.pop()


def patch_nested_lang() -> None:
    """Replace ``triton.runtime.interpreter._patch_lang`` (called by a launch, restored at its
    end, and by every jit-helper call inside it, never restored) by a version that skips the
    helper calls whose language modules (``tl``, ``tl.core`` in the function's globals) the
    active launch already patched. Idempotent; interpreter only."""
    if not interpreting():
        raise RuntimeError(f"patch_nested_lang is for Triton's interpreter ({ENV}=1) only")
    import inspect

    import triton.language as tl
    from triton.runtime import interpreter

    if getattr(interpreter._patch_lang, "_kv_nested", False):
        return
    original = interpreter._patch_lang
    active: list[frozenset[int]] = []

    def langs(fn: Any) -> frozenset[int]:
        return frozenset(id(v) for v in fn.__globals__.values()
                         if inspect.ismodule(v) and v in (tl, tl.core))

    both = SimpleNamespace(__globals__={"tl": tl, "core": tl.core})

    def patch_lang(fn: Any) -> Any:
        if active:
            return _NoScope() if langs(fn) <= active[-1] else original(fn)
        # a launch patches tl and tl.core (what its helpers such as tl.sum, whose module sees
        # both, would patch on every call) and restores both at its end
        scope = original(both)
        active.append(langs(both))
        return _LaunchScope(scope, active)

    patch_lang._kv_nested = True  # type: ignore[attr-defined]
    interpreter._patch_lang = patch_lang
