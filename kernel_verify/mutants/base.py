"""The :class:`Mutant` record shared by the catalogue and the runner."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from kernel_verify.properties.protocol import Target

#: Mutant families (the kind of implementation broken).
FAMILIES = ("random_matrix", "attention", "feature_map", "nystrom", "model")

_T = TypeVar("_T")


def named(build: Callable[..., _T], *args: Any, **kwargs: Any) -> Callable[[str], _T]:
    """The ``make`` of a catalogue row: ``make(name) = build(name, *args, **kwargs)``. The row
    states only its own arguments; the catalogue passes the mutant's name, typed once (the row's
    key)."""
    return lambda name: build(name, *args, **kwargs)


@dataclass(frozen=True)
class Mutant:
    """One deliberate defect.

    ``make`` builds the targets lazily (importing torch or building registry entries only when
    the mutant runs). ``expected_killers`` names the property families (file stems of
    ``properties/test_<family>.py``) or single properties (``stem::test_name``) written to catch
    it; a kill counts as intended only when one of them fails with a property assertion (not a
    crash, a NaN or an input check: :mod:`kernel_verify.mutants.kills`). When the defect is
    invisible to the suite by design, ``expected_survivor_reason`` says why. ``loader``: the spec
    prefix that, followed by the name, loads the targets (controls:
    :mod:`kernel_verify.mutants.controls`)."""

    name: str
    family: str
    description: str
    make: Callable[[], list[Target]]
    expected_killers: tuple[str, ...] = ()
    expected_survivor_reason: str | None = None
    loader: str = "kernel_verify.mutants.catalogue:target_"

    def __post_init__(self) -> None:
        if self.family not in FAMILIES:
            raise ValueError(f"mutant {self.name!r}: family must be one of {FAMILIES}")
        if not self.name.isidentifier():
            raise ValueError(f"mutant name must be an identifier, got {self.name!r}")

    @property
    def targets(self) -> list[Target]:
        return self.make()

    @property
    def spec(self) -> str:
        """The ``KV_TARGET`` spec that loads this mutant's targets."""
        return f"{self.loader}{self.name}"
