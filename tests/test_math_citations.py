"""docs/math.md is the one mathematical reference: every citation of it points at a section that
exists, and every test or reference function it names exists.

Citations are ``docs/math.md`` followed by one or more sections: ``§3``, ``§3, §7``, ``§5–§7``
(a range cites every section in it) or ``§8 and §9``. They are collected from every source file
(``impls``, ``verify``, ``properties``, ``benchmarks``, ``tests``, ``kernel_verify``,
``examples``), from ``README.md`` and ``docs/``, and from the ``source`` field of every system
``kernel-verify list --json`` prints. A citation of a document that is not in the repository
(``MATH §…``, ``MATH.md``, ``DESIGN.md``) fails too.
"""

from __future__ import annotations

import ast
import json
import re
from functools import cache
from pathlib import Path

import pytest

from kernel_verify.cli import main

ROOT = Path(__file__).resolve().parents[1]
MATH = ROOT / "docs" / "math.md"
SOURCE_DIRS = ("impls", "verify", "properties", "benchmarks", "tests", "kernel_verify", "examples")

#: "docs/math.md" and the run of sections after it.
CITATION = re.compile(r"docs/math\.md(?P<run>(?:[\s,;(]*(?:and\s+)?§\d+(?:\s*[–-]\s*§\d+)?)+)")
SECTION = re.compile(r"§(\d+)(?:\s*[–-]\s*§(\d+))?")
#: Documents outside the repository that older text cited.
FOREIGN = re.compile(r"\bMATH\s*§|\bMATH\.md\b|\bDESIGN\.md\b")
#: ``path/to/file.py::name`` (a test function, a reference function) in docs/math.md.
CODE_REF = re.compile(r"`((?:properties|tests|verify|impls)/[\w/]+\.py)(?:::(\w+))?`")


@cache
def sections() -> set[int]:
    """Section numbers of docs/math.md: headings ``## §N. Title``."""
    return {int(n) for n in re.findall(r"^## §(\d+)\.", MATH.read_text(), flags=re.M)}


def cited(text: str) -> list[tuple[str, int]]:
    """``(citation, section)`` for every section every citation in ``text`` names."""
    out = []
    for match in CITATION.finditer(text):
        for lo, hi in SECTION.findall(match.group("run")):
            first, last = int(lo), int(hi or lo)
            out += [(match.group(0), n) for n in range(first, last + 1)]
    return out


def _files() -> list[Path]:
    files = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    for folder in SOURCE_DIRS:
        files += sorted((ROOT / folder).rglob("*.py"))
    return files


FILES = _files()


def test_math_md_has_sections_zero_to_ten():
    assert set(range(11)) <= sections()


def test_citation_parser():
    text = ("see docs/math.md §3, §7 and docs/math.md §5–§6; docs/math.md §1 and §2; "
            "(docs/math.md §9).")
    assert [n for _, n in cited(text)] == [3, 7, 5, 6, 1, 2, 9]
    assert cited("docs/math.md without a section") == []


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_cited_section_exists(path):
    text = path.read_text(encoding="utf-8")
    missing = [(c, n) for c, n in cited(text) if n not in sections()]
    assert not missing, f"{path.relative_to(ROOT)} cites sections docs/math.md lacks: {missing}"
    foreign = sorted({m.group(0) for m in FOREIGN.finditer(text)})
    if path == Path(__file__).resolve():
        foreign = []  # this file names the patterns it forbids
    assert not foreign, f"{path.relative_to(ROOT)} cites documents outside the repo: {foreign}"


def test_citations_are_found_across_the_code():
    """The scan is not vacuous: the code cites docs/math.md in many places and every section."""
    found = [n for path in FILES for _, n in cited(path.read_text(encoding="utf-8"))]
    assert len(found) > 100
    assert set(range(11)) <= set(found)


def test_every_registered_system_cites_an_existing_section(capsys):
    assert main(["list", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    uncited = [r["name"] for r in rows if not cited(r["source"])]
    assert not uncited, f"systems whose source cites no docs/math.md section: {uncited}"
    bad = [(r["name"], n) for r in rows for _, n in cited(r["source"]) if n not in sections()]
    assert not bad, f"list --json cites missing sections: {bad}"
    foreign = [r["name"] for r in rows if FOREIGN.search(r["source"])]
    assert not foreign, f"list --json cites documents outside the repository: {foreign}"


def _top_level_names(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return {n.name for n in tree.body if isinstance(n, ast.FunctionDef | ast.ClassDef)}


def _code_refs() -> list[tuple[str, str | None]]:
    return sorted(set(CODE_REF.findall(MATH.read_text(encoding="utf-8"))))


def test_math_md_names_properties():
    refs = _code_refs()
    assert sum(1 for f, _ in refs if f.startswith("properties/")) >= 40
    assert any(f.startswith("verify/") for f, _ in refs)


@pytest.mark.parametrize(("file", "name"), _code_refs(), ids=lambda v: v or "")
def test_named_code_exists(file, name):
    """Every ``file::function`` docs/math.md names (properties, unit tests, references) exists."""
    path = ROOT / file
    assert path.is_file(), f"docs/math.md names {file}, which does not exist"
    if name:
        assert name in _top_level_names(path), f"docs/math.md names {file}::{name}: not defined"


def test_every_section_says_what_checks_it():
    text = MATH.read_text(encoding="utf-8")
    parts = re.split(r"^## §(\d+)\.", text, flags=re.M)[1:]
    for number, body in zip(parts[::2], parts[1::2], strict=True):
        assert "Checked by" in body, f"§{number} does not say what checks it"
        if int(number) <= 10:
            assert CODE_REF.search(body), f"§{number} names no property or reference"
