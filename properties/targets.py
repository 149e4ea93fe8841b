"""Which targets the property suite runs against.

By default: everything built in (registry feature maps, attention with registry maps and exact
softmax attention, every random-matrix construction, Nyström). With ``KV_TARGET=module:attr`` (or
``pytest --kv-target module:attr``, or ``kernel-verify check module:attr``): only the targets of
that adapter; property kinds it does not provide are skipped with that reason.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from contextlib import contextmanager
from functools import cache

import pytest

from kernel_verify.properties.builtin import builtin_targets
from kernel_verify.properties.loader import load_targets
from kernel_verify.properties.protocol import (
    AttentionTarget,
    FeatureMapTarget,
    KernelApproxTarget,
    ModelTarget,
    RandomMatrixTarget,
    Target,
)

ENV = "KV_TARGET"

#: Targets given as objects in this process (``kernel_verify.check(targets)`` with targets that
#: no importable module holds, e.g. defined in a notebook): label and targets.
_IN_PROCESS: tuple[str, tuple[Target, ...]] | None = None


def target_spec() -> str | None:
    if _IN_PROCESS is not None:
        return _IN_PROCESS[0]
    return os.environ.get(ENV) or None


@contextmanager
def use_targets(targets: Iterable[Target], label: str = "<targets given in Python>"):
    """Run the suite (in this process) against ``targets`` instead of ``KV_TARGET``/built-ins."""
    global _IN_PROCESS
    previous = _IN_PROCESS
    _IN_PROCESS = (label, tuple(targets))
    active_targets.cache_clear()
    try:
        yield
    finally:
        _IN_PROCESS = previous
        active_targets.cache_clear()


@cache
def active_targets() -> tuple[Target, ...]:
    if _IN_PROCESS is not None:
        return _IN_PROCESS[1]
    spec = target_spec()
    return tuple(load_targets(spec)) if spec else builtin_targets()


def of_kind(kind: str, builtin: Callable[[], list]) -> list:
    """The targets under test whose class is named ``kind`` (a kind with its own protocol
    module: ``GatedAttentionTarget``, ``HybridAttentionTarget``): the adapter's (``KV_TARGET``),
    else ``builtin()``, called only then."""
    found = [t for t in active_targets() if type(t).__name__ == kind]
    if found or target_spec() is not None:
        return found
    return builtin()


def _select(kind: type, claims: Iterable[str], predicate=None) -> list[Target]:
    wanted = set(claims)
    return [
        t for t in active_targets()
        if isinstance(t, kind) and wanted <= set(t.claims) and (predicate is None or predicate(t))
    ]


def provides_none(what: str) -> str:
    """The skip reason of a property when the targets in use have no ``what``: which targets
    (the ``KV_TARGET`` spec, else the built-in registry) and what they lack."""
    return f"{target_spec() or 'the built-in registry'} provides no {what}"


def none_param(reason: str, values: int = 1) -> list:
    """The one skipped case (id ``none``, ``values`` Nones) of a parametrisation with no target
    to run on, ``reason`` saying why."""
    return [pytest.param(*(None,) * values, marks=pytest.mark.skip(reason=reason), id="none")]


def _params(targets: list[Target], what: str, none_reason: str | None = None) -> list:
    if targets:
        return [pytest.param(t, id=t.name) for t in targets]
    return none_param(none_reason or provides_none(what))


def feature_maps(*claims: str, white_box: bool = False, predicate=None,
                 none_reason: str | None = None) -> list:
    """pytest params of feature-map targets having every claim in ``claims`` (and
    ``predicate``); ``none_reason``: the skip reason when there are none (default: which
    claims were asked for)."""
    def pred(t: FeatureMapTarget) -> bool:
        return (not white_box or t.white_box) and (predicate is None or predicate(t))

    what = f"feature map with claims {sorted(claims)}" + (" (white-box)" if white_box else "")
    if predicate is not None:
        what += " that meets the property's further conditions (its docstring)"
    return _params(_select(FeatureMapTarget, claims, pred), what, none_reason)


def attentions(*claims: str) -> list:
    return _params(_select(AttentionTarget, claims), f"attention with claims {sorted(claims)}")


def matrices(*claims: str) -> list:
    return _params(_select(RandomMatrixTarget, claims),
                   f"random-matrix construction with claims {sorted(claims)}")


def approximations(*claims: str) -> list:
    return _params(_select(KernelApproxTarget, claims),
                   f"kernel approximation with claims {sorted(claims)}")


def models(*claims: str) -> list[ModelTarget]:
    """Model targets having every claim in ``claims`` (the model properties pair each with its
    dtype paths and skip with their own reasons: :mod:`kernel_verify.properties.model_checks`)."""
    return _select(ModelTarget, claims)  # type: ignore[return-value]


def missing_form_param(t, need: tuple[str, ...], any_of: tuple[str, ...], kind: str,
                       protocol: str, offers) -> object | None:
    """The skipped ``pytest.param(t, None)`` of a sequence target lacking a form in ``need`` (or
    every form of ``any_of``, as judged by ``offers(t, form)``), its reason naming the protocol
    fields (``kind.field``) that would add the property; None when ``t`` has them."""
    missing = [f"{kind}.{f}" for f in need if getattr(t, f) is None]
    if any_of and not any(offers(t, f) for f in any_of):
        missing.append(" or ".join(f"{kind}.{f}" for f in any_of))
    if not missing:
        return None
    return pytest.param(t, None, id=f"{t.name}-no-form", marks=pytest.mark.skip(
        reason=f"{t.name} does not offer what this property needs: "
               f"{'; '.join(missing)} ({protocol})"))


def attentions_with(claims: Iterable[str]) -> tuple[list[AttentionTarget], str | None]:
    """Attention targets having every claim in ``claims``, and a skip reason when there are
    none (for parametrisations that pair each target with its backends)."""
    targets = _select(AttentionTarget, claims)
    if targets:
        return targets, None
    return [], provides_none(f"attention with claims {sorted(claims)}")
