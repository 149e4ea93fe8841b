"""The per-token inputs of a recurrence besides q, k, v — the log-gates and the transition's own
inputs (β, p, a, b) — as one value the recurrent forms properties draw, slice, pack, pad and
pass (docs/math.md §16, §23).

A :class:`TokenInputs` holds float64 arrays in ``BHTD`` (time on axis 2), as the target sees
them (rounded to its dtype): ``g`` (``(H,)`` one decay per head when ``fixed``, ``(B, H, T)``
or ``(B, H, T, d)``, or None for a transition without a gate) and ``extra`` (``beta (B, H, T)``;
``p``, ``a``, ``b (B, H, T, d)``; with ``beta="sigmoid"`` the stored β is the logit the target
is given) and ``params``, the per-head parameters of a gate parametrisation (``A_log``,
``dt_bias``: the ``g`` slot then holds the raw gate input ``a``), which no slice changes. Every
time slice, batch selection and concatenation applies to all of them at once, so a property
written for gates covers every transition.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

__all__ = ["TokenInputs"]


@dataclass(frozen=True)
class TokenInputs:
    """Log-gates and the transition's inputs of a sequence (module docstring)."""

    g: np.ndarray | None
    fixed: bool = False
    extra: Mapping[str, np.ndarray] = field(default_factory=dict)
    params: Mapping[str, np.ndarray] = field(default_factory=dict)
    #: ``g`` holds the raw input of a gate parametrisation, not log-gates
    raw: bool = False

    # ------------------------------------------------------------------ structure
    def map(self, fn: Callable[[np.ndarray], np.ndarray], *,
            fixed_too: bool = False) -> TokenInputs:
        """Every time-indexed array through ``fn`` (a fixed per-head ``g`` and the per-head
        ``params`` only with ``fixed_too``)."""
        g = self.g
        if g is not None and (not self.fixed or fixed_too):
            g = fn(g)
        params = {n: fn(a) for n, a in self.params.items()} if fixed_too else self.params
        return TokenInputs(g, self.fixed, {n: fn(a) for n, a in self.extra.items()}, params,
                           self.raw)

    def rows(self, a: int, b: int) -> TokenInputs:
        """Tokens ``[a, b)``."""
        return self.map(lambda x: x[:, :, a:b])

    def at(self, i: int) -> TokenInputs:
        """Token ``i`` (the time axis dropped)."""
        return self.map(lambda x: x[:, :, i])

    def batch(self, a: int, b: int) -> TokenInputs:
        """Batch rows ``[a, b)``."""
        return self.map(lambda x: x[a:b])

    def select(self, row: int, idx: np.ndarray) -> TokenInputs:
        """Batch row ``row`` (kept as a batch of one) at the time positions ``idx``."""
        return self.map(lambda x: x[row:row + 1][:, :, idx])

    @staticmethod
    def join(*parts: TokenInputs) -> TokenInputs:
        """Concatenation along time (a fixed per-head ``g`` and the ``params`` are shared: the
        first's)."""
        first = parts[0]
        g = first.g
        if g is not None and not first.fixed:
            g = np.concatenate([p.g for p in parts], axis=2)
        extra = {n: np.concatenate([p.extra[n] for p in parts], axis=2) for n in first.extra}
        return TokenInputs(g, first.fixed, extra, first.params, first.raw)

    def where(self, keep: np.ndarray, junk: TokenInputs) -> TokenInputs:
        """``self`` at the positions ``keep (B, T)`` holds, ``junk`` elsewhere."""
        def pick(a: np.ndarray, j: np.ndarray) -> np.ndarray:
            k = keep[:, None, :] if a.ndim == 3 else keep[:, None, :, None]
            return np.where(k, a, j)

        g = self.g
        if g is not None and not self.fixed:
            g = pick(g, junk.g)
        return TokenInputs(g, self.fixed, {n: pick(a, junk.extra[n])
                                          for n, a in self.extra.items()}, self.params,
                           self.raw)

    # ------------------------------------------------------------------ the truth's view
    def per_token_gates(self, b: int, t: int) -> np.ndarray | None:
        """Gates as the references take them: ``(B, H, T)`` or ``(B, H, T, d)`` (a fixed
        per-head decay repeated), None without a gate."""
        if self.g is None:
            return None
        if self.fixed:
            return np.broadcast_to(self.g[None, :, None], (b, self.g.shape[0], t)).copy()
        return self.g

    def beta_values(self, sigmoid: bool, top: float = 1.0) -> np.ndarray | None:
        """β in float64 (with ``sigmoid``: ``top·σ`` of the stored logit, ``top`` = 2 for a
        target claiming ``negative_eigenvalues``), None without β."""
        if "beta" not in self.extra:
            return None
        x = self.extra["beta"]
        if not sigmoid:
            return x
        return top * np.where(x >= 0, 1.0 / (1.0 + np.exp(-np.abs(x))),
                              np.exp(-np.abs(x)) / (1.0 + np.exp(-np.abs(x))))

    # ------------------------------------------------------------------ calling a target
    def arguments(self, target: Any, from_numpy: Callable[[np.ndarray], Any], *,
                  step: bool = False) -> tuple[Any, dict[str, Any]]:
        """``(g, keywords)`` for a form of ``target``: arrays converted by ``from_numpy`` into
        the target's layout (a fixed per-head ``g`` as it is; one token's arrays, ``step``,
        have no time axis to move)."""
        def conv(a: np.ndarray) -> Any:
            x = from_numpy(np.ascontiguousarray(a))
            return x if step else target.to_layout(x)

        g = None
        if self.g is not None:
            g = from_numpy(np.ascontiguousarray(self.g)) if self.fixed else conv(self.g)
        params = {n: from_numpy(np.ascontiguousarray(a)) for n, a in self.params.items()}
        return g, {**{n: conv(a) for n, a in self.extra.items()}, **params}
