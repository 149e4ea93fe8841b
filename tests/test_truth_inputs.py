"""The truth computes from (formula, config, params) alone: it takes a map's description
structurally (verify/references/spec.py), checks its own inputs (verify/inputs.py) and reads
learned values from the parameter draw, never from implementation code."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pytest

from kernel_verify.impls.registry import get
from kernel_verify.verify import inputs
from kernel_verify.verify.moments import exact_moments
from kernel_verify.verify.references.features import features_mp
from kernel_verify.verify.references.mp import to_float
from kernel_verify.verify.references.spec import MapSpec, require_map


@dataclass(frozen=True)
class Spec:
    """A description that is not a registry entry (as a third-party target could be)."""

    name: str
    formula: str
    kernel: str = "softmax"
    claims: frozenset[str] = frozenset({"unbiased", "positive"})
    config: dict[str, Any] = field(default_factory=dict)
    matrix: str | None = "iid"
    mean_kernel: str | None = None
    attention_prescale: bool = True

    def kernel_args(self, d):
        return {}

    def has(self, claim: str) -> bool:
        return claim in self.claims


def test_structural_spec_gives_the_same_reference_as_the_entry():
    entry = get("softmax_positive[iid]")
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 3))
    params = entry.draw(rng, 3, 4, entry.config)
    spec = Spec("mine", "softmax_positive")
    assert isinstance(spec, MapSpec)
    a = to_float(features_mp(entry, x, params, dps=30))
    b = to_float(features_mp(spec, x, params, dps=30))
    assert np.array_equal(a, b)
    m_entry = exact_moments(entry, x[0], x[1], None, 4)
    m_spec = exact_moments(spec, x[0], x[1], None, 4)
    assert m_entry.mean == m_spec.mean and m_entry.variance == m_spec.variance


@pytest.mark.parametrize("bad", ["softmax_positive", {"formula": "x"}, 3])
def test_non_descriptions_are_rejected(bad):
    with pytest.raises(TypeError, match="must describe a feature map"):
        require_map(bad)
    with pytest.raises(TypeError, match="must describe a feature map"):
        features_mp(bad, np.ones((1, 2)), {})


@pytest.mark.parametrize("name", ["hedgehog", "gmm_rks", "gmm_prf", "generative"])
def test_learned_values_come_from_the_draw(name):
    """The twin needs the learned arrays in params (the entry's draw puts them there)."""
    entry = get(name)
    rng = np.random.default_rng(1)
    d = 3
    x = rng.standard_normal((2, d))
    params = entry.draw(rng, d, 4, entry.config)
    phi = to_float(features_mp(entry, x, params, dps=30))
    assert np.allclose(phi, entry.numpy_fn(x, params, entry.config), rtol=1e-12, atol=1e-14)
    random_part = {k: v for k, v in params.items() if k == "eps"}
    with pytest.raises(ValueError, match="entry's draw"):
        features_mp(entry, x, random_part, dps=30)


def test_changed_learned_values_change_both_sides():
    """Implementation and twin read the same params: a different W moves both, identically."""
    entry = get("hedgehog")
    x = np.random.default_rng(2).standard_normal((2, 3))
    params = entry.draw(np.random.default_rng(0), 3, 1, entry.config)
    other = {"W": 2.0 * params["W"], "b": params["b"]}
    got = entry.numpy_fn(x, other, entry.config)
    assert not np.allclose(got, entry.numpy_fn(x, params, entry.config))
    assert np.allclose(to_float(features_mp(entry, x, other, dps=30)), got, rtol=1e-12)


def test_truth_input_checks():
    with pytest.raises(TypeError, match=r"numpy\.ndarray"):
        inputs.check_array("x", [1.0])
    with pytest.raises(TypeError, match="floating"):
        inputs.check_array("x", np.ones(2, dtype=int))
    with pytest.raises(ValueError, match="at least 2 dimensions"):
        inputs.check_array("x", np.ones(2), min_ndim=2)
    with pytest.raises(ValueError, match="contains NaN or Inf"):
        inputs.check_array("x", np.array([np.nan]))
    with pytest.raises(ValueError, match="missing parameter 'W'"):
        inputs.check_params("params", {}, {"W": (2, 2)})
    with pytest.raises(ValueError, match="must have shape"):
        inputs.check_params("params", {"W": np.ones((2, 3))}, {"W": (2, 2)})
    assert inputs.check_positive_int("m", 3) == 3
    with pytest.raises(TypeError):
        inputs.check_positive_int("m", True)
    with pytest.raises(ValueError, match=r"< 0\.25"):
        inputs.check_scalar("A", 0.3, below=0.25)
