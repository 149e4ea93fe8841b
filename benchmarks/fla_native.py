"""fla's Triton kernels compiled natively on a CUDA device (the GPU run's fla cells).

On this project's CPU machines fla runs only under Triton's interpreter, which times the
interpreter, not the kernel: the class exists only where ``fla`` imports and CUDA is available
(asv lists nothing elsewhere; ``benchmarks.devices.CudaDevice`` carries the one skip reason).
Shapes follow fla's own layout ``(B, T, H, K)``: one sequence, 4 heads, ``K = V = 64``; the gates of
the gated kernels are log-gates ``log σ(·)`` of standard normal draws (per token and head for
``chunk_simple_gla``, per key dimension for ``chunk_gla``). Forward only, no state returned.
The first calls (untimed warm-up in the GPU run, asv's own warm-up here) compile the kernels.
"""

from __future__ import annotations

import importlib.util
from typing import Any, ClassVar

import torch

from benchmarks._common import BackendBenchmark, rng_for, sync

KERNELS = ["chunk_linear_attn", "fused_chunk_linear_attn", "chunk_simple_gla", "chunk_gla",
           "chunk_retention"]
HEADS, DIM = 4, 64
AVAILABLE = torch.cuda.is_available() and importlib.util.find_spec("fla") is not None


def kernel(name: str) -> Any:
    """The fla function ``name`` (imported on first use, on the GPU only)."""
    if name not in KERNELS:
        raise ValueError(f"kernel must be one of {KERNELS}, got {name!r}")
    if name.endswith("linear_attn"):
        from fla.ops import linear_attn as module
    elif name == "chunk_simple_gla":
        from fla.ops import simple_gla as module
    elif name == "chunk_gla":
        from fla.ops import gla as module
    else:
        from fla.ops import retention as module
    return getattr(module, name)


if AVAILABLE:

    class FlaNative(BackendBenchmark):
        """One forward call of an fla kernel, ``T`` tokens, natively compiled."""

        params: ClassVar[list[Any]] = [KERNELS, ["torch:cuda/float32"], [4096]]
        param_names: ClassVar[list[str]] = ["kernel", "case", "T"]
        timeout = 120.0

        def setup(self, name: str, case: str, T: int) -> None:
            self.use(*case.split("/"))
            self.fn = kernel(name)
            rng = rng_for("fla", name, T)
            shape = (1, T, HEADS, DIM)
            self.q, self.k, self.v = (self.backend.from_numpy(0.1 * rng.standard_normal(shape))
                                      for _ in range(3))
            self.extra: dict[str, Any] = {}
            if name == "chunk_simple_gla":
                g = self.backend.from_numpy(rng.standard_normal((1, T, HEADS)))
                self.extra["g"] = torch.nn.functional.logsigmoid(g)
            elif name == "chunk_gla":
                g = self.backend.from_numpy(rng.standard_normal(shape))
                self.extra["g"] = torch.nn.functional.logsigmoid(g)

        def time_fla_forward(self, name: str, case: str, T: int) -> None:
            self.fn(self.q, self.k, self.v, **self.extra)
            sync(self.backend)
