"""The cells of the prepared GPU run, per device: what is timed, at which sizes, in which order.

A cell is one parameter combination of an asv benchmark of ``benchmarks/`` (module, class, timed
method, parameters): the run times the benchmark's own ``setup`` and method, so the results land
in the same asv series as ``make bench`` (same names, same parameters, a CUDA ``case``), and the
previous commit's benchmark code times the previous commit's library code.  Cells are listed in
priority order: when the budget runs short, the last ones are left out and the summary says so.

The ``cuda`` plan is the one for a lent GPU: exact and linear attention (non-causal, causal,
bfloat16, the plain path), the backward pass, the decode loop, the feature maps at large ``m``,
the gated chunked form (where the tree has its benchmark) and fla's Triton kernels compiled
natively (where ``fla`` imports and CUDA runs).  The ``cpu`` plan is the rehearsal: the same
cells at the smallest sizes of their benchmarks, ``torch:cpu`` instead of ``torch:cuda``, and no
fla cell (fla's kernels need a GPU outside the interpreter).
"""

from __future__ import annotations

from dataclasses import dataclass

#: The modules the run imports from each tree (a module a tree lacks is left out there).
MODULES = ["benchmarks.attention", "benchmarks.forms", "benchmarks.feature_maps",
           "benchmarks.gated", "benchmarks.fla_native"]

#: Default budgets (seconds of wall time, the whole run) and the gate's share.
BUDGET = {"cuda": 360.0, "cpu": 300.0}
GATE_BUDGET = {"cuda": 90.0, "cpu": 60.0}
#: Rounds per cell (both versions timed once per round). 12 rounds allow p = 2**-12 at best, and
#: p <= 0.01 needs 11 of 12 rounds one way (tools.gpu.stats); the CPU, shared with other jobs,
#: gets 20 (p <= 0.01 needs 16 of 20), so that a few rounds hit by another process's burst do
#: not hide a real slowdown.
ROUNDS = {"cuda": 12, "cpu": 20}

LARGE_M_MAPS = ["softmax_positive[iid]", "softmax_positive[orthogonal]", "gerf[iid]",
                "rff_pairs[iid]"]
FLA_KERNELS = ["chunk_linear_attn", "fused_chunk_linear_attn", "chunk_simple_gla", "chunk_gla",
               "chunk_retention"]
#: Seconds a cell's set-up may take, reserved before it starts: the set-up is not bounded by the
#: budget (it runs before the cell's cost is known). fla's kernels compile and autotune in it:
#: measured on an H200 (reports/gpu/run.json, 2026-11-26) 69 s for chunk_linear_attn, 21-26 s
#: for fused_chunk_linear_attn, 51 s for chunk_simple_gla, and over 90 s for chunk_gla (that run
#: was stopped from outside during it).
SETUP_RESERVE_S = 10.0
FLA_SETUP_RESERVE_S = 120.0


@dataclass(frozen=True)
class Cell:
    """One parameter combination of one asv benchmark."""

    module: str  # e.g. "benchmarks.attention"
    method: str  # "Class.time_method"
    params: tuple[object, ...]
    setup_reserve_s: float = SETUP_RESERVE_S  # not started with fewer seconds left

    @property
    def asv_name(self) -> str:
        """The benchmark's name in asv (module relative to the benchmark folder)."""
        return f"{self.module.removeprefix('benchmarks.')}.{self.method}"

    @property
    def label(self) -> str:
        return f"{self.asv_name}({', '.join(repr(p) for p in self.params)})"


def cells(device: str) -> list[Cell]:
    """The plan for ``device`` ("cuda": the GPU run; "cpu": the rehearsal)."""
    if device not in BUDGET:
        raise ValueError(f"device must be one of {sorted(BUDGET)}, got {device!r}")
    gpu = device == "cuda"
    case = f"torch:{device}/float32"
    half = f"torch:{device}/bfloat16"
    n_soft, n_lin, n_back = (4096, 16384, 4096) if gpu else (1024, 1024, 1024)
    positions = (1024, 8192) if gpu else (1024,)
    ms = (4096, 16384) if gpu else (4096,)
    out = [
        Cell("benchmarks.attention", "SoftmaxAttention.time_softmax_attention",
             (case, n_soft, False)),
        Cell("benchmarks.attention", "SoftmaxAttention.time_softmax_attention",
             (case, n_soft, True)),
        Cell("benchmarks.attention", "LinearAttention.time_feature_map_attention",
             (case, n_lin, False, "log")),
        Cell("benchmarks.attention", "LinearAttention.time_feature_map_attention",
             (case, n_lin, True, "log")),
        Cell("benchmarks.attention", "LinearAttention.time_feature_map_attention",
             (case, n_lin, False, "plain")),
        Cell("benchmarks.attention", "LinearAttention.time_feature_map_attention",
             (half, n_lin, True, "log")),
        Cell("benchmarks.attention", "LinearAttentionBackward.time_attention_backward",
             (case, n_back, False)),
        Cell("benchmarks.attention", "LinearAttentionBackward.time_attention_backward",
             (case, n_back, True)),
        *(Cell("benchmarks.forms", "DecodeLoop.time_decode_64_steps", (case, p))
          for p in positions),
        *(Cell("benchmarks.feature_maps", "FeatureMapsLargeM.time_features", (name, case, m))
          for name in LARGE_M_MAPS for m in ms),
        Cell("benchmarks.gated", "GatedChunked.time_gated_chunked",
             (case, n_lin if gpu else 1024, "scalar")),
    ]
    if gpu:
        out += [Cell("benchmarks.fla_native", "FlaNative.time_fla_forward", (kernel, case, 4096),
                     FLA_SETUP_RESERVE_S) for kernel in FLA_KERNELS]
    return out
