"""Loading targets from ``module:attribute`` (the ``kernel-verify check`` argument, the
``--kv-target`` pytest option and the ``KV_TARGET`` environment variable)."""

from __future__ import annotations

import dataclasses
import difflib
import importlib
import re

from kernel_verify.properties import protocol
from kernel_verify.properties.protocol import Target

_TARGET_TYPES = ("FeatureMapTarget", "AttentionTarget", "RandomMatrixTarget", "KernelApproxTarget",
                 "ModelTarget", "GatedAttentionTarget", "HybridAttentionTarget")


_UNEXPECTED = re.compile(r"(\w+)\.__init__\(\) got an unexpected keyword argument '(\w+)'")


def _keyword_hint(err: BaseException) -> str:
    """For a target kind constructed with a keyword it does not have (``FeatureMapTarget(…,
    dtypes=…)``): the closest field names, or the list of its fields; else ''."""
    found = _UNEXPECTED.search(str(err)) if isinstance(err, TypeError) else None
    if found is None or found.group(1) not in _TARGET_TYPES:
        return ""
    kind = getattr(protocol, found.group(1), None)
    if kind is None:  # the kinds defined beside the protocol module
        from kernel_verify.properties import gated_protocol, hybrid_protocol

        kind = (getattr(gated_protocol, found.group(1), None)
                or getattr(hybrid_protocol, found.group(1), None))
    if kind is None or not dataclasses.is_dataclass(kind):
        return ""
    fields = [f.name for f in dataclasses.fields(kind) if f.init]
    close = difflib.get_close_matches(found.group(2), fields, n=3, cutoff=0.5)
    if close:
        return f" ({found.group(1)} has no field {found.group(2)!r}; did you mean " \
               f"{' or '.join(map(repr, close))}?)"
    return f" ({found.group(1)} has no field {found.group(2)!r}; its fields: {', '.join(fields)})"


def _as_target(obj: object, where: str) -> Target:
    if type(obj).__name__ in _TARGET_TYPES:
        return obj  # type: ignore[return-value]
    raise TypeError(
        f"{where} is a {type(obj).__name__}; expected one of {', '.join(_TARGET_TYPES)} (a "
        "registry FeatureMap is a FeatureMapTarget), or a list of them"
    )


def _call_factory(obj: object, spec: str) -> object:
    """``obj()`` for a factory of targets (a callable taking no arguments); a clear error for a
    class (a target kind itself, or the user's own class), for a function that needs arguments
    (a feature map or attention function named in place of its target) and for a factory that
    raises."""
    import inspect

    if isinstance(obj, type):
        if obj.__name__ in _TARGET_TYPES:
            raise TypeError(f"target {spec!r} is the class {obj.__name__} itself; name an "
                            f"instance (t = {obj.__name__}(...)) or a list of them")
        raise TypeError(f"target {spec!r} is the class {obj.__name__}; expected a target "
                        f"({', '.join(_TARGET_TYPES)}), a list of them, or a function taking no "
                        "arguments that returns them")
    try:
        required = [p.name for p in inspect.signature(obj).parameters.values()
                    if p.default is p.empty
                    and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
    except (TypeError, ValueError):  # no signature to read (a builtin): call it
        required = []
    if required:
        raise TypeError(f"target {spec!r} is a function that takes arguments "
                        f"({', '.join(required)}): name the target that wraps it (e.g. "
                        "FeatureMapTarget(..., features=...)), a list of targets, or a factory "
                        "taking no arguments")
    try:
        return obj()
    except Exception as err:  # the factory's own code failed
        raise ValueError(f"target {spec!r}: calling the factory raised "
                         f"{type(err).__name__}: {err}{_keyword_hint(err)}") from err


def load_targets(spec: str) -> list[Target]:
    """The targets named by ``"module:attribute"`` (a target, a list of targets, or a callable
    returning either). Errors say what was wrong with the spec."""
    if ":" not in spec:
        raise ValueError(f"target must look like 'module:attribute', got {spec!r}")
    module_name, _, attr_path = spec.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as err:
        raise ValueError(f"cannot import target module {module_name!r}: {err}") from err
    except Exception as err:  # the adapter's own code failed (SyntaxError, NameError, …)
        where = f" (line {err.lineno})" if isinstance(err, SyntaxError) else ""
        raise ValueError(f"target module {module_name!r} failed to import{where}: "
                         f"{type(err).__name__}: {err}{_keyword_hint(err)}") from err
    obj: object = module
    for part in attr_path.split("."):
        if not hasattr(obj, part):
            raise ValueError(f"target {spec!r}: module {module_name!r} has no attribute "
                             f"{attr_path!r}")
        obj = getattr(obj, part)
    if callable(obj) and type(obj).__name__ not in _TARGET_TYPES:
        obj = _call_factory(obj, spec)
    if isinstance(obj, list | tuple):
        targets = [_as_target(o, f"{spec}[{i}]") for i, o in enumerate(obj)]
    else:
        targets = [_as_target(obj, spec)]
    if not targets:
        raise ValueError(f"{spec} names no targets")
    names = [t.name for t in targets]
    if len(set(names)) != len(names):
        raise ValueError(f"{spec}: target names must be unique, got {names}")
    return targets
