"""The Hypothesis profiles and the suite's phase rules (properties/profiles.py, conftest.py)."""

from __future__ import annotations

import pytest
from hypothesis import Phase, given, settings
from hypothesis import strategies as st
from hypothesis.internal.conjecture import engine

from kernel_verify.properties import profiles
from kernel_verify.properties.conftest import STATISTICAL_PHASES, _without_shrinking


def test_ci_profile_has_no_explain_phase_and_keeps_shrinking():
    profiles.load()
    ci = settings.get_profile("ci")
    assert Phase.explain not in ci.phases
    assert Phase.shrink in ci.phases and Phase.generate in ci.phases


def test_statistical_items_lose_only_the_shrink_phase():
    @settings(phases=list(Phase))
    @given(st.integers())
    def prop(n):
        pass

    class Item:
        def __init__(self, fn):
            self.obj = fn

    _without_shrinking(Item(prop))
    phases = set(prop._hypothesis_internal_use_settings.phases)
    assert Phase.shrink not in phases and Phase.explain not in phases
    assert phases == set(STATISTICAL_PHASES)


def test_shrink_seconds_from_the_environment(monkeypatch):
    old = engine.MAX_SHRINKING_SECONDS
    try:
        monkeypatch.setenv("KV_SHRINK_SECONDS", "7")
        profiles.limit_shrinking()
        assert engine.MAX_SHRINKING_SECONDS == 7
        for bad in ("soon", "-1"):
            monkeypatch.setenv("KV_SHRINK_SECONDS", bad)
            with pytest.raises(ValueError, match="KV_SHRINK_SECONDS"):
                profiles.limit_shrinking()
    finally:
        engine.MAX_SHRINKING_SECONDS = old
