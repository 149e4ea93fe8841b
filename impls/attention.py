"""Attention with any registered feature map, on either backend (chosen by the input type).

``feature_map_attention(entry, params, q, k, v)``: applies the entry's input scaling
(``q·d^(-1/4)``, ``k·d^(-1/4)`` for the softmax family, so that ``SM(x, y) = exp(qᵀk/√d)``), then
either the stable log-space path (maps claiming ``log_features``) or the plain feature path.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kernel_verify.impls.attention_checks import (
    ZERO_DENOMINATOR_POLICIES,
    DenominatorError,
    check_qkv_shapes,
)
from kernel_verify.impls.registry import FeatureMap, get
from kernel_verify.impls.validation import (
    check_array,
    check_bool,
    check_config,
    check_one_backend,
    check_same_dtype,
    is_torch,
)


def _backend(q: Any) -> tuple[Any, Any]:
    if is_torch(q):
        from kernel_verify.impls.torch import attention as att

        return att, "torch"
    from kernel_verify.impls.numpy import attention as att

    return att, "numpy"


def resolve_entry(entry: FeatureMap | str) -> FeatureMap:
    """A registry entry, or its name (looked up in the registry; unknown names list the known)."""
    if isinstance(entry, FeatureMap):
        return entry
    if isinstance(entry, str):
        try:
            return get(entry)
        except KeyError as err:
            raise ValueError(f"entry: {err.args[0]}") from None
    raise TypeError(f"entry must be a registry FeatureMap or a map name, got "
                    f"{type(entry).__name__}")


def _check_inputs(entry: FeatureMap, params: Any, config: Any, arrays: dict[str, Any]) -> Any:
    """Validate everything :func:`map_features`/:func:`feature_map_attention` are given, each
    array under its own name, before any feature is computed; returns the config to use."""
    if not isinstance(params, Mapping):
        raise TypeError(f"params must be a mapping of parameter arrays (entry.draw(...)), got "
                        f"{type(params).__name__}")
    backend = "torch" if is_torch(next(iter(arrays.values()))) else "numpy"
    check_one_backend(tuple(arrays), *arrays.values())
    for name, x in arrays.items():
        check_array(name, x, min_ndim=2, backend=backend)
    check_same_dtype(tuple(arrays), *arrays.values())
    first = next(iter(arrays))
    if arrays[first].shape[-1] < 1:
        raise ValueError(f"{first} must have a last dimension d >= 1, got shape "
                         f"{tuple(arrays[first].shape)}")
    if {"q", "k", "v"} <= set(arrays):
        check_qkv_shapes(arrays["q"], arrays["k"], arrays["v"], ("q", "k", "v"))
    return check_config(f"feature map {entry.name!r}", config, entry.config)
def _fresh(t: Any, *others: Any) -> bool:
    """Whether the tensor ``t`` is not a view and shares no storage with any of ``others`` (so a
    function that made it may overwrite it)."""
    if t._base is not None:
        return False
    ptr = t.untyped_storage().data_ptr()
    return all(
        not is_torch(o) or o.untyped_storage().data_ptr() != ptr for o in others
    )


def map_features(
    entry: FeatureMap,
    x: Any,
    params: Mapping[str, Any],
    *,
    config: Mapping[str, Any] | None = None,
    positions: Any = None,
    log: bool = False,
) -> Any:
    """``φ(x)`` (or ``log φ(x)``) of ``entry`` (a registry entry or its name) on the backend
    of ``x``; ``config`` (None: the entry's) must have exactly the entry's config keys."""
    entry = resolve_entry(entry)
    check_bool("log", log)
    cfg = _check_inputs(entry, params, config, {"x": x})
    return _features(entry, x, params, cfg, positions=positions, log=log)


def _features(entry: FeatureMap, x: Any, params: Mapping[str, Any], cfg: Mapping[str, Any], *,
              positions: Any, log: bool) -> Any:
    torch_input = is_torch(x)
    if log:
        if not entry.has("log_features"):
            raise ValueError(f"feature map {entry.name!r} has no log-features")
        fn = entry.log_torch_fn if torch_input else entry.log_numpy_fn
    else:
        fn = entry.torch_fn if torch_input else entry.numpy_fn
    if entry.has("positional"):
        if positions is None:
            raise ValueError(f"feature map {entry.name!r} needs positions=(n,) token positions")
        return fn(x, params, cfg, positions=positions)
    return fn(x, params, cfg)


def feature_map_attention(
    entry: FeatureMap,
    params: Mapping[str, Any],
    q: Any,
    k: Any,
    v: Any,
    *,
    causal: bool = False,
    config: Mapping[str, Any] | None = None,
    positions: Any = None,
    chunk_size: int = 64,
    zero_denominator: str | None = None,
    use_log: bool | None = None,
) -> Any:
    """Linear attention ``D̂⁻¹ φ(Q)(φ(K)ᵀV)`` (or causal) with the map ``entry`` (docs/math.md §9).

    ``entry`` is a registry entry or its name. Every argument is validated first, each under its
    own name (NaN/Inf, dtype, backend, device, shapes, config keys). ``use_log`` defaults to the
    map's ``log_features`` claim. ``zero_denominator`` defaults to
    ``"zero"`` for nonnegative maps (rows with no positive weight give 0) and ``"raise"``
    otherwise. ``positions`` (token positions, for positional maps) apply to queries and keys
    alike.
    """
    entry = resolve_entry(entry)
    cfg = _check_inputs(entry, params, config, {"q": q, "k": k, "v": v})
    check_bool("causal", causal)
    if use_log is not None:
        check_bool("use_log", use_log)
    if zero_denominator is not None and zero_denominator not in ZERO_DENOMINATOR_POLICIES:
        raise ValueError(f"zero_denominator must be one of {ZERO_DENOMINATOR_POLICIES} or None, "
                         f"got {zero_denominator!r}")
    att, _ = _backend(q)
    if is_torch(q) and str(q.dtype) in ("torch.float16", "torch.bfloat16"):
        # half inputs are computed in float32 throughout and the output is rounded once (the
        # half_in_float32 claim of the built-in targets): the pre-scale and the map's features
        # are not rounded to the half type on the way (issue #29)
        out = feature_map_attention(entry, params, q.float(), k.float(), v.float(),
                                    causal=causal, config=config, positions=positions,
                                    chunk_size=chunk_size, zero_denominator=zero_denominator,
                                    use_log=use_log)
        return out.to(v.dtype)
    if entry.attention_prescale:
        scale = float(q.shape[-1]) ** -0.25
        q, k = q * scale, k * scale
    if use_log is None:
        use_log = entry.has("log_features")
    kwargs = {"positions": positions}
    if use_log:
        lq = _features(entry, q, params, cfg, log=True, **kwargs)
        lk = _features(entry, k, params, cfg, log=True, **kwargs)
        torch_v = is_torch(v)
        v_work = v.to(lq.dtype) if torch_v else v.astype(lq.dtype, copy=False)
        if torch_v and _fresh(lq, q, k, v, *params.values()) and _fresh(lk, q, k, v, lq):
            # lq, lk are this call's own tensors: their exponentials may be taken in place
            att.check_attention_inputs(lq, lk, v_work, causal=causal,
                                       names=("log_phi_q", "log_phi_k", "v"), backend="torch")
            out = att._log_linear(lq, lk, v_work, causal=causal,
                                  chunk_size=att.check_positive_int("chunk_size", chunk_size),
                                  overwrite=True)
        else:
            out = att.log_linear_attention(lq, lk, v_work, causal=causal, chunk_size=chunk_size)
        return out.to(v.dtype) if torch_v else out.astype(v.dtype, copy=False)
    if zero_denominator is None:
        zero_denominator = "zero" if entry.has("nonnegative") else "raise"
    fq = _features(entry, q, params, cfg, log=False, **kwargs)
    fk = _features(entry, k, params, cfg, log=False, **kwargs)
    try:
        return att.linear_attention(fq, fk, v, causal=causal, chunk_size=chunk_size,
                                    zero_denominator=zero_denominator)
    except DenominatorError as err:
        if entry.has("positive") and err.finite and err.n_negative == 0 and err.n_zero:
            hint = ("use_log=True (the log-space path, exact at any norm)"
                    if entry.has("log_features") else "smaller inputs")
            raise ValueError(
                f"attention denominator underflowed to 0 in {err.n_zero} rows: the features of "
                f"{entry.name!r} are positive, but exp(log φ) underflows at these input norms "
                f"(max ‖q‖ = {_max_norm(q):.3g}, max ‖k‖ = {_max_norm(k):.3g} after scaling); "
                f"use {hint}. zero_denominator='zero' would silently return 0"
            ) from None
        raise


def _max_norm(x: Any) -> float:
    if is_torch(x):
        return float(x.double().norm(dim=-1).max()) if x.numel() else 0.0
    import numpy as np

    return float(np.max(np.linalg.norm(x.astype(np.float64), axis=-1))) if x.size else 0.0


__all__ = ["feature_map_attention", "map_features", "resolve_entry"]
