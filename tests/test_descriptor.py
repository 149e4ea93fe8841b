"""One descriptor per feature map (issue #18 item 2): a registered map and a user's map are the
same class (``impls/descriptor.py``), read unchanged everywhere; nothing translates one into the
other."""

from __future__ import annotations

import ast
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from kernel_verify.impls import descriptor
from kernel_verify.impls.registry import (
    FeatureMap,
    all_maps,
    get,
    is_registered,
    no_params,
    register,
)
from kernel_verify.properties.builtin import builtin_targets
from kernel_verify.properties.loader import load_targets
from kernel_verify.properties.protocol import FeatureMapTarget
from kernel_verify.verify.references.features import MP_FEATURES, features_mp
from kernel_verify.verify.references.kernels import MP_KERNELS
from kernel_verify.verify.references.spec import MapSpec

ROOT = Path(__file__).resolve().parents[1]


def test_one_class_for_registry_and_targets() -> None:
    assert FeatureMap is FeatureMapTarget is descriptor.FeatureMapTarget
    maps = all_maps()
    assert all(type(e) is FeatureMapTarget and isinstance(e, MapSpec) for e in maps)
    # the built-in targets are the registry's objects themselves, not copies
    built = [t for t in builtin_targets() if isinstance(t, FeatureMapTarget)]
    assert len(built) == len(maps) and all(t is e for t, e in zip(built, maps, strict=True))


def test_loader_hands_a_registry_map_over_unchanged(tmp_path, monkeypatch) -> None:
    (tmp_path / "kv_descriptor_adapter.py").write_text(
        "from kernel_verify.impls.registry import get\n"
        "targets = [get('taylor2')]\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    (target,) = load_targets("kv_descriptor_adapter:targets")
    assert target is get("taylor2") and is_registered(target)


def test_registered_only_for_the_registered_object() -> None:
    entry = get("softmax_positive[iid]")
    assert is_registered(entry)
    assert not is_registered(entry.with_config())  # a variant is a new object
    assert not is_registered(replace(entry, name="mutant:x"))
    assert not is_registered("softmax_positive[iid]")


def test_builtin_names_are_known_to_the_truth() -> None:
    """The names a built-in map uses resolve in the truth. (Every descriptor checks its names
    against ``impls.names`` at construction, the built-ins included; it skips their
    formula-config check while the catalogue loads: the built-ins define the formulas'
    configs. ``tests/test_names.py`` checks ``impls.names`` against the truth.)"""
    for e in all_maps():
        assert e.formula in MP_FEATURES, e.name
        assert e.kernel in MP_KERNELS, e.name
        assert e.mean_kernel is None or e.mean_kernel in MP_KERNELS, e.name


def test_kernel_args_one_signature() -> None:
    base = dict(name="t", kernel="taylor", claims=frozenset(), sample_fn=lambda x, s: x)
    assert FeatureMapTarget(**base, kernel_params={"order": 2}).kernel_args(3) == {"order": 2}
    t = FeatureMapTarget(**base, config={"order": 3},
                         kernel_params=lambda config, d: {"order": config["order"], "d": d})
    assert t.kernel_args(5) == {"order": 3, "d": 5}
    assert get("taylor3").kernel_args(2) == {"order": 3}
    with pytest.raises(TypeError, match=r"kernel_params.*\(config, d\)"):
        FeatureMapTarget(**base, kernel_params=lambda d: {})


def test_a_users_white_box_map_is_its_own_twin() -> None:
    """The truth evaluates a user's map from the user's object (formula + config): the same
    mpmath features as the registry map of that formula."""
    entry = get("rff_pairs[iid]")
    user = FeatureMapTarget("user_rff", "gaussian", frozenset({"unbiased"}),
                            kernel_params={"sigma": entry.config["sigma"]},
                            config=dict(entry.config), draw=entry.draw,
                            numpy_fn=entry.numpy_fn, formula="rff_pairs")
    params = entry.draw(np.random.default_rng(0), 2, 4, entry.config)
    x = np.array([[0.3, -0.2], [0.1, 0.5]])
    assert np.array_equal(features_mp(user, x, params), features_mp(entry, x, params))
    assert user.kernel_args(2) == entry.kernel_args(2)


def test_register_needs_a_complete_builtin() -> None:
    black = FeatureMapTarget("black", "softmax", frozenset(), sample_fn=lambda x, s: x)
    with pytest.raises(ValueError, match="without draw, numpy_fn, torch_fn, family, output_dim"):
        register(black)
    entry = get("softmax_positive[iid]")
    with pytest.raises(ValueError, match="log_torch_fn"):
        register(replace(entry, name="incomplete", log_torch_fn=None))
    with pytest.raises(ValueError, match="registered twice"):
        register(entry)
    assert get("taylor2").draw is no_params and get("taylor2").white_box


def test_no_translation_functions_left() -> None:
    """No function turns one feature-map description into another: ``from_entry``,
    ``twin_entry``, ``attention_entry`` and the ``entry`` back-pointer are gone."""
    gone = {"from_entry", "twin_entry", "attention_entry", "_run_entry"}
    found = []
    for folder in ("impls", "verify", "properties", "kernel_verify"):
        for path in (ROOT / folder).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.FunctionDef) and node.name in gone:
                    found.append(f"{path.relative_to(ROOT)}:{node.lineno} def {node.name}")
                if isinstance(node, ast.Attribute) and node.attr in gone | {"entry"} and (
                        isinstance(node.value, ast.Name) and node.value.id in ("t", "target")):
                    found.append(f"{path.relative_to(ROOT)}:{node.lineno} .{node.attr}")
    assert not found, found
