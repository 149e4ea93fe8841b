"""Known defects as data: a target's ``known_failures`` applied at collection.

A target lists the properties it is known to fail (``known_failures = {"test_…": "reason,
link"}``, :mod:`kernel_verify.properties` protocol). Each collected case of such a property,
for that target, gets a *strict* ``xfail`` marker carrying the reason:

* the property still fails → pytest reports ``xfailed``; ``kernel-verify check`` reports the
  verdict **known** (never pass);
* the property passes → strict xfail turns it into a failure ``[XPASS(strict)] …``;
  ``kernel-verify check`` reports the verdict **stale**: the declaration should be removed.

This follows array-api-tests' expected-failures file, with the data on the target instead of in a
file, so that a library's adapter carries its own list.
"""

from __future__ import annotations

from collections.abc import Mapping

import pytest

#: Prefix of the xfail reason, so that results can tell a declared known failure from any other
#: xfail.
KNOWN_PREFIX = "known defect: "
#: What pytest puts in front of a strict xfail that passed.
XPASS_STRICT = "[XPASS(strict)]"


def target_of(item) -> object | None:
    """The target a collected case is parametrised with, or None."""
    callspec = getattr(item, "callspec", None)
    if callspec is None:
        return None
    for value in callspec.params.values():
        if type(value).__name__.endswith("Target") and hasattr(value, "known_failures"):
            return value
    return None


def known_reason(item) -> str | None:
    """The declared reason when ``item`` is a case of a property its target is known to fail."""
    target = target_of(item)
    if target is None:
        return None
    known: Mapping[str, str] = target.known_failures
    prop = getattr(item, "originalname", None) or item.name.split("[", 1)[0]
    return known.get(prop)


def apply_known_failures(items) -> int:
    """Mark every case of a declared known failure ``xfail(strict=True)``; returns how many."""
    count = 0
    for item in items:
        reason = known_reason(item)
        if reason is not None:
            item.add_marker(pytest.mark.xfail(reason=KNOWN_PREFIX + reason, strict=True))
            count += 1
    return count
