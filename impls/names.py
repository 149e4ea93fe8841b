"""The one spelling of a registered map's name, and its identifier-safe form.

A map is named by its registry name everywhere a user sees it (``softmax_positive[iid]``: the
formula and, in brackets, the frequency matrix). Where Python needs an identifier (a module
attribute a loader spec ``module:attr`` can name) or a file needs a plain stem, the one derived
form is :func:`identifier` (``softmax_positive__iid``), and :func:`from_identifier` reads it back.
The mapping is a bijection on registry names: they use ``[`` … ``]`` once at the end and never
two underscores in a row (``tests/test_names.py`` checks every registered name).
"""

from __future__ import annotations

__all__ = ["from_identifier", "identifier", "split_name"]

_SEP = "__"


def split_name(name: str) -> tuple[str, str | None]:
    """``softmax_positive[iid]`` → ``("softmax_positive", "iid")``; ``taylor2`` →
    ``("taylor2", None)``: the formula family and the bracketed variant (frequency matrix)."""
    base, bracket, rest = name.partition("[")
    return (base, rest.removesuffix("]")) if bracket else (base, None)


def identifier(name: str) -> str:
    """``softmax_positive[iid]`` → ``softmax_positive__iid``; a name without brackets is its own
    identifier. Raises ``ValueError`` for a name the inverse could not read back."""
    base, bracket, rest = name.partition("[")
    if _SEP in base or (bracket and not rest.endswith("]")) or "]" in base:
        raise ValueError(f"{name!r} is not a registry-style name (base[variant])")
    out = f"{base}{_SEP}{rest[:-1]}" if bracket else base
    if not out.isidentifier():
        raise ValueError(f"{name!r} has no identifier form ({out!r} is not an identifier)")
    return out


def from_identifier(ident: str) -> str:
    """The registry name of :func:`identifier`'s output: ``softmax_positive__iid`` →
    ``softmax_positive[iid]``."""
    base, sep, variant = ident.partition(_SEP)
    return f"{base}[{variant}]" if sep else base
