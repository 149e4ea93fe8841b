"""A property module that cannot be collected is an error in the verdicts, never a silent gap.

Found by running ``kernel-verify check`` on a target whose declaration broke the
parametrisation of ``properties/test_blackbox_maps.py`` (a ``KeyError`` at collection): pytest
went on with the other modules, and the whole module was missing from the verdict table.
"""

from __future__ import annotations

import json
from pathlib import Path

from kernel_verify.runner import fold, load_results


def _record(**fields) -> dict:
    base = {"nodeid": "properties/test_x.py::test_p[t]", "family": "x", "prop": "test_p",
            "target": "t", "backend": "", "builtin_only": False, "when": "call",
            "outcome": "passed", "crashed": False, "known": "", "message": "", "notes": [],
            "repro": "", "seconds": 0.0}
    return {**base, **fields}


def test_a_collection_error_is_a_failing_verdict(tmp_path: Path) -> None:
    path = tmp_path / "results.jsonl"
    rows = [
        _record(),
        _record(nodeid="properties/test_blackbox_maps.py", family="blackbox_maps",
                prop="(collection)", target="", when="collect", outcome="failed",
                message="properties/test_blackbox_maps.py could not be collected, so none of "
                        "its properties ran:\nE   KeyError: 'sigma'"),
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    verdicts = {(v.family, v.prop): v for v in fold(load_results(path, target_only=True))}
    assert verdicts["x", "test_p"].outcome == "pass"
    broken = verdicts["blackbox_maps", "(collection)"]
    assert broken.outcome == "fail"
    assert "KeyError: 'sigma'" in broken.evidence
