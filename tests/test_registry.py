"""The registry: every entry is complete and runs on both backends."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from kernel_verify.impls.attention import map_features
from kernel_verify.impls.registry import CLAIMS, all_maps, get
from kernel_verify.impls.torch.convert import to_torch
from kernel_verify.verify.references.features import MP_FEATURES
from kernel_verify.verify.references.kernels import MP_KERNELS

MAPS = all_maps()
NAMES = [m.name for m in MAPS]


def positions_for(entry, n: int):
    return np.arange(n) if entry.has("positional") else None


def test_registry_is_not_empty_and_names_are_unique():
    assert len(MAPS) >= 35
    assert len(set(NAMES)) == len(NAMES)


@pytest.mark.parametrize("name", NAMES)
def test_entry_is_complete(name):
    entry = get(name)
    assert callable(entry.numpy_fn), f"{name}: no NumPy function"
    assert callable(entry.torch_fn), f"{name}: no torch function"
    assert entry.numpy_fn.__module__.startswith("kernel_verify.impls.numpy"), name
    assert entry.torch_fn.__module__.startswith("kernel_verify.impls.torch"), name
    assert set(entry.claims) <= set(CLAIMS)
    assert entry.kernel and entry.formula and entry.family
    assert entry.formula in MP_FEATURES, f"{name}: no mpmath twin for formula {entry.formula!r}"
    assert entry.kernel in MP_KERNELS, f"{name}: no mpmath kernel {entry.kernel!r}"
    assert ("unbiased" in entry.claims) + ("biased" in entry.claims) + (
        "deterministic" in entry.claims or "learned" in entry.claims
    ) >= 1, f"{name}: says neither biased, unbiased nor deterministic"


@pytest.mark.parametrize("name", NAMES)
def test_both_backends_run_with_declared_output_dim(name):
    entry = get(name)
    rng = np.random.default_rng(7)
    d, m, n = 4, 8, 5
    m = max(m, entry.min_m)
    params = entry.draw(rng, d, m, entry.config)
    assert all(p.dtype == np.float64 for p in params.values()), "draws must be float64"
    x = 0.5 * rng.standard_normal((2, n, d))
    pos = positions_for(entry, n)
    fx = map_features(entry, x, params, positions=pos)
    tx = map_features(entry, torch.tensor(x), to_torch(params), positions=pos)
    assert fx.shape == (2, n, entry.output_dim(d, m))
    assert tuple(tx.shape) == fx.shape
    assert fx.dtype == np.float64 and tx.dtype == torch.float64


def test_list_json_has_required_fields(capsys):
    from kernel_verify.cli import main

    assert main(["list", "--json"]) == 0  # in process: the console script runs in test_packaging
    out = capsys.readouterr().out
    rows = [r for r in json.loads(out) if r["kind"] == "feature_map"]
    assert [r["name"] for r in rows] == NAMES
    for row in rows:
        assert {"name", "family", "kernel", "claims"} <= set(row)
        assert isinstance(row["claims"], list)


def test_unknown_name_error_lists_known_names():
    with pytest.raises(KeyError, match="softmax_positive"):
        get("no_such_map")


def test_with_config_rejects_unknown_keys():
    with pytest.raises(ValueError, match="unknown config keys"):
        get("rff_pairs[iid]").with_config(sigmaa=2.0)
