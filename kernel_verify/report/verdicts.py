"""Property verdicts on a page: the property suite's own deterministic-seed tests, called as they
are (no second implementation), and the map's overall verdict.

The deterministic-seed properties (no Hypothesis search) of ``properties/test_feature_unbiased.py``
are run on the target through the functions those tests call
(:mod:`kernel_verify.properties.unbiased_checks`): ``test_unbiased_on_grid`` (claim ``unbiased``)
and ``test_bias_is_visible_where_theory_says_it_is_large`` (claim ``biased`` with a declared mean
kernel). Their outcome is ``pass``, ``FAIL`` (first line of the evidence) or ``not tested`` (the
skip reason), each with the pytest command that reproduces it. The Hypothesis properties are listed
with their command; the report does not re-run their search.

Overall verdict (index and page): ``FAIL`` if any test failed or accuracy exceeds its budget;
``not tested`` if a claim got no statistical test (why is on the page); ``flagged`` if every test
passed but a theory point lies outside its measured band; ``pass`` only when every claim was
tested and held and nothing is flagged.
"""

from __future__ import annotations

import shlex
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

import kernel_verify.properties as _properties
from kernel_verify.properties.protocol import FeatureMapTarget
from kernel_verify.properties.unbiased_checks import Degenerate, bias_is_visible, unbiased_on_grid

FILE = "test_feature_unbiased.py"
#: Where the property files are: the installed package's ``kernel_verify/properties`` (in a
#: checkout, its ``properties/`` folder), so a reproduce line runs from a wheel as well.
PROPERTIES = Path(_properties.__file__).resolve().parent


def pytest_line(file: str, test: str, name: str) -> str:
    """The shell command that re-runs ``test`` of property file ``file`` on target ``name``
    with the Python that made the report."""
    node = f"{PROPERTIES / file}::{test}[{name}]"
    return (f"{shlex.quote(sys.executable)} -m pytest -p no:cacheprovider -p no:xdist "
            f"{shlex.quote(node)}")


@dataclass
class PropertyVerdict:
    test: str
    outcome: str
    detail: str
    command: str


def _command(test: str, name: str) -> str:
    return pytest_line(FILE, test, name)


def _run(fn, target: FeatureMapTarget, test: str) -> PropertyVerdict:
    try:
        fn(target)
    except pytest.skip.Exception as exc:
        return PropertyVerdict(test, "not tested", str(exc.msg), _command(test, target.name))
    except (AssertionError, Degenerate) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        return PropertyVerdict(test, "FAIL", first, _command(test, target.name))
    return PropertyVerdict(test, "pass", "", _command(test, target.name))


def property_verdicts(target: FeatureMapTarget) -> list[PropertyVerdict]:
    """Run the deterministic-seed unbiasedness properties that apply to ``target``."""
    out = []
    if target.has("unbiased"):
        out.append(_run(unbiased_on_grid, target, "test_unbiased_on_grid"))
    if target.has("biased") and target.mean_kernel:
        out.append(_run(bias_is_visible,
                        target, "test_bias_is_visible_where_theory_says_it_is_large"))
    return out


def hypothesis_properties(target: FeatureMapTarget) -> list[tuple[str, str]]:
    """(test, command) of the Hypothesis-searched properties that apply (not re-run here)."""
    tests = []
    if target.has("unbiased"):
        tests.append((FILE, "test_unbiased_on_random_points"))
    if target.has("biased") and target.mean_kernel:
        tests.append((FILE, "test_biased_mean_is_mean_kernel"))
    if target.has("unbiased") and target.has("bounded"):
        tests.append(("test_feature_variance.py",
                      "test_sample_variance_matches_exact_variance"))
    return [(t, pytest_line(f, t, target.name)) for f, t in tests]


def overall(accuracy_ok: bool | None, props: list[PropertyVerdict], mean_tests: list[bool | None],
            flags: list[str], random: bool) -> tuple[str, list[str]]:
    """(verdict, reasons) — see the module docstring."""
    reasons = []
    if accuracy_ok is False:
        reasons.append("accuracy against mpmath exceeds the derived budget")
    reasons += [f"{p.test}: {p.detail}" for p in props if p.outcome == "FAIL"]
    if any(t is False for t in mean_tests):
        reasons.append("the mean test rejected at the default pair")
    if reasons:
        return "FAIL", reasons
    why = []
    if accuracy_ok is None:
        why.append("no accuracy check (no registry entry)")
    if random:
        if not mean_tests or any(t is None for t in mean_tests):
            why.append("no mean test at some m (see the bias section)")
        why += [f"{p.test}: {p.detail}" for p in props if p.outcome == "not tested"]
        if not props:
            why.append("no deterministic-seed property applies")
    if why:
        return "not tested", why
    if flags:
        return "flagged", flags
    return "pass", []
