"""Loader of the black-box mutants and controls: a white-box target seen only through ``sample_fn``.

``kernel-verify mutants --blackbox`` runs every feature-map mutant of the catalogue a second time
through :func:`~kernel_verify.mutants.wrap.as_black_box` (the parameters are drawn inside
``sample_fn`` from ``default_rng(seed)`` and never shown), and the registry's correct maps
wrapped the same way as *controls* (:data:`~kernel_verify.mutants.wrap.CONTROLS`; a control must
never fail). The wrapping lives in :mod:`kernel_verify.mutants.wrap`, below the catalogue (the
catalogue's black-box mutants are built with it); this module loads the wrapped targets by name
(:func:`__getattr__`).
"""

from __future__ import annotations

from kernel_verify.impls.names import from_identifier
from kernel_verify.mutants.wrap import (  # noqa: F401  (re-exported: the former home)
    CONTROLS,
    as_black_box,
    control_targets,
    sampler,
    wrap_targets,
)
from kernel_verify.properties.protocol import Target


def __getattr__(attr: str) -> list[Target]:
    """Loader specs (``kernel_verify.mutants.blackbox:<attr>``):
    ``mutant_<name>`` / ``mutant_nofamily_<name>``: a catalogue feature-map mutant wrapped
    black-box with / without its declared family; ``control_<key>`` /
    ``control_nofamily_<key>``: a correct registry map likewise (key: the map's registry name
    in its identifier form, :func:`kernel_verify.impls.names.identifier`)."""
    from kernel_verify.mutants.catalogue import get_mutant

    for prefix, family in (("mutant_nofamily_", False), ("mutant_", True)):
        if attr.startswith(prefix):
            return wrap_targets(get_mutant(attr.removeprefix(prefix)).targets, family=family)
    for prefix, family in (("control_nofamily_", False), ("control_", True)):
        if attr.startswith(prefix) and from_identifier(attr.removeprefix(prefix)) in CONTROLS:
            return control_targets(from_identifier(attr.removeprefix(prefix)), family=family)
    raise AttributeError(f"module {__name__!r} has no attribute {attr!r}")
