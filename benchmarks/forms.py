"""The recurrent form of causal linear attention (docs/math.md §13): one decode step.

``DecodeStep``: the cost of :func:`impls.{numpy,torch}.forms.log_linear_attention_step` (one
head, ``softmax_positive[iid]`` log-features, m = 256, d = 64) from the state left by a prefill
of ``position`` tokens. The state is ``(L, V̄)`` of size ``m × (d_v + 1)`` whatever the position,
so the time must not grow with it: asv tracks the curve over ``position``.

* ``time_decode_step``: the first step after the prefill. asv re-runs ``setup`` before every timed
  call of a class with a setup (asv_runner: ``number`` resolves to 1), so each sample is one step
  right after a prefill, on caches the prefill has just filled with its ``position × m`` arrays:
  it includes that one-off cold start, which grows with the prefill.
* ``time_decode_64_steps``: :data:`STEPS` = 64 consecutive steps, each from the state the
  previous one returned (a decode loop), the first of them cold as above.

``DecodeLoop.time_decode_64_steps``: the same 64 steps after :data:`WARM` = 8 warm-up steps run
in ``setup`` (on the state and the tokens, results discarded), so that the timed loop starts on
warm caches as a running decode loop does: the steady-state cost per step is the time / 64, the
number that must not depend on ``position``.
"""

from __future__ import annotations

from typing import Any, ClassVar

from benchmarks._common import BACKENDS, DTYPES, BackendBenchmark, smoke, sync
from benchmarks.attention import LINEAR_ENTRY, M, linear_params, qkv
from kernel_verify.impls.attention import map_features
from kernel_verify.impls.numpy import forms as np_forms
from kernel_verify.impls.registry import get
from kernel_verify.impls.torch import forms as torch_forms

CASES: list[str] = smoke([f"{b}/{t}" for b in BACKENDS for t in DTYPES[b]
                          if t in ("float64", "float32") and (t != "float64" or b == "numpy")])


#: Consecutive tokens of ``time_decode_64_steps``.
STEPS = 64
#: Warm-up steps of ``DecodeLoop.setup``.
WARM = 8


class DecodeStep(BackendBenchmark):
    """One log-space decode step after a prefill of ``position`` tokens (time independent of
    ``position``)."""

    params: ClassVar[list[Any]] = [CASES, smoke([16, 1024, 8192])]
    param_names: ClassVar[list[str]] = ["case", "position"]
    timeout = 120.0

    def setup(self, case: str, position: int) -> None:
        self.use(*case.split("/"))
        entry = get(LINEAR_ENTRY)
        p = linear_params(self.backend, M)
        q, k, v = qkv(self.backend, position + STEPS)
        scale = q.shape[-1] ** -0.25
        lq = map_features(entry, q * scale, p, log=True)
        lk = map_features(entry, k * scale, p, log=True)
        numpy = self.backend.library == "numpy"
        self.forms = np_forms if numpy else torch_forms
        v = v.astype(lq.dtype) if numpy else v.to(lq.dtype)
        _, self.state = self.forms.log_linear_attention_chunked(
            lq[:position], lk[:position], v[:position])
        self.token = (lq[position], lk[position], v[position])
        self.tokens = [(lq[t], lk[t], v[t]) for t in range(position, position + STEPS)]

    def time_decode_step(self, case: str, position: int) -> None:
        self.forms.log_linear_attention_step(self.state, *self.token)
        sync(self.backend)

    def time_decode_64_steps(self, case: str, position: int) -> None:
        state = self.state
        for token in self.tokens:
            state, _ = self.forms.log_linear_attention_step(state, *token)
        sync(self.backend)


class DecodeLoop(BackendBenchmark):
    """64 decode steps after a prefill of ``position`` tokens and 8 untimed warm-up steps: the
    steady-state cost of a token (time / 64, independent of ``position``)."""

    params: ClassVar[list[Any]] = DecodeStep.params
    param_names: ClassVar[list[str]] = DecodeStep.param_names
    timeout = DecodeStep.timeout

    def setup(self, case: str, position: int) -> None:
        DecodeStep.setup(self, case, position)  # type: ignore[arg-type]
        state = self.state
        for token in self.tokens[:WARM]:
            state, _ = self.forms.log_linear_attention_step(state, *token)
        sync(self.backend)

    time_decode_64_steps = DecodeStep.time_decode_64_steps
