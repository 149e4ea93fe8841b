"""``module:attribute`` naming something that is not a target gets one clear line: a class
(a target kind, or the user's own), a function that needs arguments, a factory that raises, a
module (properties/loader.py)."""

from __future__ import annotations

import sys
import types

import pytest

from kernel_verify.properties.loader import load_targets


@pytest.fixture()
def module():
    mod = types.ModuleType("kv_loader_case")

    class MyAttention:
        pass

    def features(x, seed):
        return x

    def raises():
        raise RuntimeError("no GPU here")

    from kernel_verify import FeatureMapTarget

    mod.FeatureMapTarget = FeatureMapTarget
    mod.MyAttention = MyAttention
    mod.features = features
    mod.raises = raises
    mod.np = types
    sys.modules["kv_loader_case"] = mod
    yield mod
    del sys.modules["kv_loader_case"]


@pytest.mark.parametrize(("attr", "exc", "words"), [
    ("FeatureMapTarget", TypeError, r"is the class FeatureMapTarget itself; name an instance"),
    ("MyAttention", TypeError, r"is the class MyAttention; expected a target"),
    ("features", TypeError, r"is a function that takes arguments \(x, seed\)"),
    ("raises", ValueError, r"calling the factory raised RuntimeError: no GPU here"),
    ("np", TypeError, r"kv_loader_case:np is a module; expected one of"),
])
def test_what_is_not_a_target_is_named(module, attr, exc, words):
    with pytest.raises(exc, match=words):
        load_targets(f"kv_loader_case:{attr}")


@pytest.mark.parametrize(("source", "words"), [
    ("t = FeatureMapTarget('p', 'softmax', frozenset(), m=16, formular='softmax_positive')",
     r"FeatureMapTarget has no field 'formular'; did you mean 'formula'\?"),
    ("t = FeatureMapTarget('p', 'softmax', frozenset(), m=16, dtypes=('float32',))",
     r"FeatureMapTarget has no field 'dtypes'; its fields: name, kernel, claims"),
    ("t = GatedAttentionTarget('g', gate='scalar')",
     r"GatedAttentionTarget has no field 'gate'; did you mean 'gates'"),
])
def test_a_keyword_a_target_kind_lacks_names_its_fields(tmp_path, monkeypatch, source, words):
    """A misspelt or invented field of a target kind fails the module's import: the error adds
    the kind's closest field names (or all of them) to Python's TypeError."""
    (tmp_path / "kv_keyword_case.py").write_text(
        f"from kernel_verify import FeatureMapTarget, GatedAttentionTarget\n{source}\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "kv_keyword_case", raising=False)
    with pytest.raises(ValueError, match=words):
        load_targets("kv_keyword_case:t")
