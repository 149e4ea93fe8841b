"""Hypothesis strategies and input generators of the property suite: one module, so that tests
never import tests, and inputs are drawn *by Hypothesis* (a failing example shrinks in its
values — a row, a scale, a cut — not only in a seed).

Randomness that is not a Hypothesis choice (parameter draws, permutations of large index sets,
Monte Carlo batches) comes from one helper, :func:`generator`: a ``numpy.random.Generator`` on a
``numpy.random.SeedSequence`` of a drawn seed and a named stream, so two streams of one seed are
independent and a printed seed reproduces all of them.

Sections: *seeds*, *attention inputs* (this engineer's); feature-map strategies go in their own
section below.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from kernel_verify.verify.seeds import rng as seeded_rng

# ------------------------------------------------------------------------------------ seeds
#: Seeds of targets and generators: any 32-bit integer.
seeds = st.integers(0, 2**32 - 1)


def generator(seed: int, stream: str = "") -> np.random.Generator:
    """:func:`kernel_verify.verify.seeds.rng` (the one seed module) at ``seed`` and the named
    ``stream``: ``default_rng(SeedSequence(seed, spawn_key=(crc32(stream),)))``. Different
    ``stream`` names give independent generators; the same ``(seed, stream)`` always gives the
    same numbers."""
    return seeded_rng(int(seed), stream) if stream else seeded_rng(int(seed))


# ---------------------------------------------------------------------- attention inputs
@dataclass(frozen=True, eq=False)
class QKV:
    """One attention input: float64 ``q, k (b, h, n, d)``, ``v (b, h, n, dv)``, the scale they
    were drawn at, and whether ``k is q`` (self-attention). ``repr`` prints every value, so a
    Hypothesis falsifying example is the input itself."""

    q: np.ndarray
    k: np.ndarray
    v: np.ndarray
    scale: float
    self_attention: bool = False

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self.q.shape)

    def __repr__(self) -> str:
        with np.printoptions(precision=17, threshold=10**6, linewidth=10**6):
            k = "q" if self.self_attention else f"np.array({self.k.tolist()!r})"
            return (f"QKV(q=np.array({self.q.tolist()!r}), k={k}, "
                    f"v=np.array({self.v.tolist()!r}), scale={self.scale!r})")



def qkv_rows(x: QKV, a: int, b: int) -> QKV:
    """Positions ``a…b−1`` of every sequence of ``x`` (the time axis, −2)."""
    sl = (..., slice(a, b), slice(None))
    return QKV(x.q[sl], x.k[sl], x.v[sl], x.scale)


def qkv_join(*xs: QKV) -> QKV:
    """The inputs ``xs`` joined along the time axis (at the first one's scale)."""
    return QKV(*(np.concatenate([getattr(x, f) for x in xs], axis=-2) for f in "qkv"),
               xs[0].scale)

#: Entries of unit-scale inputs: finite, no subnormals (a scale multiplies them).
_unit = st.floats(-2.0, 2.0, allow_nan=False, allow_infinity=False, allow_subnormal=False,
                  width=32)


def shapes(batch=(1, 2), heads=(1, 2), n=(1, 8), d=(1, 4)) -> st.SearchStrategy:
    """``(batch, heads, n, d)`` with each entry in its inclusive range."""
    return st.tuples(*(st.integers(lo, hi) for lo, hi in (batch, heads, n, d)))


@st.composite
def qkv_sets(draw, shape=None, dv=(1, 3), scales=(0.1, 0.5, 1.0),
             self_attention: bool = False, aligned: bool | None = False) -> QKV:
    """An attention input drawn value by value: ``q, k`` entries in ``[−2, 2]·scale``, ``v``
    entries in ``[−2, 2]``. ``self_attention``: ``k`` is ``q``. ``aligned``: ``k = q`` as values
    (large positive scores; None lets Hypothesis choose)."""
    b, h, n, d = draw(shapes() if shape is None else shape)
    dv_ = draw(st.integers(*dv)) if isinstance(dv, tuple) else dv
    scale = draw(st.sampled_from(scales))
    q = draw(hnp.arrays(np.float64, (b, h, n, d), elements=_unit)) * scale
    same = self_attention or (draw(st.booleans()) if aligned is None else aligned)
    k = q if same else draw(hnp.arrays(np.float64, (b, h, n, d), elements=_unit)) * scale
    v = draw(hnp.arrays(np.float64, (b, h, n, dv_), elements=_unit))
    return QKV(q, k, v, scale, self_attention)


def fresh_like(x: QKV, seed: int, scale: float) -> QKV:
    """Independent Gaussian inputs of ``x``'s shape at ``scale`` (the "replacement" half of the
    causality and independence properties), from :func:`generator`."""
    rng = generator(seed, "fresh_like")
    q = scale * rng.standard_normal(x.q.shape)
    k = q if x.self_attention else scale * rng.standard_normal(x.k.shape)
    return QKV(q, k, rng.standard_normal(x.v.shape), scale, x.self_attention)


#: Input scales of the finiteness sweep (‖q‖·d^(−1/4) from ~1e-3 to ~600).
SCALE_SWEEP = (1e-3, 0.1, 1.0, 10.0, 100.0, 300.0)
#: (past/base scale, future/replacement scale) pairs: large pasts with small futures are where a
#: shift over the sequence underflows.
SCALE_PAIRS = ((0.5, 0.5), (0.5, 30.0), (30.0, 0.5), (30.0, 30.0))


def scale_pairs(pairs=SCALE_PAIRS) -> st.SearchStrategy:
    return st.sampled_from(pairs)


def permutations(n: int) -> st.SearchStrategy:
    """A permutation of ``range(n)`` as a NumPy index array (shrinks towards the identity)."""
    return st.permutations(list(range(n))).map(np.asarray)


# ---------------------------------------------------------------- feature-map strategies
# (another section's owner appends here)


# ------------------------------------------------------------------ point inputs (arrays)
# Inputs of feature maps, kernels and gradients (x, y, q, k, v, upstream gradients G, points
# where a map is evaluated), drawn by Hypothesis entry by entry. They replace the Gaussian
# inputs ``scale·N(0, 1)`` that properties used to draw from ``default_rng(seed + 1)``: a
# failing example then shrank only in the seed; now it shrinks in its values.

#: Smallest |entry| (relative to the scale) of ``points(..., off_zero=True)``: 2⁻¹⁰, exact in
#: float32, far above the rounding of any dtype the suite casts to (float16 at scale 0.05 keeps
#: it nonzero).
OFF_ZERO = 2.0**-10

#: Entries of ``[−2, −2⁻¹⁰] ∪ [2⁻¹⁰, 2]``: :data:`_unit` with ``|v| < 2⁻¹⁰`` moved out to
#: ``±2⁻¹⁰`` (one draw per entry; shrinks towards +2⁻¹⁰).
_off_zero = _unit.map(lambda v: math.copysign(max(abs(v), OFF_ZERO), v))
#: Entries of :data:`_unit` with ``0 < |v| < 2⁻¹⁰`` flushed to 0 (zeros at Hypothesis' own rate).
_no_tiny = _unit.map(lambda v: v if abs(v) >= OFF_ZERO else 0.0)


def points(shape, scale: float = 1.0, off_zero: bool = False,
           no_tiny: bool = False) -> st.SearchStrategy:
    """A float64 array of ``shape`` drawn value by value: each entry is its own Hypothesis
    choice in ``[−2, 2]`` (finite, float32-representable, no subnormals — the entries of
    :func:`qkv_sets`), times ``scale``; so a failing example shrinks entry by entry.

    It stands for the Gaussian input ``scale·N(0, 1)`` a property drew from a seed before: the
    same order of magnitude on a bounded range (95 % of Gaussian entries lie in ``[−2, 2]``),
    where Hypothesis also tries the edges (0, ±2, tiny and equal entries) a seeded Gaussian
    almost never gives — the choice :func:`qkv_sets` made for attention inputs.
    Entries are drawn densely (``fill=st.nothing()``: no shared fill value), as independent
    Gaussian entries were. ``off_zero``: every ``|entry| ≥ 2⁻¹⁰·scale`` (:data:`OFF_ZERO`; inputs
    off the kinks at 0 of piecewise maps). ``no_tiny``: every entry is 0 or ``|entry| ≥
    2⁻¹⁰·scale``: for checks whose derived bounds model rounding without underflow (no absolute
    term), where an entry of 1e-19 makes a float32 result subnormal (Hypothesis found
    ``∇ₓ φ(x)ᵀφ(y) = 1.25e-40`` off by 62× its relative bound for the ``square`` map)."""
    shape = (int(shape),) if np.isscalar(shape) else tuple(int(k) for k in shape)
    return _points(shape, float(scale), bool(off_zero), bool(no_tiny))


@functools.cache
def _points(shape: tuple[int, ...], scale: float, off_zero: bool,
            no_tiny: bool) -> st.SearchStrategy:
    """:func:`points`, one strategy object per argument tuple (a strategy is validated on its
    first draw: building a new one per example cost ~20 % of a property's time)."""
    elements = _off_zero if off_zero else _no_tiny if no_tiny else _unit
    arrays = hnp.arrays(np.float64, shape, elements=elements, fill=st.nothing())
    return arrays if scale == 1.0 else arrays.map(lambda a: a * scale)


def unit_vectors(d: int) -> st.SearchStrategy:
    """A unit vector of R^d: :func:`points` of shape ``(d,)`` with norm ≥ 2⁻¹⁰ (others are
    rejected), divided by its norm — the random direction ``g/‖g‖`` (g Gaussian) of a seeded
    draw, shrinking in its entries (towards a coordinate axis)."""
    return points((d,)).filter(lambda a: float(np.linalg.norm(a)) >= OFF_ZERO).map(
        lambda a: a / np.linalg.norm(a))


def generic_rotation(seed: int, d: int) -> np.ndarray:
    """A Haar-random ``d × d`` rotation from the seed (its own stream): applied to the
    directions Hypothesis draws, which lean to coordinate axes and simple diagonals (its
    shrinking and its choice of simple floats), so that a defect hidden along the axes (an
    estimator biased only off them: a frequency matrix read by columns instead of rows) is met
    at a generic direction in every example. Q of the QR of a Gaussian matrix, column signs
    fixed by R's diagonal (Mezzadri 2007)."""
    g = generator(seed, "generic_rotation").standard_normal((d, d))
    q, r = np.linalg.qr(g)
    return q * np.sign(np.diag(r))


def fixed_input(stream: str, shape, scale: float = 1.0) -> np.ndarray:
    """The fixed Gaussian input ``scale·N(0, 1)`` of an example-based (non-Hypothesis) test:
    :func:`generator` at seed 0 and the named ``stream``, so every such input goes through the
    one seed module under a name (not ``default_rng(21)``). Used where a test runs once per
    target (gradient identities of black-box attention: each example is a full forward and
    backward pass): there is no Hypothesis example to shrink."""
    return scale * generator(0, stream).standard_normal(shape)


def point_pair(d: int, nx: float, ny: float) -> st.SearchStrategy:
    """``(x, y)`` in R^d with ``‖x‖ = nx``, ``‖y‖ = ny``: two :func:`unit_vectors` scaled — the
    points of ``checks.estimates.random_pair`` (seeded Gaussian directions) drawn by value."""
    return st.tuples(unit_vectors(d), unit_vectors(d)).map(lambda uv: (nx * uv[0], ny * uv[1]))


class ValueDraws:
    """A stand-in for the ``numpy.random.Generator`` a shared check draws an *input* from (the
    upstream gradient ``G`` of ``gradient_checks.feature_vjp_check``, drawn once φ's shape is
    known): ``standard_normal(size)`` is a :func:`points` draw from Hypothesis' ``data`` (entries
    in ``[−2, 2]``, labelled ``label``; ``points_kw`` go to :func:`points`), so that input shrinks
    in its values too. Only
    ``standard_normal`` is provided: any other use of the generator fails loudly."""

    def __init__(self, data, label: str, **points_kw) -> None:
        self._data, self._label, self._kw = data, label, points_kw

    def standard_normal(self, size=None) -> np.ndarray:
        shape = () if size is None else tuple(np.atleast_1d(size).tolist())
        return self._data.draw(points(shape, **self._kw), label=self._label)


def kernel_estimate_draws(examples: int):
    """The draws of the kernel-estimate properties (``φ̂(X)φ̂(Y)ᵀ`` against its mpmath reference,
    and its gradient against the exact one: one input distribution for both): ``@given`` a seed,
    ``d ∈ [1, 4]``, ``m ∈ [2, 6]`` features, a scale in {0.1, 0.7, 1.5} and ``data`` (the points
    are drawn in the body), at ``examples`` examples."""
    def wrap(test):
        return settings(max_examples=examples)(given(
            seed=seeds, d=st.integers(1, 4), m=st.integers(2, 6),
            scale=st.sampled_from([0.1, 0.7, 1.5]), data=st.data())(test))
    return wrap


# ------------------------------------------------------------------ point sets (clustered)
#: Offset scales of :func:`clustered_points`, relative to the centres' scale: 0 (exact duplicate
#: points), then tighter to looser clusters. The first is where Hypothesis shrinks to.
CLUSTER_OFFSETS = (0.0, 1e-3, 1e-2, 1e-1)


@st.composite
def clustered_points(draw, n: int, d: int, scale: float = 1.0,
                     offsets: tuple[float, ...] = CLUSTER_OFFSETS) -> np.ndarray:
    """``n`` points of R^d in tight clusters, drawn value by value: ``k ∈ [1, n]`` centres
    (:func:`points` at ``scale``), each point a centre (its index a Hypothesis choice) plus an
    offset :func:`points` at ``o·scale``, ``o`` one of ``offsets`` for the whole set (``o = 0``:
    exact duplicates).

    The point sets of real data that stress kernel methods: repeated rows and near-duplicates
    make a Gram matrix (nearly) low rank — rank ≤ k with exact duplicates, k eigenvalues of the
    centres' scale and the others of order ``(o·scale)²`` for a smooth kernel — so a submatrix
    of it (Nyström's W) is singular or nearly so. Independent draws (:func:`points`) almost never
    give such sets. Shrinks towards one centre, exact duplicates and zero entries."""
    k = draw(st.integers(1, n), label="centres")
    centres = draw(points((k, d), scale), label="centre values")
    which = np.asarray(draw(st.lists(st.integers(0, k - 1), min_size=n, max_size=n),
                            label="cluster of each point"), dtype=np.intp)
    o = draw(st.sampled_from(offsets), label="offset scale")
    x = centres[which]
    if o == 0.0:
        return x
    return x + draw(points((n, d), o * scale), label="offsets")


# ---------------------------------------------------------------------- model inputs
@st.composite
def model_cases(draw, vocab_size: int, max_len: int, min_len: int = 3, batch=(1, 2)):
    """A model input (:class:`kernel_verify.properties.model_checks.Case`): ``B`` rows of
    ``T`` token ids in ``[0, vocab_size)``, a split ``1 ≤ s < T`` (every split, not only
    ``T − 1``), packing lengths summing to ``T`` (1 to 3 sequences, any cut) and a pad count
    ``0 < p < T`` per row."""
    from kernel_verify.properties.model_checks import Case

    b = draw(st.integers(*batch))
    t = draw(st.integers(min_len, max_len))
    ids = tuple(tuple(draw(st.lists(st.integers(0, vocab_size - 1), min_size=t, max_size=t)))
                for _ in range(b))
    split = draw(st.integers(1, t - 1))
    cuts = sorted(draw(st.sets(st.integers(1, t - 1), min_size=0, max_size=min(2, t - 1))))
    bounds = [0, *cuts, t]
    lengths = tuple(bounds[i + 1] - bounds[i] for i in range(len(bounds) - 1))
    pads = tuple(draw(st.integers(1, t - 1)) for _ in range(b))
    return Case(ids, split, lengths, pads)
