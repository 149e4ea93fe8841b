"""Attention with any registered feature map, on either backend (chosen by the input type).

``feature_map_attention(entry, params, q, k, v)``: applies the entry's input scaling
(``q·d^(-1/4)``, ``k·d^(-1/4)`` for the softmax family, so that ``SM(x, y) = exp(qᵀk/√d)``), then
either the stable log-space path (maps claiming ``log_features``) or the plain feature path.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kernel_verify.impls.registry import FeatureMap
from kernel_verify.impls.validation import _is_torch, check_array


def _backend(q: Any) -> tuple[Any, Any]:
    if _is_torch(q):
        from kernel_verify.impls.torch import attention as att

        return att, "torch"
    from kernel_verify.impls.numpy import attention as att

    return att, "numpy"


def _fresh(t: Any, *others: Any) -> bool:
    """Whether the tensor ``t`` is not a view and shares no storage with any of ``others`` (so a
    function that made it may overwrite it)."""
    if t._base is not None:
        return False
    ptr = t.untyped_storage().data_ptr()
    return all(
        not _is_torch(o) or o.untyped_storage().data_ptr() != ptr for o in others
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
    """``φ(x)`` (or ``log φ(x)``) of ``entry`` on the backend of ``x``."""
    cfg = entry.config if config is None else config
    torch_input = _is_torch(x)
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

    ``use_log`` defaults to the map's ``log_features`` claim. ``zero_denominator`` defaults to
    ``"zero"`` for nonnegative maps (rows with no positive weight give 0) and ``"raise"``
    otherwise. ``positions`` (token positions, for positional maps) apply to queries and keys
    alike.
    """
    att, _ = _backend(q)
    check_array("q", q, min_ndim=2)
    if entry.attention_prescale:
        scale = float(q.shape[-1]) ** -0.25
        q, k = q * scale, k * scale
    if use_log is None:
        use_log = entry.has("log_features")
    kwargs = {"config": config, "positions": positions}
    if use_log:
        lq = map_features(entry, q, params, log=True, **kwargs)
        lk = map_features(entry, k, params, log=True, **kwargs)
        torch_v = _is_torch(v)
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
    fq = map_features(entry, q, params, **kwargs)
    fk = map_features(entry, k, params, **kwargs)
    return att.linear_attention(fq, fk, v, causal=causal, chunk_size=chunk_size,
                                zero_denominator=zero_denominator)


__all__ = ["feature_map_attention", "map_features"]
