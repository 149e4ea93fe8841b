"""Fixed layouts around chunk boundaries (issue #29): the sequence lengths, split points, packed
boundaries and padded lengths every forms, packed and identity property runs *before* its
random draws.

A kernel that works in blocks of ``C`` tokens (fla's ``chunk`` kernels: ``C = 64``; a blocked
mask) has its defects where a block ends: a mask wrong only inside the second block, a state
carried across a chunk boundary, a packed sequence that starts one token off. Random draws of
short sequences (``T ≤ 12``) never reach ``C = 64``, and a target whose calls are slow
(``call_seconds``) gets few draws at all. So every property also runs, as Hypothesis explicit
examples (phase ``explicit``: never cut by ``call_seconds`` or ``--max-examples``), the layouts
below for each chunk size ``C`` of the target — its declared ``chunk_sizes``, else
:data:`DEFAULT_CHUNKS`:

* lengths ``T ∈ {1, C − 1, C, C + 1, 2C + 1}``, split points (forms) and causal cuts
  (identities) at ``C − 1``, ``C`` and ``C + 1`` (the last unchanged row ``c = C`` lies inside the
  second block, so a mask that leaks only there is seen);
* packed sequences (``cu_seqlens``) with boundaries at ``C − 1``, ``C``, ``C + 1``, with and
  without initial states, length-1 sequences among them (the protocol's ``cu_seqlens`` is
  strictly increasing: a packed sequence is never empty);
* padded rows whose valid lengths are ``C − 1``, ``C``, ``C + 1``, padded on the right and on the
  left.

Widths are small (``d = 2``, ``d_v = 3``, two heads): a layout is about lengths. The inputs are
unit-range values at scale 0.5 from :func:`~kernel_verify.properties.strategies.generator` (one
stream per layout), as the forms properties draw them.

Mechanics: a property decorated with :func:`with_layouts` (inside ``@given``) and given the
explicit example ``AT_BOUNDARIES`` for its drawn argument runs its own body once per layout of
the target (:func:`shapes_for`, :func:`identity_inputs`); draws it makes from Hypothesis'
``data`` are answered from the layout (:class:`FixedDraws`). A failure names the layout (``T``,
``C``, ``t₀``, the lengths) in the property's own message.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from kernel_verify.properties.builtin_attention import example_budget
from kernel_verify.properties.checks.forms import Shape
from kernel_verify.properties.strategies import QKV, generator

#: Chunk sizes assumed for a target that declares none: the blocks of a small blocked kernel
#: (4) and of a typical tiled one (16); lengths up to ``2·16 + 1 = 33``.
DEFAULT_CHUNKS = (4, 16)
#: The longest sequence the gated forms properties draw for a target without ``chunk_sizes``
#: (``properties/test_gated_forms.py::draw_shape``; runs that reach a gate's underflow are
#: longer, at strong decay).
GATED_MAX_TOKENS = 10
#: The longer chunks a gated target with a ``chunked`` form and no ``chunk_sizes`` is also
#: given, on sequences one token past them (``draw_shape``): a suite-chosen chunk of 16 or 32
#: crossed as well as the short ones.
LONG_CHUNKS = (16, 32)
LONG_CHUNK_LENGTHS = (17, 33)
#: Widths of every layout (small: a layout is about lengths, and fla's Taylor features have
#: ``1 + d + d(d+1)/2`` entries).
HEADS, D, DV = 2, 2, 3


class _AtBoundaries:
    """The explicit-example value that stands for "every fixed layout of the target"."""

    def __repr__(self) -> str:
        return "AT_BOUNDARIES"


#: Give this as a drawn argument's explicit example (``@example(shape=AT_BOUNDARIES)``).
AT_BOUNDARIES = _AtBoundaries()


def chunks_of(target) -> tuple[int, ...]:
    """The chunk sizes whose boundaries the layouts cross: the target's ``chunk_sizes``, else
    :data:`DEFAULT_CHUNKS` — only the first for a built-in map outside the hand-picked backend
    coverage (:func:`~kernel_verify.properties.builtin_attention.example_budget`: the same
    attention code as the hand-picked targets, with another feature function; ``make test``'s
    budget)."""
    declared = getattr(target, "chunk_sizes", None)
    if declared:
        return tuple(sorted({int(c) for c in declared}))
    return DEFAULT_CHUNKS[:1] if example_budget(target) is not None else DEFAULT_CHUNKS


# ------------------------------------------------------------------------- the layouts
@dataclass(frozen=True)
class Layout:
    """One fixed layout: length ``t``, chunk size ``chunk`` it is built around, ``cut`` (forms:
    the split point ``t₀``, ``[0, t₀)`` then ``[t₀, T)``; identities: the last row left
    unchanged by the causality check), and its place ``index`` in the list (the seed of its
    inputs)."""

    t: int
    chunk: int
    cut: int
    index: int = 0


def lengths(chunks: Iterable[int]) -> list[int]:
    """``{1, C − 1, C, C + 1, 2C + 1}`` over the chunk sizes, ascending (lengths ≥ 1)."""
    out = {1}
    for c in chunks:
        out |= {c - 1, c, c + 1, 2 * c + 1}
    return sorted(t for t in out if t >= 1)


def layouts(chunks: Iterable[int]) -> list[Layout]:
    """Lengths and split points around every chunk size ``C``: ``(T, t₀)`` = ``(1, ·)``,
    ``(C − 1, C − 2)``, ``(C, C − 1)``, ``(C + 1, C)``, ``(2C + 1, C − 1)``, ``(2C + 1, C + 1)``
    (split points ``1 ≤ t₀ < T``; duplicates dropped)."""
    seen: dict[tuple[int, int], Layout] = {}
    for c in sorted(set(chunks)):
        for t, cut in ((1, 1), (c - 1, c - 2), (c, c - 1), (c + 1, c), (2 * c + 1, c - 1),
                       (2 * c + 1, c + 1)):
            if t < 1:
                continue
            cut = min(max(cut, 1), max(t - 1, 1))
            seen.setdefault((t, cut), Layout(t, c, cut))
    return [replace(lay, index=i) for i, lay in enumerate(seen.values())]


def causal_layouts(chunks: Iterable[int]) -> list[Layout]:
    """Identity layouts ``(T, c)``, ``c`` the last row kept when the causality check changes
    rows ``> c``: ``(C − 1, C − 2)``, ``(C, C − 1)``, ``(C + 1, C − 1)`` (the change starts at the
    boundary), ``(2C + 1, C)`` and ``(2C + 1, C + 1)`` (the kept rows reach into the second
    block), and ``T = 1`` (no cut: ``c = 0``)."""
    seen: dict[tuple[int, int], Layout] = {}
    for c in sorted(set(chunks)):
        for t, cut in ((1, 0), (c - 1, c - 2), (c, c - 1), (c + 1, c - 1), (2 * c + 1, c),
                       (2 * c + 1, c + 1)):
            if t < 1 or (t > 1 and not 0 <= cut <= t - 2):
                continue
            seen.setdefault((t, cut), Layout(t, c, cut))
    return [replace(lay, index=i) for i, lay in enumerate(seen.values())]


@dataclass(frozen=True)
class Packing:
    """Packed sequences of ``lengths`` (boundaries ``cu_seqlens`` at their cumulative sums), from
    fresh (``with_state=False``) or given initial states, built around chunk size ``chunk``."""

    lengths: tuple[int, ...]
    with_state: bool
    chunk: int


def packings(chunks: Iterable[int]) -> list[Packing]:
    """Per chunk size ``C``: one length-1 sequence (with a state); boundaries at ``C − 1``
    (``[C − 1, C + 1]``, fresh), at ``C`` and ``C + 1`` (``[C, 1, C]``, with states), at
    ``C + 1`` (``[C + 1, 1]``, fresh) and at 1, ``C + 2`` (``[1, C + 1, C − 1]``, with
    states). Zero lengths (``C = 1``) are dropped."""
    seen: dict[tuple[tuple[int, ...], bool], Packing] = {}
    for c in sorted(set(chunks)):
        for ls, state in (((1,), True), ((c - 1, c + 1), False), ((c, 1, c), True),
                          ((c + 1, 1), False), ((1, c + 1, c - 1), True)):
            ls = tuple(n for n in ls if n >= 1)
            seen.setdefault((ls, state), Packing(ls, state, c))
    return list(seen.values())


@dataclass(frozen=True)
class Padding:
    """Two rows of length ``t`` with valid lengths ``valid`` (a prefix: right padding; a suffix:
    ``left``)."""

    t: int
    valid: tuple[int, int]
    left: bool
    chunk: int


def paddings(chunks: Iterable[int]) -> list[Padding]:
    """Per chunk size ``C``: rows of ``C + 1`` tokens with ``C − 1`` and ``C + 1`` valid (right
    padding), rows of ``2C + 1`` with ``C`` and ``C + 1`` valid (left padding)."""
    out = []
    for c in sorted(set(chunks)):
        out.append(Padding(c + 1, (max(c - 1, 1), c + 1), False, c))
        out.append(Padding(2 * c + 1, (c, c + 1), True, c))
    return out


# ------------------------------------------------------------------------- as inputs
def shape_of(target, lay: Layout, b: int = 1) -> Shape:
    """The forms :class:`Shape` of a layout: ``b`` batch elements, :data:`HEADS` heads, widths
    :data:`D`, :data:`DV`; the chunked form runs at the layout's ``C`` (for a target declaring
    ``chunk_sizes``: the index that selects it, see ``checks.forms.chunk_size``)."""
    declared = getattr(target, "chunk_sizes", None)
    chunk = lay.chunk
    if declared and getattr(target, "chunked", None) is not None and lay.chunk in declared:
        chunk = list(declared).index(lay.chunk)
    return Shape(b, HEADS, lay.t, D, DV, chunk, lay.cut, 7919 * (lay.index + 1))


def _one_per_length(lays: list[Layout]) -> list[Layout]:
    """The first layout of each length (for a property that does not use the split point)."""
    seen: dict[int, Layout] = {}
    for lay in lays:
        seen.setdefault(lay.t, lay)
    return list(seen.values())


def shapes_for(target, b: int = 1, *, splits: bool = True) -> list[Shape]:
    """The forms shapes of every layout of the target (:func:`layouts` of :func:`chunks_of`);
    ``splits=False``: one per length, for a property that never splits the sequence (the
    layouts that differ only in ``t₀`` would run the same calls)."""
    lays = layouts(chunks_of(target))
    return [shape_of(target, lay, b) for lay in (lays if splits else _one_per_length(lays))]


def qkv_at(t: int, *, b: int = 1, h: int = HEADS, d: int = D, dv: int = 2, seed: int = 0,
           scale: float = 0.5, self_attention: bool = False) -> QKV:
    """Identity inputs of a layout: ``q, k`` entries uniform in ``[−2, 2]·scale``, ``v`` in
    ``[−2, 2]`` (the range :func:`~kernel_verify.properties.strategies.qkv_sets` draws from),
    from the generator of ``seed`` and the stream ``"layout"``."""
    rng = generator(seed, "layout")
    q = rng.uniform(-2.0, 2.0, (b, h, t, d)) * scale
    k = q if self_attention else rng.uniform(-2.0, 2.0, (b, h, t, d)) * scale
    v = rng.uniform(-2.0, 2.0, (b, h, t, dv))
    return QKV(q, k, v, scale, self_attention)


#: The query/key norm of :func:`far_below_zero`: visible scores near −a²/√d (−8e4 at d = 4),
#: below a mask filled with −1e4 or with float16's −65504, inside float32's range.
FAR_BELOW_ZERO_NORM = 400.0


def far_below_zero(t: int, *, h: int = HEADS, d: int = D, dv: int = 2, seed: int = 0) -> QKV:
    """Inputs whose every causal score ``qᵢᵀkⱼ/√d`` is far below zero (about
    ``−a²/√d``, ``a`` = :data:`FAR_BELOW_ZERO_NORM`): ``qᵢ = −a(e₁ + 0.01·nᵢ)``,
    ``kⱼ = a(e₁ + 0.01·mⱼ)`` (``n, m`` standard normal), ``v`` uniform in ``[−2, 2]``. Exact
    causal attention is well defined there (row 0 is ``v₀``); a kernel that masks the future
    with a finite fill (``−1e4``, a half type's lowest value) above the visible scores
    averages future values instead. Not for self-attention (``k = q`` makes ``qᵢᵀkᵢ > 0``)."""
    rng = generator(seed, "far below zero")
    e = np.eye(d)[0]
    a = FAR_BELOW_ZERO_NORM
    q = -a * (e + 0.01 * rng.standard_normal((1, h, t, d)))
    k = a * (e + 0.01 * rng.standard_normal((1, h, t, d)))
    v = rng.uniform(-2.0, 2.0, (1, h, t, dv))
    return QKV(q, k, v, a / 2.0, False)


def identity_inputs(target, *, b: int = 1, h: int = HEADS, min_t: int = 1,
                    cuts: bool = False) -> list[tuple[Layout, QKV]]:
    """``(layout, inputs)`` for the identity properties: :func:`causal_layouts` of the target's
    chunk sizes with at least ``min_t`` rows — every causal cut with ``cuts``, else one layout
    per length — ``k is q`` for a self-attention-only target."""
    self_att = bool(getattr(target, "self_attention_only", False))
    lays = [lay for lay in causal_layouts(chunks_of(target)) if lay.t >= min_t]
    return [(lay, qkv_at(lay.t, b=b, h=h, seed=lay.index, self_attention=self_att))
            for lay in (lays if cuts else _one_per_length(lays))]


class FixedDraws:
    """A stand-in for Hypothesis' ``data`` in an explicit layout example: ``draw(strategy)``
    returns the next of the fixed ``values`` (the layout's answer to that draw), whatever the
    strategy. Running out of values is an error naming the draw."""

    def __init__(self, values: Iterable[Any], what: str) -> None:
        self._values, self._what = list(values), what

    def draw(self, strategy: Any, label: str | None = None) -> Any:
        if not self._values:
            raise RuntimeError(f"layout {self._what}: no fixed value for the draw "
                               f"{label or strategy!r}")
        return self._values.pop(0)

    def __repr__(self) -> str:
        return f"FixedDraws({self._what})"


def with_layouts(expand: Callable[..., Iterable[dict[str, Any]]]):
    """Decorator for a property (placed between ``@given`` and the function): when Hypothesis
    passes :data:`AT_BOUNDARIES` for some argument (the explicit example), ``expand(**kwargs)``
    yields the keyword arguments of each layout and the body runs once with each; otherwise the
    body runs as drawn. The wrapped function keeps its signature (Hypothesis and pytest read it).
    """

    def decorate(fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            bound = inspect.signature(fn).bind(*args, **kwargs)
            call = dict(bound.arguments)
            if not any(v is AT_BOUNDARIES for v in call.values()):
                return fn(**call)
            for each in expand(**call):
                fn(**{**call, **each})
            return None

        return wrapper

    return decorate


__all__ = ["AT_BOUNDARIES", "DEFAULT_CHUNKS", "FixedDraws", "Layout", "Packing", "Padding",
           "causal_layouts", "chunks_of", "identity_inputs", "layouts", "lengths", "packings",
           "paddings", "qkv_at", "shape_of", "shapes_for", "with_layouts"]
