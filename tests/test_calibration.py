"""``kernel-verify calibrate`` covers every statistical property, with >= 20 fresh seeds."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import pytest

from kernel_verify.cli import build_parser
from kernel_verify.verify import calibration

PROPERTIES = Path(calibration.__file__).resolve().parents[1] / "properties"


def _statistical_properties() -> set[str]:
    found = set()
    for path in PROPERTIES.glob("test_*.py"):
        text = path.read_text(encoding="utf-8")
        for match in re.finditer(r"@pytest\.mark\.statistical.*?\ndef (test_\w+)", text, re.S):
            found.add(f"{path.name}::{match.group(1)}")
    return found


def test_every_statistical_property_is_calibrated() -> None:
    found = _statistical_properties()
    assert found, "no statistical properties found"
    assert found == set(calibration.CALIBRATED), (
        f"not calibrated: {sorted(found - set(calibration.CALIBRATED))}; stale: "
        f"{sorted(set(calibration.CALIBRATED) - found)}")


def test_default_and_minimum_seeds() -> None:
    args = build_parser().parse_args(["calibrate"])
    assert args.seeds >= calibration.MIN_SEEDS == 20
    with pytest.raises(ValueError, match=">= 20"):
        calibration.run_calibration(argparse.Namespace(seeds=5, alpha=0.05))


def test_small_calibration_run_covers_every_check(tmp_path, monkeypatch, capsys) -> None:
    """A run at the minimum seed count: every calibrated check family appears, each row over
    >= 20 fresh seeds (trials), and the report is written."""
    monkeypatch.setenv("KV_REPORTS", str(tmp_path))
    code = calibration.run_calibration(argparse.Namespace(seeds=20, alpha=0.05))
    text = (tmp_path / "calibration.md").read_text(encoding="utf-8")
    for prefix in set(calibration.CALIBRATED.values()):
        assert f"| {prefix}" in text, prefix
    rows = [line.split(" | ") for line in text.splitlines() if line.startswith("| ")][2:]
    assert all(int(r[2]) >= 20 for r in rows), [r[:3] for r in rows if int(r[2]) < 20]
    assert code in (0, 1)
    capsys.readouterr()


def test_statistical_checks_in_properties_carry_their_seed() -> None:
    """Every statistical check the properties call is given the seed, which its failure message
    prints next to the reproduction line (verify.stats.StatResult.explain)."""
    import ast

    calls = []
    for path in PROPERTIES.glob("test_*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and getattr(node.func, "id", "") in (
                    "mean_test", "variance_test", "row_law_checks"):
                calls.append((path.name, node.lineno, {k.arg for k in node.keywords}))
    assert calls
    missing = [(f, line) for f, line, kws in calls if "seed" not in kws]
    assert not missing, f"statistical checks without seed=: {missing}"


def test_a_failing_statistical_check_prints_its_seed() -> None:
    import numpy as np

    from kernel_verify.verify.stats import mean_test

    samples = np.random.default_rng(5).uniform(0, 1, 400)
    result = mean_test(samples, 0.9, alpha=1e-3, bounds=(0.0, 1.0), seed=424242,
                       repro="pytest -k example")
    assert not result.ok
    with pytest.raises(AssertionError, match="seed: 424242"):
        result.check()
