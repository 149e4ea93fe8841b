"""Shipped adapters for widely used third-party implementations (issue 12).

One module per library, each exposing ``targets`` (a list of protocol targets,
:mod:`kernel_verify.properties.protocol`) and ``LIBRARY``, its record
(:class:`kernel_verify.adapters.library.Library`: import name, distribution, pip extra, page
notes, findings, known failures, independent confirmations). Each module imports its library
lazily: building the list never imports the library, and a target whose library is missing skips
every property with the reason and the install command
(:func:`kernel_verify.adapters._lazy.need`). ``kernel_verify.adapters.library.records()`` lists
them; the README's table gives each module's extra.

Run one: ``kernel-verify check kernel_verify.adapters.sklearn:targets``; all, with a report page
per library under ``reports/conformance/``: ``kernel-verify conformance``.
"""

from kernel_verify.adapters._lazy import missing_reason
from kernel_verify.adapters.library import Library, record, records

__all__ = ["LIBRARIES", "Library", "missing_reason", "record", "records"]


def __getattr__(name: str):
    """``LIBRARIES``: the records by key (kept for callers of the old table; read from the
    adapter modules, :func:`kernel_verify.adapters.library.records`)."""
    if name == "LIBRARIES":
        return records()
    raise AttributeError(f"module 'kernel_verify.adapters' has no attribute {name!r}")
