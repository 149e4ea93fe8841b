"""Every registered system (``kernel-verify list``) has a built-in target the shipped suite runs, or
a declared reason it has none (``properties/builtin.py``: ``UNTESTED_SYSTEMS``); no reason is
left behind once a target exists (issue #28: the low-rank systems were listed with no property
covering them, silently)."""

from __future__ import annotations

from kernel_verify.impls.systems import all_systems
from kernel_verify.properties.builtin import UNTESTED_SYSTEMS, builtin_targets


def _covered(system: str) -> bool:
    """A built-in target named for the system: ``<kind>:<system>`` or ``<system>[<variant>]``."""
    return any(t.name.split(":", 1)[-1] == system or t.name.startswith(f"{system}[")
               for t in builtin_targets())


def test_every_system_has_a_target_or_a_reason():
    missing = [s.name for s in all_systems()
               if not _covered(s.name) and s.name not in UNTESTED_SYSTEMS]
    assert not missing, ("systems with no built-in target and no reason: add a target "
                         "(properties/builtin*.py) or UNTESTED_SYSTEMS[name] = why:\n"
                         + "\n".join(missing))


def test_no_stale_reason():
    names = {s.name for s in all_systems()}
    stale = [n for n in UNTESTED_SYSTEMS if n not in names or _covered(n)]
    assert not stale, f"UNTESTED_SYSTEMS entries that are not systems or now have a target: {stale}"
    assert all(len(why) > 40 for why in UNTESTED_SYSTEMS.values())
