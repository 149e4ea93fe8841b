"""The layouts, inputs and shared checks of the forms properties
(``properties/test_attention_forms.py``; a library module, so that ``kernel-verify calibrate``
runs the same functions):

* :class:`Shape`, :func:`random_shape` (i.i.d. draws from the support of the properties'
  strategy ``form_shapes``), :func:`draw_inputs`, :func:`chunk_size`;
* :func:`state_gradient_check` — one example of ``test_gradients_flow_through_the_state``
  (float64 gradcheck of the continuation through the final state), calibrated by
  ``kernel-verify calibrate --part gradient_assumptions`` at the stated 1e-3 per example.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from hypothesis import strategies as st

from kernel_verify.properties.strategies import QKV, generator
from kernel_verify.verify.backends import Backend

__all__ = ["F64_TOL", "Shape", "chunk_size", "draw_inputs", "gradcheck_f64", "random_shape",
           "state_form", "state_gradient_check"]


@dataclass(frozen=True)
class Shape:
    """A drawn layout: batch, heads, length, widths, chunk size, split point, seed."""

    b: int
    h: int
    t: int
    d: int
    dv: int
    chunk: int
    cut: int
    seed: int


def random_shape(rng: np.random.Generator, max_t: int = 12) -> Shape:
    """An i.i.d. draw from the support of the properties' strategy ``form_shapes``
    (``properties/test_attention_forms.py``; each choice uniform, ``T`` from either branch with
    probability ½): the fresh examples on which ``kernel-verify calibrate`` measures the
    properties' assumptions (Hypothesis's own draws are not independent)."""
    c0 = int(rng.integers(1, 7))
    t = (int(rng.choice(sorted({max(c0 - 1, 1), c0, c0 + 1, 1}))) if rng.random() < 0.5
         else int(rng.integers(1, max_t + 1)))
    non_divisors = [c for c in range(2, t) if t % c]
    chunks = [c0, 1, t] + (non_divisors[:2] if non_divisors else [])
    chunk = int(rng.choice(chunks))
    cut = int(rng.integers(1, max(t - 1, 1) + 1))
    return Shape(int(rng.integers(1, 3)), int(rng.integers(1, 4)), t, int(rng.integers(1, 5)),
                 int(rng.integers(1, 4)), chunk, cut, int(rng.integers(0, 2**32)))


def draw_inputs(shape: Shape, t: int | None = None, stream: str = "inputs") -> QKV:
    """Unit-scale Gaussian inputs of the layout (``t`` rows instead of ``shape.t``)."""
    rng = generator(shape.seed, stream)
    n = shape.t if t is None else t
    q = 0.5 * rng.standard_normal((shape.b, shape.h, n, shape.d))
    k = 0.5 * rng.standard_normal((shape.b, shape.h, n, shape.d))
    return QKV(q, k, rng.standard_normal((shape.b, shape.h, n, shape.dv)), 0.5)


def padding_mask(data, shape: Shape) -> tuple[np.ndarray, str]:
    """A padding mask ``(B, T)``, True at the valid positions, drawn through Hypothesis' ``data``:
    each row's valid length in ``[1, T]``, then one choice of left or right padding for all;
    and its description (``"left padding, valid lengths [2, 3]"``) for failure messages."""
    valid = [data.draw(st.integers(1, shape.t), label=f"valid length {b}")
             for b in range(shape.b)]
    left = data.draw(st.booleans(), label="left padding")
    mask = np.zeros((shape.b, shape.t), dtype=bool)
    for b, n in enumerate(valid):
        if left:
            mask[b, shape.t - n:] = True
        else:
            mask[b, :n] = True
    return mask, f"{'left' if left else 'right'} padding, valid lengths {valid}"


def chunk_size(target, chunk: int) -> int:
    """The chunk size the forms run at: ``chunk``, or the target's own ``chunk_sizes`` entry
    ``chunk mod len`` when it declares fixed sizes."""
    sizes = target.chunk_sizes
    return chunk if sizes is None else sizes[chunk % len(sizes)]


#: float64 finite differences: the step and tolerance of properties/test_gradients.py (central
#: differences, step ``h = u₆₄^(1/3)·s``, error ``≤ 100·u₆₄^(2/3)·F`` under its stated
#: assumption on third derivatives; a wrong backward errs by O(1)).
F64_TOL = 100 * (2.0**-53) ** (2 / 3)


def state_form(target, shape: Shape):
    """``form(q, k, v, state=None) -> (out, state)``: the target's ``chunked`` form at the
    shape's chunk size where it offers one, else its ``stateful`` form, on inputs in the
    suite's layout (the split-state continuations run it on a prefix, then on the rest from the
    prefix's final state)."""
    t = target.to_layout

    def form(q, k, v, state=None):
        if target.offers("chunked"):
            return target.chunked(t(q), t(k), t(v), chunk_size=chunk_size(target, shape.chunk),
                                  initial_state=state, seed=shape.seed)
        return target.stateful(t(q), t(k), t(v), initial_state=state, seed=shape.seed)

    return form


def state_gradient_check(target, backend: Backend, shape: Shape) -> bool | None:
    """One example of ``properties/test_attention_forms.py::test_gradients_flow_through_the_state``
    (``kernel-verify calibrate --part gradient_assumptions`` runs it on fresh shapes): whether
    float64 central differences (``torch.autograd.gradcheck``, fast mode, step
    ``h = u₆₄^(1/3)·s``, ``atol = F64_TOL·F``, ``rtol = F64_TOL``) agree with autograd for the
    outputs after the split point, continued from the prefix's final state, as a function of
    the prefix inputs; ``None`` when the sequence has no split point (``T = 1``)."""
    from kernel_verify.properties.checks.recurrent import continuation_gradcheck, split_form
    from kernel_verify.properties.checks.transition_forms import NO_GATES, recurrent_view

    view = recurrent_view(target)
    return continuation_gradcheck(view, backend, shape, draw_inputs(shape), NO_GATES,
                                  split_form(view))


def gradcheck_f64(fn, inputs) -> bool:
    """Whether float64 central differences agree with autograd for ``fn`` at ``inputs``
    (``torch.autograd.gradcheck``, fast mode; step ``h = u₆₄^(1/3)·max(1, max|x|)``,
    ``atol = F64_TOL·max(1, max|fn|)``, ``rtol = F64_TOL``): the gradient check of the forms
    properties, plain and gated."""
    import torch

    scale = max(1.0, float(fn(*inputs).detach().abs().max()))
    h = (2.0**-53) ** (1 / 3) * max(1.0, max(float(a.detach().abs().max()) for a in inputs))
    return bool(torch.autograd.gradcheck(fn, tuple(inputs), eps=h, atol=F64_TOL * scale,
                                         rtol=F64_TOL, fast_mode=True, raise_exception=False))


def gradcheck_culprits(fn, inputs, names) -> list[str]:
    """After a failed :func:`gradcheck_f64`: the names of the inputs whose gradient alone
    disagrees with central differences (each checked with the others held fixed), so that a
    failure says which gradient is wrong."""
    out = []
    for i, name in enumerate(names):

        def one(a, i=i):
            return fn(*inputs[:i], a, *inputs[i + 1:])

        if not gradcheck_f64(one, [inputs[i]]):
            out.append(name)
    return out
