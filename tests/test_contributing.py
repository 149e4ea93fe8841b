"""CONTRIBUTING.md's worked example is real: built in a temporary copy of the project, it adds a
map that the registry, the formula record and the reference check accept, touching the number of
files the guide says (issue #28: adding a map, measured).

The guide marks each edit with ``<!-- example: PATH append -->`` or ``<!-- example: PATH after:
LINE -->`` before a fenced code block. The copy is the installed layout (``kernel_verify/`` with
``impls/``, ``verify/``, ``properties/`` inside it, as ``pyproject.toml`` maps them), imported in
a subprocess from ``PYTHONPATH`` (which the path finder consults before the editable install's
finder, appended to ``sys.meta_path``). About 5 s.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
GUIDE = ROOT / "CONTRIBUTING.md"
MARK = re.compile(r"<!-- example: (\S+) (append|after: (.+?)) -->\n```python\n(.*?)```", re.S)
#: The files a new formula touches, as the guide states ("three files and a docs section").
FILES_TOUCHED = 3
LAYERS = {"impls": "impls", "verify": "verify", "properties": "properties"}


def _edits() -> list[tuple[str, str | None, str]]:
    """``(path, anchor or None for append, code)`` of every marked block of the guide."""
    return [(m.group(1), m.group(3), m.group(4)) for m in MARK.finditer(GUIDE.read_text())]


def _copy_project(dest: Path) -> Path:
    """The installed layout of the project under ``dest/kernel_verify``."""
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    pkg = dest / "kernel_verify"
    shutil.copytree(ROOT / "kernel_verify", pkg, ignore=ignore)
    for folder in LAYERS:
        shutil.copytree(ROOT / folder, pkg / folder, ignore=ignore)
    return pkg


def _installed(pkg: Path, repo_path: str) -> Path:
    head, _, rest = repo_path.partition("/")
    return pkg / rest if head == "kernel_verify" else pkg / head / rest


def test_guide_has_the_worked_example():
    paths = [p for p, _, _ in _edits()]
    assert len(paths) >= 3, "CONTRIBUTING.md lost its marked worked example"


def test_worked_example_builds_and_touches_three_files(tmp_path):
    edits = _edits()
    touched = sorted({p for p, _, _ in edits})
    assert len(touched) == FILES_TOUCHED, f"the worked example touches {touched}"
    pkg = _copy_project(tmp_path / "site")
    for path, anchor, code in edits:
        target = _installed(pkg, path)
        text = target.read_text()
        if anchor is None:
            text = text.rstrip("\n") + "\n\n\n" + code
        else:
            line = anchor.strip() + "\n"
            assert line in text, f"{path}: the guide's anchor {anchor!r} is not in the file"
            text = text.replace(line, line + code, 1)
        target.write_text(text)
    script = textwrap.dedent(f"""
        import numpy as np
        import kernel_verify
        assert kernel_verify.__file__.startswith({str(pkg)!r}), kernel_verify.__file__
        from kernel_verify.impls.names import FORMULAS
        from kernel_verify.impls.registry import get
        from kernel_verify.properties.checks.reference import check_features
        from kernel_verify.properties.formulas import APPLIES, FIELDS, record
        from kernel_verify.verify.backends import get_backend
        from kernel_verify.verify.references.features import MP_FEATURES

        entry = get("reversed")
        assert "reversed" in FORMULAS and "reversed" in MP_FEATURES
        r = record("reversed")
        missing = [f for f in FIELDS if APPLIES[f](r) and not r.has(f) and not r.without.get(f)]
        assert not missing, missing
        assert "finite differences" in r.why_not("backward")
        x = np.random.default_rng(0).standard_normal((3, 4))
        for backend in ("numpy-float64", "torch:cpu-float32"):
            check_features(entry, x, entry.draw_params(np.random.default_rng(0), 4, 4),
                           get_backend(backend), hypothesis=False)
        print("ok", len(FORMULAS))
    """)
    env = {**os.environ, "PYTHONPATH": str(pkg.parent), "KV_CACHE_DIR": str(tmp_path / "cache")}
    out = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr
    assert out.stdout.startswith("ok")


# ------------------------------------------------------------------ adding a library adapter
LIBRARY_MARK = re.compile(
    r"<!-- library example: (\S+) (create|after: (.+?)) -->\n```\w+\n(.*?)```", re.S)
#: The files a new library adapter touches, as the guide states: its module and pyproject.toml
#: (its extra), plus README.md (its row of the adapters' table).
#: (``adapters/`` in the guide's marks is the package folder ``kernel_verify/adapters/``.)
LIBRARY_CODE_FILES = ("adapters/toy_rff.py", "pyproject.toml")
LIBRARY_DOCS = ("README.md",)


def test_library_example_builds_and_its_record_is_complete(tmp_path):
    """The guide's library adapter, added to a temporary copy, is found by the record scan,
    passes ``tests/test_library_records.py`` there, and gets a 'not installed' page (about 8 s)."""
    edits = [(m.group(1), m.group(3), m.group(4)) for m in LIBRARY_MARK.finditer(
        GUIDE.read_text())]
    touched = sorted({p for p, _, _ in edits})
    assert touched == sorted(LIBRARY_CODE_FILES + LIBRARY_DOCS), (
        f"the library example touches {touched}")
    pkg = _copy_project(tmp_path / "site")
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, tmp_path / name)
    (tmp_path / "tests").mkdir()
    shutil.copy(ROOT / "tests" / "test_library_records.py", tmp_path / "tests")
    for path, anchor, code in edits:
        target = pkg / path if path.startswith("adapters/") else tmp_path / path
        if anchor is None:
            assert not target.exists(), f"{path} exists already"
            target.write_text(code)
            continue
        text, line = target.read_text(), anchor.strip() + "\n"
        assert line in text, f"{path}: the guide's anchor {anchor!r} is not in the file"
        target.write_text(text.replace(line, line + code, 1))
    env = {**os.environ, "PYTHONPATH": str(pkg.parent), "PYTHONSAFEPATH": "1",
           "KV_CACHE_DIR": str(tmp_path / "cache")}
    test = subprocess.run(
        [sys.executable, "-m", "pytest", "tests/test_library_records.py", "-q", "-rA",
         "-p", "no:xdist", "-p", "no:cacheprovider", "-k", "toy_rff or every_module or readme"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert test.returncode == 0, test.stdout[-4000:] + test.stderr[-2000:]
    assert "[toy_rff]" in test.stdout, test.stdout[-2000:]
    script = textwrap.dedent(f"""
        import kernel_verify
        assert kernel_verify.__file__.startswith({str(pkg)!r}), kernel_verify.__file__
        from kernel_verify.adapters.conformance import page
        from kernel_verify.adapters.library import records
        assert "toy_rff" in records(), sorted(records())
        text = page("toy_rff", None, {{}}, {{}}, "ci")
        assert "**Not run**: toy-rff is not installed (pip install 'kernel-verify[toy-rff]')" \\
            in text, text
        print("ok")
    """)
    out = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and out.stdout.startswith("ok"), out.stdout + out.stderr
