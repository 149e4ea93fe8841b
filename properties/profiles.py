"""Hypothesis profiles of the suite (``HYPOTHESIS_PROFILE`` selects one; under ``CI=true`` the
default is ``ci``):

* ``dev``: quick local runs (few examples).
* ``ci``: derandomized (the same examples on every run), no deadline, a fixed example budget.
* ``nightly``: fresh random seeds and many more examples.
* ``mutants``: ``ci`` without shrinking (``kernel-verify mutants`` only needs to know *whether*
  a property fails, and shrinking a failure re-runs the property many times).

**Slow targets in ``ci``** (issue #20: a library's check within 60 s on a 2-core machine). A target
may declare ``call_seconds``, the wall time of one call at the suite's sizes (an
:class:`~kernel_verify.properties.protocol.AttentionTarget` field). In the ``ci`` family of
profiles (``ci``, ``mutants``) every Hypothesis property case of such a target runs at most
:func:`examples_for_cost` examples: ``max(MIN_EXAMPLES, ⌊CI_CASE_SECONDS / call_seconds⌋)``,
never more than the property's own count. Every property still runs on every such target; the
search is smaller, each verdict says so (``reduced``: ``n of N examples`` and the declared cost),
and the α budget counts the examples actually run, so statistical levels are unchanged. In every
profile, a target's declared known failure is not shrunk (:data:`KNOWN_PHASES`): the verdict
*known* needs only that it still fails; shrinking one re-ran a slow library's call for up to
``KV_SHRINK_SECONDS`` per case and changed nothing but the example shown.

:func:`load` registers them and loads the selected one; the property suite's and the unit
tests' ``conftest.py`` both call it.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, Phase, settings

PROFILES = ("dev", "ci", "nightly", "mutants")
#: ``ci`` phases: no ``explain`` (it re-runs a failing example with every part varied, seconds
#: per failure on a real library's attention, to print which parts did not matter).
CI_PHASES = (Phase.explicit, Phase.reuse, Phase.generate, Phase.target, Phase.shrink)
#: Phases of a case of a declared known failure (any profile): no shrinking.
KNOWN_PHASES = (Phase.explicit, Phase.reuse, Phase.generate, Phase.target)
#: Profiles that honour a target's ``call_seconds``.
COST_PROFILES = ("ci", "mutants")
#: ``ci``: the seconds of calls a Hypothesis example of a target declaring ``call_seconds`` is
#: worth: such a target's property case runs ⌊CI_CASE_SECONDS / call_seconds⌋ examples (at least
#: :data:`MIN_EXAMPLES`). Chosen for issue #20 (a library's check within 60 s on 2 cores).
CI_CASE_SECONDS = 0.5
#: Never fewer examples per property case: Hypothesis runs the simplest input first (all zeros,
#: the smallest shape), so 3 examples are that one and two drawn at random.
MIN_EXAMPLES = 3


def selected() -> str:
    """The profile named by ``HYPOTHESIS_PROFILE``, else ``ci`` under ``CI=true``, else ``dev``."""
    default = "ci" if os.environ.get("CI", "").lower() in ("1", "true", "yes") else "dev"
    name = os.environ.get("HYPOTHESIS_PROFILE", default)
    if name not in PROFILES:
        raise ValueError(f"HYPOTHESIS_PROFILE={name!r} is not a kernel-verify profile; "
                         f"choose one of {', '.join(PROFILES)}")
    return name


def limit_shrinking() -> None:
    """``KV_SHRINK_SECONDS=N`` (set by ``kernel-verify check``, default 10): shrinking one failure
    stops after N seconds (Hypothesis' own limit is 300 s, minutes per failure on a slow real
    library). Hypothesis has no public setting for it; its engine's module constant is set, and
    if a Hypothesis version lacks it the limit is simply not applied."""
    seconds = _env_int("KV_SHRINK_SECONDS", 0)
    if seconds is None:
        return
    from hypothesis.internal.conjecture import engine

    if hasattr(engine, "MAX_SHRINKING_SECONDS"):
        engine.MAX_SHRINKING_SECONDS = seconds


def load() -> str:
    """Register every profile and load the selected one; returns its name."""
    settings.register_profile(
        "dev", max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow]
    )
    settings.register_profile(
        "ci",
        max_examples=25,
        derandomize=True,
        deadline=None,
        database=None,
        print_blob=True,
        suppress_health_check=[HealthCheck.too_slow],
        phases=CI_PHASES,
    )
    settings.register_profile(
        "mutants",
        parent=settings.get_profile("ci"),
        phases=[Phase.explicit, Phase.reuse, Phase.generate],
    )
    settings.register_profile(
        "nightly",
        max_examples=300,
        deadline=None,
        print_blob=True,
        suppress_health_check=[HealthCheck.too_slow],
    )
    name = selected()
    settings.load_profile(name)
    cap = max_examples_cap()
    if cap is not None and cap < settings.default.max_examples:
        settings.register_profile(f"{name}-capped", parent=settings.get_profile(name),
                                  max_examples=cap)
        settings.load_profile(f"{name}-capped")
    limit_shrinking()
    return name


def examples_for_cost(call_seconds: float | None, examples: int,
                      profile: str | None = None) -> int:
    """How many Hypothesis examples a property case with ``examples`` of its own runs for a
    target declaring ``call_seconds`` in ``profile`` (default: the selected one): unchanged
    outside :data:`COST_PROFILES` or without a declaration, else
    ``min(examples, max(MIN_EXAMPLES, ⌊CI_CASE_SECONDS / call_seconds⌋))``."""
    if call_seconds is None or (profile or selected()) not in COST_PROFILES:
        return examples
    return min(examples, max(MIN_EXAMPLES, int(CI_CASE_SECONDS / call_seconds)))


def reduction_note(call_seconds: float, ran: int, own: int) -> str:
    """The verdict's ``reduced`` text for a case cut from ``own`` to ``ran`` examples."""
    return f"{ran} of {own} examples (call_seconds={call_seconds:g})"


def max_examples_cap() -> int | None:
    """``KV_MAX_EXAMPLES=N`` (``kernel-verify check --max-examples N``): at most N examples per
    property that takes the profile's count, for every target of the run (``kernel-verify
    check`` prints the cap; a target's own cost is declared with ``call_seconds`` instead, see
    the module docstring). The α budget counts the examples actually run, so statistical levels
    are unchanged; the search is smaller."""
    return _env_int("KV_MAX_EXAMPLES", 1)


def _env_int(name: str, minimum: int) -> int | None:
    """The whole number in the environment variable ``name`` (None when unset); a value that is
    not a whole number ≥ ``minimum`` is a ValueError naming the variable."""
    raw = os.environ.get(name)
    if raw is None:
        return None
    try:
        value = int(raw)
    except ValueError:
        raise ValueError(f"{name}={raw!r} is not a whole number") from None
    if value < minimum:
        raise ValueError(f"{name}={raw!r} must be ≥ {minimum}")
    return value
