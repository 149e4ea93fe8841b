"""The orthogonal constructions draw their Haar blocks as one stack
(``impls/random_matrices._haar_blocks``): the matrix and the generator's state afterwards are
those of the block-by-block construction (one :func:`haar_orthogonal` per block), bit for bit."""

from __future__ import annotations

import numpy as np
import pytest

from kernel_verify.impls.random_matrices import draw_matrix, haar_orthogonal


def _block_by_block(kind: str, rng: np.random.Generator, m: int, d: int) -> np.ndarray:
    count = -(-m // d)
    directions = np.concatenate([haar_orthogonal(rng, d) for _ in range(count)], axis=0)[:m]
    if kind == "orthogonal_fixed_norm":
        return directions * np.sqrt(d)
    return directions * np.sqrt(rng.chisquare(d, size=m))[:, None]


@pytest.mark.parametrize("kind", ["orthogonal", "orthogonal_fixed_norm"])
@pytest.mark.parametrize("m, d", [(1, 1), (3, 1), (1, 4), (4, 4), (7, 3), (16, 5), (9, 16)])
def test_stacked_blocks_are_the_block_by_block_matrix(kind, m, d):
    for seed in range(20):
        stacked, single = np.random.default_rng(seed), np.random.default_rng(seed)
        got = draw_matrix(kind, stacked, m, d)
        assert np.array_equal(got, _block_by_block(kind, single, m, d)), (seed, m, d)
        assert stacked.bit_generator.state == single.bit_generator.state
