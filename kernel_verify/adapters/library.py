"""One record per adapted library, kept in its adapter module (issue #28).

Each adapter module ``kernel_verify/adapters/<key>.py`` holds ``LIBRARY = Library(...)``: what
is known about the library — import name, distribution, pip extra, the distributions its
conformance page records, what it does right, its confirmed findings (the known failures its
targets declare derive from them), the failing properties explained without a defect, minor
observations, how its code was run here (:class:`Scope`), and the independent measurements that
confirm each finding. Every consumer reads the records: the lazy import and its skip reason
(:mod:`kernel_verify.adapters._lazy`), the conformance pages
(:mod:`kernel_verify.adapters.conformance`), the confirmations
(:mod:`kernel_verify.adapters.confirm`) and the CLI. Adding a library is its adapter module plus
its extra in ``pyproject.toml``; ``tests/test_library_records.py`` says which field is missing.
The record's text is not part of a conformance run's code fingerprint (its declared known
failures are): after editing it, ``kernel-verify conformance --reuse`` rewrites the page.

:func:`records` finds them by scanning the package: every public module of
``kernel_verify.adapters`` that defines ``LIBRARY``.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Mapping
from dataclasses import dataclass, field

#: Properties that check the suite's own input contract (ValueError on NaN/Inf or on mismatched
#: shapes): a failure there means "the library does not validate", never a numerical defect.
CONTRACT_PROPERTIES = ("test_non_finite_input_is_rejected", "test_mismatched_shapes_are_rejected")

@dataclass(frozen=True)
class Finding:
    """A confirmed defect of a library: its mechanism, the measurement that confirms it (a name
    in the record's ``confirmations``) and the fix."""

    title: str
    confirm: str  # name of the independent measurement (Library.confirmations)
    what: str  # the mechanism, in the library's terms
    fix: str  # what a maintainer can do
    properties: tuple[str, ...] = ()  # failing properties it explains (test function names)
    targets: tuple[str, ...] = ()  # the targets it explains them on (empty: every target)

    def explains(self, prop: str, target: str) -> bool:
        """Whether this finding explains ``prop`` failing on ``target``."""
        return prop in self.properties and (not self.targets or target in self.targets)


@dataclass(frozen=True)
class Scope:
    """How a library's targets were run when not on the hardware their code is written for:
    ``prefixes`` of the target names concerned, the ``tag`` put beside each of their verdicts,
    and the page's section (``text`` and the ``workarounds`` applied)."""

    prefixes: tuple[str, ...]
    tag: str
    text: str
    workarounds: tuple[str, ...] = ()

    def covers(self, target: str | None) -> bool:
        return bool(target) and target.startswith(self.prefixes)


@dataclass(frozen=True)
class Library:
    """Everything the project knows about one adapted library.

    ``key`` is the adapter module's name (``kernel_verify.adapters.<key>:targets``). The
    measurements of ``confirmations`` are functions ``name(quick: bool) -> str`` of
    ``confirm_module`` (default: the adapter module itself), run in this process, or, with
    ``confirm_in_subprocess``, the command ``python -m <confirm_module> NAME [--quick]`` in a
    fresh one (a library whose import must come first, such as Triton's interpreter switch).
    """

    key: str  # adapter module name under kernel_verify.adapters
    title: str  # the page's title
    module: str  # import name
    dist: str  # distribution name on PyPI
    extra: str  # pyproject [project.optional-dependencies] key
    dependencies: tuple[str, ...] = ()  # distributions whose versions each page records
    in_adapters_extra: bool = True  # part of `pip install 'kernel-verify[adapters]'`
    right: str = ""  # "What it does right" (empty: "(see the verdicts)")
    minor: str | None = None  # observations that are not defects at realistic settings
    findings: tuple[Finding, ...] = ()
    #: Failing properties explained without a defect: test function -> explanation.
    explained: Mapping[str, str] = field(default_factory=dict)
    #: Measurements that are not findings but show what the library does right.
    measured: tuple[str, ...] = ()
    scope: Scope | None = None
    #: Every independent measurement of this library (findings' and ``measured``).
    confirmations: tuple[str, ...] = ()
    confirm_module: str = ""  # default: kernel_verify.adapters.<key>
    confirm_in_subprocess: bool = False

    @property
    def install_hint(self) -> str:
        return f"pip install 'kernel-verify[{self.extra}]'"

    @property
    def measurements(self) -> str:
        """The module that computes :attr:`confirmations`."""
        return self.confirm_module or f"kernel_verify.adapters.{self.key}"

    @property
    def spec(self) -> str:
        return f"kernel_verify.adapters.{self.key}:targets"

    def known_failures(self, properties: tuple[str, ...] | None = None) -> dict[str, str]:
        """The ``known_failures`` an adapter declares, derived from :attr:`findings`.

        Every failing property a confirmed finding explains becomes ``{"test_…": "<title>
        (reports/conformance/<key>.md, finding '<confirm>')"}``: the reason is the finding's
        title, the link the conformance page that gives its mechanism, fix and measurement.
        ``properties``, when given, keeps only those test names (a finding about one target of a
        library is declared on that target only). Contract properties
        (:data:`CONTRACT_PROPERTIES`, the suite's own input policy) are never declared here: a
        library that does not validate its input has no numerical defect.
        """
        out: dict[str, str] = {}
        for finding in self.findings:
            for prop in finding.properties:
                if prop in CONTRACT_PROPERTIES or (properties is not None
                                                   and prop not in properties):
                    continue
                out[prop] = (f"{finding.title} (reports/conformance/{self.key}.md, "
                             f"finding '{finding.confirm}')")
        return out

    def explain(self, prop: str, target: str) -> str | None:
        """What explains ``prop`` failing on ``target`` (a finding or an explanation), if
        anything the record knows."""
        for f in self.findings:
            if f.explains(prop, target):
                return f"explained by the finding “{f.title}”"
        return self.explained.get(prop)


def record(key: str) -> Library:
    """The record of adapter ``key``: ``kernel_verify.adapters.<key>.LIBRARY``. KeyError for a
    module that is not a library adapter."""
    try:
        mod = importlib.import_module(f"kernel_verify.adapters.{key}")
    except ModuleNotFoundError as err:
        raise KeyError(f"no library adapter {key!r}: {err}") from None
    lib = getattr(mod, "LIBRARY", None)
    if not isinstance(lib, Library):
        raise KeyError(f"kernel_verify.adapters.{key} defines no LIBRARY record")
    return lib


def adapter_modules() -> tuple[str, ...]:
    """Names of the public modules of ``kernel_verify.adapters`` (sorted)."""
    from kernel_verify import adapters

    return tuple(sorted(m.name for m in pkgutil.iter_modules(adapters.__path__)
                        if not m.name.startswith("_")))


def records() -> dict[str, Library]:
    """Every library record, by key, in module-name order: the public modules of
    ``kernel_verify.adapters`` that define ``LIBRARY`` (importing an adapter never imports its
    library)."""
    out: dict[str, Library] = {}
    for name in adapter_modules():
        lib = getattr(importlib.import_module(f"kernel_verify.adapters.{name}"), "LIBRARY", None)
        if isinstance(lib, Library):
            out[lib.key] = lib
    return out


def confirmation_owner(name: str) -> Library:
    """The record whose ``confirmations`` include ``name``; KeyError if none does."""
    for lib in records().values():
        if name in lib.confirmations:
            return lib
    raise KeyError(f"no library record lists the confirmation {name!r}")
