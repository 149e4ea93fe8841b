"""``kernel-verify check`` runs every property file that can judge a third-party target
(:func:`kernel_verify.runner.target_property_files`): read independently here, a file is such a
file when one of its module-level ``test_…`` functions takes a ``target`` argument. A text
search for one import once dropped ``test_attention_forms.py`` from every ``check`` after its
cases moved to a shared module (a new user's Triton kernels with the state ignored, the final
state from the wrong chunk and the state shared across heads then passed)."""

from __future__ import annotations

import ast
from pathlib import Path

from kernel_verify.runner import SUITE_DIR, target_property_files


def _takes_a_target(path: Path) -> bool:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return any(isinstance(node, ast.FunctionDef) and node.name.startswith("test_")
               and "target" in {a.arg for a in node.args.args} for node in tree.body)


def test_every_file_with_a_target_property_is_run_by_check():
    want = {p.name for p in Path(SUITE_DIR).glob("test_*.py") if _takes_a_target(p)}
    got = {Path(f).name for f in target_property_files()}
    assert "test_attention_forms.py" in want
    assert want <= got, f"property files check would not run: {sorted(want - got)}"
