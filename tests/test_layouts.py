"""The fixed layouts around chunk boundaries (properties/layouts.py, issue #29): which lengths,
splits, causal cuts, packed boundaries and padded lengths a chunk size C gives, and how one
explicit example runs a property body once per layout."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from kernel_verify.properties.layouts import (
    AT_BOUNDARIES,
    DEFAULT_CHUNKS,
    FixedDraws,
    causal_layouts,
    chunks_of,
    layouts,
    lengths,
    packings,
    paddings,
    shapes_for,
    with_layouts,
)
from kernel_verify.properties.protocol import AttentionTarget


def _target(**kw) -> AttentionTarget:
    return AttentionTarget("t", lambda q, k, v, **_: v, frozenset({"causal"}), **kw)


@pytest.mark.parametrize("c", [1, 2, 4, 16, 64])
def test_lengths_and_splits_cross_the_chunk_boundary(c):
    assert {1, c, c + 1, 2 * c + 1} <= set(lengths([c]))
    got = {(lay.t, lay.cut) for lay in layouts([c])}
    assert (2 * c + 1, c + 1) in got and (c + 1, c) in got
    for lay in layouts([c]):
        assert 1 <= lay.t and 1 <= lay.cut and (lay.t == 1 or lay.cut < lay.t)
    assert [lay.index for lay in layouts([c])] == list(range(len(layouts([c]))))


def test_fla_chunk_gives_63_64_65_129():
    ts = {lay.t for lay in layouts([64])}
    assert {1, 63, 64, 65, 129} <= ts
    # the causality check keeps rows <= 64 of 129: row 64 is inside the second chunk
    assert any(lay.t == 129 and lay.cut == 64 for lay in causal_layouts([64]))


@pytest.mark.parametrize("c", [1, 3, 64])
def test_packed_boundaries_at_c_minus_1_c_c_plus_1(c):
    bounds = set()
    states = set()
    for p in packings([c]):
        assert all(n >= 1 for n in p.lengths)  # cu_seqlens strictly increasing
        bounds |= set(itertools.accumulate(p.lengths))
        states.add(p.with_state)
    assert {c, c + 1} <= bounds and (c == 1 or c - 1 in bounds)
    assert states == {True, False}
    assert any(len(p.lengths) >= 2 for p in packings([c]))
    for p in paddings([c]):
        assert max(p.valid) <= p.t


def test_declared_chunk_sizes_else_defaults():
    assert chunks_of(_target()) == DEFAULT_CHUNKS
    assert chunks_of(_target(chunk_sizes=(64, 16))) == (16, 64)
    # a chunked target: the shape's chunk field selects the declared size by index
    t = _target(chunked=lambda *a, **k: None, chunk_sizes=(16, 64))
    from kernel_verify.properties.checks.forms import chunk_size

    for s in shapes_for(t):
        assert chunk_size(t, s.chunk) in (16, 64)


def test_one_explicit_example_runs_the_body_per_layout():
    seen = []

    @with_layouts(lambda target, **_: ({"shape": s} for s in (1, 2, 3)))
    def body(target, shape, data=None):
        seen.append(shape)

    body(target="t", shape=5)
    assert seen == [5]
    body(target="t", shape=AT_BOUNDARIES)
    assert seen == [5, 1, 2, 3]


def test_fixed_draws_answer_in_order_and_say_when_they_run_out():
    d = FixedDraws([np.zeros(2), 3], "T=5")
    assert d.draw(None).shape == (2,) and d.draw(None, label="n") == 3
    with pytest.raises(RuntimeError, match="T=5"):
        d.draw(None, label="extra")
