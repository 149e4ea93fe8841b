"""The finite-difference check and kinks (``directional_differences``,
properties/gradient_checks.py): a stencil that straddles a ReLU kink makes the differences wrong,
not the backward, and the second look at a shifted point clears it; a wrong backward fails at
both points."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from kernel_verify.properties.gradient_checks import (  # noqa: E402
    KINK_SHIFT,
    directional_differences,
    fd_step_and_tol,
)


def _relu(x):
    return torch.relu(x)


class _WrongSlope(torch.autograd.Function):
    """ReLU whose backward passes 0.9·g where x > 0 (a wrong derivative on an open set)."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return torch.relu(x)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return 0.9 * g * (x > 0)


def _kink_point() -> torch.Tensor:
    """One entry at a third of the step from ReLU's kink: every stencil ``x ± h·u`` with
    ``|u| > 1/3`` on that entry straddles it."""
    step, _ = fd_step_and_tol("float64")
    return torch.tensor([[step / 3, 0.7, -0.4]], dtype=torch.float64)


def test_a_kink_inside_the_stencil_is_cleared_by_the_shifted_point():
    x = _kink_point()
    results = [r for seed in range(20) for r in directional_differences(_relu, (x,), "float64",
                                                                         seed)]
    straddled = [r for r in results if r.own_ratio > 1]
    assert straddled, "the kink point must defeat the plain differences for some direction"
    assert all(r.shifted is not None and r.ratio <= 1 for r in straddled), [
        (r.own_ratio, r.shifted and r.shifted.own_ratio) for r in straddled]
    assert all(r.ratio <= 1 for r in results)


@pytest.mark.parametrize("point", ["kink", "smooth"])
def test_a_wrong_backward_fails_at_both_points(point):
    x = _kink_point() if point == "kink" else torch.tensor([[0.3, 0.7, 1.1]],
                                                             dtype=torch.float64)
    results = directional_differences(_WrongSlope.apply, (x,), "float64", 3)
    assert any(r.ratio > 1 for r in results)
    for r in results:
        if r.ratio > 1:
            assert r.shifted is not None and r.shifted.own_ratio > 1
            assert r.shifted.step == r.step and KINK_SHIFT * r.step < 1e-3
