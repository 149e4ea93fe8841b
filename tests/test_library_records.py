"""Every library adapter's record is complete (issue #28: one record per library adapter).

``LIBRARY = Library(...)`` in ``kernel_verify/adapters/<key>.py`` holds what the project knows
about a library (:mod:`kernel_verify.adapters.library`). Each failure below names the module and
the field to add or fix, the way a formula record's completeness test does. Importing the
adapters never imports their libraries, so this runs without any of them (about 1 s).
"""

from __future__ import annotations

import importlib
import importlib.util
import re
import tomllib
from pathlib import Path

import pytest

from kernel_verify.adapters.library import Library, adapter_modules, record, records
from kernel_verify.properties.loader import load_targets
from kernel_verify.properties.property_index import properties_by_kind

ROOT = Path(__file__).resolve().parents[1]
RECORDS = records()
KEYS = sorted(RECORDS)


def _where(key: str) -> str:
    return f"kernel_verify/adapters/{key}.py"


def _extras() -> dict[str, list[str]]:
    data = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    return data["project"]["optional-dependencies"]


def _dist_names(requirements: list[str]) -> set[str]:
    """Normalised distribution names of requirement strings (``kernel-verify[x]`` included)."""
    return {re.split(r"[<>=!~\[; ]", r, maxsplit=1)[0].lower().replace("_", "-")
            for r in requirements}


def _targets(key: str) -> list:
    """The adapter's targets (none for an adapter that has none yet)."""
    mod = importlib.import_module(f"kernel_verify.adapters.{key}")
    return load_targets(RECORDS[key].spec) if mod.targets else []


def _target_names(key: str) -> set[str]:
    return {t.name for t in _targets(key)}


def _properties() -> frozenset[str]:
    return frozenset().union(*properties_by_kind().values())


def test_there_are_records():
    assert len(RECORDS) >= 7, f"library records found: {sorted(RECORDS)}"


def test_every_module_with_targets_has_a_record():
    """An adapter module (one exporting ``targets``) defines its ``LIBRARY``."""
    for name in adapter_modules():
        mod = importlib.import_module(f"kernel_verify.adapters.{name}")
        if hasattr(mod, "targets"):
            assert isinstance(getattr(mod, "LIBRARY", None), Library), (
                f"{_where(name)} exports targets but no record: add `LIBRARY = Library(key="
                f"{name!r}, title=..., module=..., dist=..., extra=...)` "
                "(kernel_verify.adapters.library)")


@pytest.mark.parametrize("key", KEYS)
def test_key_is_the_module_name(key):
    assert record(key).key == key, f"{_where(key)}: set LIBRARY's key={key!r}"


@pytest.mark.parametrize("key", KEYS)
def test_names_are_filled_in(key):
    lib = RECORDS[key]
    for name in ("title", "module", "dist", "extra"):
        assert getattr(lib, name).strip(), f"{_where(key)}: fill in LIBRARY's {name}"


@pytest.mark.parametrize("key", KEYS)
def test_extra_is_in_pyproject(key):
    """The record's ``extra`` is a pyproject extra that installs its ``dist``."""
    lib, extras = RECORDS[key], _extras()
    assert lib.extra in extras, (
        f"{_where(key)}: LIBRARY.extra={lib.extra!r} is not in pyproject.toml: add "
        f"`{lib.extra} = [\"{lib.dist}>=...\"]` under [project.optional-dependencies]")
    assert lib.dist.lower() in _dist_names(extras[lib.extra]), (
        f"pyproject.toml: the extra {lib.extra!r} does not install {lib.dist!r} "
        f"(LIBRARY.dist of {_where(key)}): add it, or fix LIBRARY.dist")


@pytest.mark.parametrize("key", KEYS)
def test_adapters_extra_matches_the_records(key):
    """``pip install 'kernel-verify[adapters]'`` installs exactly the records that say
    ``in_adapters_extra`` (the Makefile installs that extra)."""
    lib = RECORDS[key]
    bundled = {e for req in _extras()["adapters"]
               for e in re.findall(r"\[(.*)\]", req)[0].split(",")}
    if lib.in_adapters_extra:
        assert lib.extra in bundled, (
            f"pyproject.toml: add {lib.extra!r} to the `adapters` extra, or set "
            f"LIBRARY.in_adapters_extra=False in {_where(key)}")
    else:
        assert lib.extra not in bundled, (
            f"{_where(key)}: set LIBRARY.in_adapters_extra=True (the `adapters` extra installs "
            f"{lib.extra!r})")


def test_readme_table_lists_every_adapter():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    for key, lib in RECORDS.items():
        assert f"| `{key}` | `{lib.extra}` |" in text, (
            f"README.md, 'Conformance of widely used implementations': add the row "
            f"| `{key}` | `{lib.extra}` | what is tested |")


@pytest.mark.parametrize("key", KEYS)
def test_a_library_with_targets_says_what_it_does_right(key):
    lib = RECORDS[key]
    if _target_names(key):
        assert lib.right.strip(), (
            f"{_where(key)}: write LIBRARY.right (the page's 'What it does right'), or the "
            "page says only '(see the verdicts)'")


@pytest.mark.parametrize("key", KEYS)
def test_every_measurement_is_a_confirmation_that_exists(key):
    """Each finding's ``confirm`` and each ``measured`` name is one of the record's
    ``confirmations``, and its module (``confirm_module``, default the adapter) computes it."""
    lib = RECORDS[key]
    for name in (*(f.confirm for f in lib.findings), *lib.measured):
        assert name in lib.confirmations, (
            f"{_where(key)}: add {name!r} to LIBRARY.confirmations (a finding or measured "
            "name)")
    spec = importlib.util.find_spec(lib.measurements)
    assert spec is not None and spec.origin, (
        f"{_where(key)}: LIBRARY.confirm_module={lib.confirm_module!r} does not exist")
    source = Path(spec.origin).read_text(encoding="utf-8")
    for name in lib.confirmations:
        if lib.confirm_in_subprocess:  # a name the module's command line accepts
            ok = f'"{name}"' in source
        else:
            ok = callable(getattr(importlib.import_module(lib.measurements), name, None))
        assert ok, (f"{lib.measurements} has no measurement {name!r} (LIBRARY.confirmations "
                    f"of {_where(key)}): write `def {name}(quick: bool = False) -> str`")
    others = {n for k, o in RECORDS.items() if k != key for n in o.confirmations}
    assert not set(lib.confirmations) & others, (
        f"{_where(key)}: confirmations {sorted(set(lib.confirmations) & others)} are also "
        "another library's: a confirmation belongs to one record")


@pytest.mark.parametrize("key", KEYS)
def test_findings_name_properties_and_targets_that_exist(key):
    """A finding (hence a declared known failure) or an explanation names a property of the
    suite, and a finding's ``targets`` and the scope's prefixes name targets of the adapter."""
    lib, props, names = RECORDS[key], _properties(), _target_names(key)
    for i, f in enumerate(lib.findings):
        for prop in f.properties:
            assert prop in props, (
                f"{_where(key)}: LIBRARY.findings[{i}] ({f.title!r}) names the property "
                f"{prop!r}, which no properties/test_*.py defines: fix Finding.properties")
        for target in f.targets:
            assert target in names, (
                f"{_where(key)}: LIBRARY.findings[{i}] ({f.title!r}) names the target "
                f"{target!r}, not one of the adapter's targets: fix Finding.targets")
    for prop in lib.explained:
        assert prop in props, (
            f"{_where(key)}: LIBRARY.explained names the property {prop!r}, which no "
            "properties/test_*.py defines")
    if lib.scope is not None:
        assert any(lib.scope.covers(n) for n in names), (
            f"{_where(key)}: LIBRARY.scope.prefixes {lib.scope.prefixes} cover none of the "
            "adapter's targets: fix Scope.prefixes")


@pytest.mark.parametrize("key", KEYS)
def test_declared_known_failures_come_from_the_record(key):
    """A target's known failure that cites this library's page names one of its findings."""
    lib = RECORDS[key]
    confirms = {f.confirm for f in lib.findings}
    for t in _targets(key):
        for prop, reason in t.known_failures.items():
            cited = re.findall(rf"conformance/{key}\.md, finding '([^']+)'", reason)
            for name in cited:
                assert name in confirms, (
                    f"{_where(key)}: target {t.name} declares {prop} known by the finding "
                    f"{name!r}, which is not in LIBRARY.findings: add the Finding")
