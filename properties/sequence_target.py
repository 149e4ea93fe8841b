"""What the suite's targets over sequences share: the claim, accepts, forms and layout queries of
:class:`~kernel_verify.properties.protocol.AttentionTarget` and
:class:`~kernel_verify.properties.gated_protocol.GatedAttentionTarget` (their fields' checks are
shared in :mod:`kernel_verify.impls.validation`)."""

from __future__ import annotations

from typing import Any, ClassVar

__all__ = ["SequenceTarget"]


class SequenceTarget:
    """Mixin of a frozen target dataclass with fields ``claims``, ``backends``, ``dtypes``,
    ``layout`` and one optional callable field per form of :attr:`FORMS`."""

    #: The forms the target kind may offer (each an optional callable field).
    FORMS: ClassVar[tuple[str, ...]] = ()
    claims: frozenset[str]
    backends: tuple[str, ...]
    dtypes: tuple[str, ...]
    layout: str

    def has(self, claim: str) -> bool:
        return claim in self.claims

    def accepts(self, library: str, dtype: str) -> bool:
        """Whether the target takes arrays of ``library`` (numpy, torch) in ``dtype``."""
        return library in self.backends and dtype in self.dtypes

    def offers(self, form: str) -> bool:
        """Whether the target offers ``form`` (one of :attr:`FORMS`)."""
        if form not in self.FORMS:
            raise ValueError(f"form must be one of {', '.join(self.FORMS)}, got {form!r}")
        return getattr(self, form) is not None

    def to_layout(self, x: Any) -> Any:
        """A ``(B, H, T, …)`` array (or ``(B, H, T)`` gates) in the target's layout, and back:
        the swap of axes 1 and 2 is its own inverse."""
        return x if self.layout == "BHTD" else x.swapaxes(1, 2)
