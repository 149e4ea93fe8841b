"""The run-wide false-alarm budget (:mod:`kernel_verify.properties.alpha`): a block that borrows
another run's assertion count gives the budget back as it was, so the statistical tests that run
after it in the same process keep their run's α. (tests/test_report.py once reset it to one
assertion, α = 1e-3, for every later test of its worker: 1150 times the run's α; an in-process
``run_report`` left the report's budget behind.) An in-process ``check`` gives it back too."""

from __future__ import annotations

import pytest

from kernel_verify.properties import alpha


def test_a_borrowed_count_gives_the_budget_back():
    ours = alpha.budget()
    with alpha.assertion_count(7) as borrowed:
        assert alpha.budget() is borrowed and borrowed.per_assertion == borrowed.total / 7
    assert alpha.budget() == ours


def test_the_budget_is_given_back_after_an_error_and_when_none_was_set(monkeypatch):
    monkeypatch.setattr(alpha, "_state", {})
    with pytest.raises(RuntimeError), alpha.assertion_count(3):
        raise RuntimeError("inside")
    assert alpha._state == {}  # nothing set before: the single-assertion fallback again
    assert alpha.budget().per_assertion == alpha.budget().total


def test_an_in_process_report_gives_the_budget_back(tmp_path, monkeypatch):
    """``run_report`` sets the report's own budget while it runs (its statistical assertions
    over the maps it verifies), and the caller's after: here a deterministic map, no pages of
    statistics, the budget logic only."""
    from kernel_verify.report import main

    monkeypatch.setenv("KV_CACHE_DIR", str(tmp_path / "cache"))
    seen = []
    real = main._run_report

    def spy(**kwargs):
        result = real(**kwargs)
        seen.append(alpha.budget())
        return result

    monkeypatch.setattr(main, "_run_report", spy)
    with alpha.assertion_count(1149):
        ours = alpha.budget()
        main.run_report(quick=True, out=str(tmp_path / "report"), maps=["elu_plus_one"],
                        no_plots=True)
        assert seen and seen[0] != ours  # the report ran at its own budget
        assert alpha.budget() == ours


def test_an_in_process_check_gives_the_budget_back():
    """``kernel_verify.check`` on objects defined here runs the suite in this process; that run
    counts its own assertions (properties/conftest.py), and the caller's budget comes back."""
    import numpy as np

    from kernel_verify import RandomMatrixTarget, check

    def gaussian(rng: np.random.Generator, m: int, d: int) -> np.ndarray:
        return rng.standard_normal((m, d))

    target = RandomMatrixTarget("alpha_gaussian", gaussian, frozenset({"gaussian_rows"}))
    with alpha.assertion_count(1149):
        ours = alpha.budget()
        result = check(target, profile="ci", keyword="rows_are_standard_gaussian",
                       progress=False)
        assert result.spec == "<targets given in Python>" and result.ok, str(result)
        assert alpha.budget() == ours
