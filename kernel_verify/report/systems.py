"""The report's systems page: every system that is not a feature map (``kernel-verify list``),
each claim with the properties that test it or why none does.

One row per claim of each descriptor (:mod:`kernel_verify.impls.systems`), read from
:func:`kernel_verify.properties.claim_tests.claim_evidence`, the same accounting that
``tests/test_system_coverage.py`` holds complete: a claim is never listed as held without the
properties that test it. The gated, hybrid and model systems also get a page of their own
(:mod:`kernel_verify.report.system_pages`: verdicts per backend × dtype, error against the
derived bound, a figure); this page links it with its verdict when the report computed it.
"""

from __future__ import annotations

from kernel_verify.impls.names import identifier
from kernel_verify.impls.systems import KINDS, SYSTEM_CLAIMS, all_systems
from kernel_verify.properties.builtin import UNTESTED_SYSTEMS
from kernel_verify.properties.claim_tests import claim_evidence, targets_of
from kernel_verify.report.pages import Page

__all__ = ["systems_page"]


def _evidence_cell(evidence: tuple[str, ...] | str | None) -> str:
    if evidence is None:
        return "NOT ACCOUNTED FOR (properties/claim_tests.py)"
    if isinstance(evidence, str):
        return f"not tested: {evidence}"
    return ", ".join(f"`{p}`" for p in evidence)


def systems_page(computed: dict[str, dict] | None = None) -> Page:
    """The page (no measurement: it reads the descriptors and the suite's claim accounting);
    ``computed``: system name -> the data of its own page (``system_pages.compute_system``),
    linked with its verdict."""
    computed = computed or {}
    page = Page("Systems other than feature maps: their claims and what tests them")
    page.p("Every attention function, gated attention, kernel approximation and random-matrix "
           "construction of the project, described once in impls/systems.py. A claim is "
           "tested by the named properties of the shipped suite (on the built-in targets made "
           "from the descriptor, or on the project's own function), or the row says why it is "
           "not.")
    for kind in KINDS:
        systems = all_systems(kind=kind) if kind != "feature_map" else []
        for system in systems:
            targets = [t.name for t in targets_of(system.name)]
            page.h(f"{system.name} ({kind}, {system.section})")
            if system.name in computed:
                d = computed[system.name]
                verdict = d["verdict"] if d["verdict"] == "pass" else f"**{d['verdict']}**"
                page.p(f"[Its page: verdicts per backend × dtype, error against the derived "
                       f"bound, figure](systems/{identifier(system.name)}.md) · verdict "
                       f"{verdict}")
            page.p(f"{system.description}. Source: {system.source}. Built-in targets: "
                   + (", ".join(f"`{t}`" for t in targets) if targets else
                      f"none ({UNTESTED_SYSTEMS.get(system.name, 'no reason given')})") + ".")
            page.table(["claim", "meaning", "tested by"],
                       [[c, SYSTEM_CLAIMS[c], _evidence_cell(e)]
                        for c, e in claim_evidence(system).items()])
    return page

