"""The GPU run's summary page says what the run did: no gate time when the gate did not run, and
an incomplete run titled as such with its cell counts (tools/gpu/summary.py)."""

from __future__ import annotations

import json

from tools.gpu import summary

_META = {"title": "GPU run", "device": "cuda", "device_name": "X", "torch": "2", "python": "3",
         "head": "h", "base": "b", "command": "c", "budget": 200.0, "gate_budget": 90.0,
         "factor": 1.2, "rounds": 12, "alpha": 0.01, "cells_planned": 3, "wall": 188.0}
_ROW = {"label": "cell", "base": 1e-3, "head": 1e-3, "ratio": 1.0, "p_slower": 0.6,
        "p_faster": 0.6, "verdict": "no change"}
_GATE = {"seconds": 91.0, "passed": 428, "failed": [], "skipped": 14, "not_run": 136, "ok": True}


def test_no_gate_says_so_once() -> None:
    page = summary.render(_META, None, [_ROW])
    assert "(gate not run)" in page and "Gate: not run" in page
    assert "90 s of it" not in page


def test_a_gate_that_ran_gives_its_time_and_budget() -> None:
    page = summary.render(_META, _GATE, [_ROW])
    assert "gate 91 s of it, budget 90 s" in page and "428 passed" in page


def test_incomplete_run_titled_with_counts() -> None:
    page = summary.render(_META, None, [_ROW], complete=False)
    assert page.splitlines()[0].startswith("# GPU run — incomplete: 1 of 3 cells timed")
    assert "incomplete" not in summary.render(_META, None, [_ROW]).splitlines()[0]


def test_rerender_from_record_strips_the_old_suffix(tmp_path) -> None:
    meta = _META | {"title": "GPU run (in progress: 1 of 3 cells; a run that stops here was "
                             "stopped from outside)"}
    record = tmp_path / "run.json"
    record.write_text(json.dumps({"meta": meta, "gate": None, "complete": False,
                                  "cells": [_ROW]}))
    assert summary.main([str(record)]) == 0
    title = (tmp_path / "summary.md").read_text().splitlines()[0]
    assert title.count("1 of 3") == 1 and "in progress" not in title


def test_not_a_record_is_a_clear_error(tmp_path, capsys) -> None:
    bad = tmp_path / "run.json"
    bad.write_text("{}")
    assert summary.main([str(bad)]) == 2
    assert "not a GPU run's record" in capsys.readouterr().err
