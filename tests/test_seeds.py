"""The one seed helper (verify/seeds.py): SeedSequence-based, reproducible, independent children."""

from __future__ import annotations

import numpy as np
import pytest

from kernel_verify.verify import seeds


def test_plain_seed_is_numpy_default_rng():
    """rng(seed) is default_rng(seed) exactly, so code that used the plain form keeps its draws."""
    a = seeds.rng(123).standard_normal(5)
    b = np.random.default_rng(123).standard_normal(5)
    assert np.array_equal(a, b)


def test_children_are_spawned_sequences():
    """rng(seed, i) is the i-th child that SeedSequence(seed).spawn hands out."""
    children = np.random.SeedSequence(9).spawn(4)
    for i, child in enumerate(children):
        assert np.array_equal(seeds.rng(9, i).random(3), np.random.default_rng(child).random(3))


def test_child_seeds_reproducible_distinct_and_in_range():
    a = seeds.child_seeds(7, 50, "use")
    assert a == seeds.child_seeds(7, 50, "use")
    assert len(set(a)) == 50
    assert all(0 <= s < 2**63 for s in a)
    assert set(a).isdisjoint(seeds.child_seeds(7, 50, "other use"))
    assert set(a).isdisjoint(seeds.child_seeds(8, 50, "use"))


def test_string_keys_are_stable_codes():
    assert seeds.key_code("row_law.directions") == seeds.key_code("row_law.directions")
    assert seeds.key_code(3) == 3
    assert np.array_equal(seeds.rng(1, "a").random(2), seeds.rng(1, "a").random(2))


@pytest.mark.parametrize("bad", [-1, True, 1.5])
def test_bad_seeds_are_rejected(bad):
    with pytest.raises((TypeError, ValueError)):
        seeds.rng(bad)
    with pytest.raises((TypeError, ValueError)):
        seeds.rng(0, bad)


def test_fresh_entropy_in_range():
    e = seeds.fresh_entropy()
    assert 0 <= e < 2**63
