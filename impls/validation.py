"""Input checks shared by the NumPy and torch implementations.

Every public entry point validates its arguments with these helpers so that bad input gets a
``ValueError``/``TypeError`` naming the argument and the problem, never a silent NaN.
The helpers accept NumPy arrays and torch tensors alike (duck-typed on ``dtype``/``shape``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

_TORCH_FLOATS = ("float64", "float32", "float16", "bfloat16")

Config = Mapping[str, Any]
"""A feature map's configuration: option name -> value (read with :func:`config_value`)."""
Params = Mapping[str, Any]
"""A feature map's drawn parameters: name -> array or tensor (see :func:`check_params`)."""
NumpyParams = Mapping[str, np.ndarray]
"""The drawn parameters of a NumPy feature map: name -> ``numpy.ndarray``."""


def is_torch(x: Any) -> bool:
    """Whether ``x`` is a torch object (tested by module name: torch is not imported here)."""
    return type(x).__module__.startswith("torch")


def dtype_name(x: Any) -> str:
    """'float64', 'float32', … for a NumPy array or a torch tensor."""
    if is_torch(x):
        return str(x.dtype).removeprefix("torch.")
    return np.asarray(x).dtype.name


def check_array(name: str, x: Any, *, min_ndim: int = 1, backend: str | None = None) -> None:
    """``x`` is a floating array/tensor of at least ``min_ndim`` dims with only finite values."""
    torch_in = is_torch(x)
    if backend == "numpy" and (torch_in or not isinstance(x, np.ndarray)):
        raise TypeError(f"{name} must be a numpy.ndarray, got {type(x).__name__} (the NumPy "
                        "code takes NumPy arrays only: pass every array from one backend)")
    if backend == "torch" and not torch_in:
        raise TypeError(f"{name} must be a torch.Tensor, got {type(x).__name__} (the torch "
                        "code takes tensors only: pass every array from one backend)")
    if not hasattr(x, "dtype") or not hasattr(x, "shape"):
        raise TypeError(f"{name} must be an array or tensor, got {type(x).__name__}")
    if torch_in and getattr(x.device, "type", None) == "meta":
        raise ValueError(f"{name} is a tensor on the 'meta' device (a shape without data): "
                         "pass a tensor on a real device (cpu, cuda)")
    kind = dtype_name(x)
    floating = kind in _TORCH_FLOATS if torch_in else np.issubdtype(x.dtype, np.floating)
    if not floating:
        raise TypeError(f"{name} must have a floating dtype, got {kind}")
    if x.ndim < min_ndim:
        raise ValueError(
            f"{name} must have at least {min_ndim} dimensions, got shape {tuple(x.shape)}"
        )
    if torch_in:
        finite = all_finite_torch(x)
    else:
        finite = bool(np.isfinite(x).all()) if x.size else True
    if not finite:
        raise ValueError(f"{name} contains NaN or Inf")


def check_numpy_input(x: Any) -> None:
    """``x`` is a NumPy feature map's input: a finite floating ``numpy.ndarray`` of shape
    ``(..., n, d)`` (the NumPy counterpart of the torch maps' ``checked_input``)."""
    check_array("x", x, min_ndim=2, backend="numpy")


def all_finite_torch(x: Any) -> bool:
    """Whether every entry of the tensor ``x`` is finite, exactly, in one pass when it is.

    A sum is NaN/±Inf whenever a term is, so a finite sum proves every term finite; only a sum
    that overflowed (or a real non-finite entry) pays for the elementwise check. On CPU the
    elementwise ``isfinite(x).all()`` costs ~15 exponentials' worth of time per element (it is
    ``x == x`` and ``|x| != inf`` plus a reduction), the sum ~1.
    """
    import torch

    if x.numel() == 0:
        return True
    if bool(torch.isfinite(x.sum())):
        return True
    return bool(torch.isfinite(x).all())


def check_last_dim(name: str, x: Any, d: int) -> None:
    """``x.shape[-1] == d``."""
    if x.shape[-1] != d:
        raise ValueError(f"{name} must have last dimension {d}, got shape {tuple(x.shape)}")


def check_drawn_for(name: str, d: int, drawn_d: int) -> None:
    """The input ``name`` (last dimension ``d``) matches the dimension the parameters were drawn
    for: the error names the input, since the parameters are usually the fixed side."""
    if d != drawn_d:
        raise ValueError(f"{name} must have last dimension {drawn_d} (the parameters were drawn "
                         f"for d = {drawn_d}), got {d}")


def check_same_leading(names: tuple[str, str], a: Any, b: Any, *, skip_last: int = 2) -> None:
    """``a`` and ``b`` agree on every dimension but the last ``skip_last``."""
    sa, sb = tuple(a.shape[:-skip_last]), tuple(b.shape[:-skip_last])
    if sa != sb:
        raise ValueError(
            f"{names[0]} and {names[1]} must have the same leading (batch) shape, got "
            f"{tuple(a.shape)} and {tuple(b.shape)}"
        )


def check_same_dtype(names: tuple[str, ...], *xs: Any) -> None:
    """Every array has the same dtype (no silent promotion or truncation between arguments)."""
    kinds = [dtype_name(x) for x in xs]
    if len(set(kinds)) > 1:
        pairs = ", ".join(f"{n}={k}" for n, k in zip(names, kinds, strict=True))
        raise TypeError(f"dtypes must match: {pairs}")


def check_positive_int(name: str, value: Any, *, minimum: int = 1) -> int:
    """An integer (not a bool) ``>= minimum``, returned as ``int``."""
    if isinstance(value, bool) or not isinstance(value, int | np.integer):
        raise TypeError(f"{name} must be an integer, got {type(value).__name__} {value!r}")
    if value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value}")
    return int(value)


def check_scalar(
    name: str,
    value: Any,
    *,
    positive: bool = False,
    nonnegative: bool = False,
    below: float | None = None,
) -> float:
    """A finite real scalar, optionally > 0, >= 0 or < ``below``."""
    if isinstance(value, bool) or not isinstance(value, int | float | np.integer | np.floating):
        raise TypeError(f"{name} must be a real number, got {type(value).__name__} {value!r}")
    v = float(value)
    if not math.isfinite(v):
        raise ValueError(f"{name} must be finite, got {v}")
    if positive and v <= 0:
        raise ValueError(f"{name} must be > 0, got {v}")
    if nonnegative and v < 0:
        raise ValueError(f"{name} must be >= 0, got {v}")
    if below is not None and v >= below:
        raise ValueError(f"{name} must be < {below}, got {v}")
    return v


def check_params(
    name: str,
    params: Any,
    required: dict[str, tuple[int | None, ...]],
    *,
    backend: str | None = None,
) -> None:
    """``params`` is a mapping holding every key of ``required`` with the given shape (None = any
    size); with ``backend="numpy"`` the values must be NumPy arrays (torch code accepts both)."""
    if not isinstance(params, Mapping):
        raise TypeError(f"{name} must be a mapping of parameter arrays, got "
                        f"{type(params).__name__}")
    for key, shape in required.items():
        if key not in params:
            raise ValueError(f"{name} is missing parameter {key!r}; has {sorted(params)}")
        value = params[key]
        if not hasattr(value, "shape") or not hasattr(value, "dtype"):
            raise TypeError(f"{name}[{key!r}] must be an array, got {type(value).__name__}")
        if len(value.shape) != len(shape) or any(
            want is not None and got != want for got, want in zip(value.shape, shape, strict=True)
        ):
            raise ValueError(
                f"{name}[{key!r}] must have shape {shape} (None = any), got {tuple(value.shape)}"
            )
        check_array(f"{name}[{key!r}]", value, min_ndim=len(shape),
                    backend="numpy" if backend == "numpy" else None)


def check_landmarks(landmarks: Any, n: int) -> np.ndarray:
    """Nyström ``landmarks``: distinct integer indices in ``[0, n)``, at least one, as a 1-D
    NumPy array (a torch tensor is moved to the CPU by its caller)."""
    idx = np.asarray(landmarks)
    if not np.issubdtype(idx.dtype, np.integer) or idx.ndim != 1 or idx.size == 0:
        raise TypeError(
            f"landmarks must be a non-empty 1-D integer array, got {idx.dtype} {idx.shape}"
        )
    if idx.min() < 0 or idx.max() >= n or len(np.unique(idx)) != idx.size:
        raise ValueError(f"landmarks must be distinct indices in [0, {n}), got {idx.tolist()}")
    return idx


def check_segments(x: Any, n_segments: Any, *, backend: str) -> int:
    """``x (..., n, d)`` cut into ``n_segments`` contiguous row segments: an integer in
    ``[1, n]``, returned."""
    check_array("x", x, min_ndim=2, backend=backend)
    s = check_positive_int("n_segments", n_segments)
    n = x.shape[-2]
    if s > n:
        raise ValueError(f"n_segments (= {s}) must be <= n (= {n})")
    return s


def check_bool(name: str, value: Any) -> bool:
    """A real ``bool`` (not 0/1, not a string)."""
    if not isinstance(value, bool | np.bool_):
        raise TypeError(f"{name} must be a bool, got {type(value).__name__} {value!r}")
    return bool(value)


def check_rng(name: str, rng: Any) -> np.random.Generator:
    """A seeded ``numpy.random.Generator`` (randomness is an input; no global state)."""
    if not isinstance(rng, np.random.Generator):
        raise TypeError(f"{name} must be a numpy.random.Generator (np.random.default_rng(seed)), "
                        f"got {type(rng).__name__}")
    return rng


def check_one_backend(names: tuple[str, ...], *xs: Any) -> str:
    """Every array comes from one backend (all NumPy or all torch) and, for torch, one device.

    Returns ``"torch"`` or ``"numpy"``. Checked before anything else so that mixing backends
    gets this message instead of an ``AttributeError`` from deep inside the computation."""
    kinds = ["torch" if is_torch(x) else "numpy" for x in xs]
    if len(set(kinds)) > 1:
        pairs = ", ".join(f"{n} is {type(x).__module__.split('.')[0]}.{type(x).__name__}"
                          for n, x in zip(names, xs, strict=True))
        raise TypeError(f"arrays must all be NumPy arrays or all torch tensors: {pairs}")
    if kinds and kinds[0] == "torch":
        devices = [str(x.device) for x in xs]
        if len(set(devices)) > 1:
            pairs = ", ".join(f"{n} on {dev}" for n, dev in zip(names, devices, strict=True))
            raise ValueError(f"tensors must be on one device: {pairs}")
    return kinds[0] if kinds else "numpy"


def check_config(where: str, config: Any, defaults: Mapping[str, Any]) -> Mapping[str, Any]:
    """``config`` (None: ``defaults``) is a mapping with exactly the keys of ``defaults``."""
    if config is None:
        return defaults
    if not isinstance(config, Mapping):
        raise TypeError(f"config must be a mapping (or None for the defaults of {where}), got "
                        f"{type(config).__name__}")
    unknown = sorted(set(config) - set(defaults))
    missing = sorted(set(defaults) - set(config))
    if unknown:
        raise ValueError(f"config of {where} has unknown keys {unknown}; known: "
                         f"{sorted(defaults)}")
    if missing:
        raise ValueError(f"config of {where} is missing keys {missing} (defaults: "
                         f"{ {k: defaults[k] for k in missing} }); pass config=None for the "
                         "defaults or the full dict")
    return config


def config_value(config: Any, key: str) -> Any:
    """``config[key]``, with a ValueError naming the key when it is missing."""
    if not isinstance(config, Mapping):
        raise TypeError(f"config must be a mapping, got {type(config).__name__}")
    try:
        return config[key]
    except KeyError:
        raise ValueError(f"config is missing key {key!r}; has {sorted(config)}") from None


def check_finite_result(name: str, out: Any, remedy: str) -> Any:
    """``out`` unchanged if every value is finite; else a ValueError that says the result
    overflowed and what to do about it (``remedy``)."""
    if is_torch(out):
        import torch

        finite = bool(torch.isfinite(out).all()) if out.numel() else True
    else:
        finite = bool(np.isfinite(out).all()) if np.size(out) else True
    if not finite:
        raise ValueError(f"{name} overflowed (non-finite values in the result): {remedy}")
    return out


# --- Fields of a target (issue 13) --------------------------------------------------------------
# Every field of every target is checked at construction: a bad descriptor fails at once with a
# ValueError/TypeError naming the target, the field and the problem (and the valid choices),
# never later inside a property with an unrelated error.


def target_error(kind: type[Exception], name: object, field_name: str, problem: str) -> Exception:
    """``kind("target 'name': field problem")``."""
    return kind(f"target {name!r}: {field_name} {problem}")


def check_form_result(name: object, form: str, result: Any, *, state_optional: bool = False,
                      none_entries: bool = False, state_name: str = "final_state") -> None:
    """What a sequence form returned: a pair ``(out, state)`` (``form == "step"``:
    ``(state, o_t)``), the output an array and the state a tuple of arrays (``none_entries``:
    None entries allowed; ``state_optional``: the state itself may be None, a form without
    final states; ``state_name``: its name in the messages), else a ``TypeError`` naming the
    target and the form, so that a form returning the wrong tuple is named at its own call, not
    met as an unpacking error inside a property about another form."""
    def is_array(x: Any) -> bool:
        return hasattr(x, "shape") and hasattr(x, "dtype")

    want = "(state, o_t)" if form == "step" else f"(out, {state_name})"
    if not isinstance(result, tuple | list) or len(result) != 2:
        got = ("one array" if is_array(result) else
               f"a {type(result).__name__} of length {len(result)}"
               if isinstance(result, tuple | list) else type(result).__name__)
        raise target_error(TypeError, name, form, f"must return a pair {want}, got {got}")
    first, second = result
    if form == "step" and is_array(first) and isinstance(second, tuple | list):
        raise target_error(TypeError, name, "step", "must return (state, o_t), got (array, "
                           "tuple): (o_t, state) swapped?")
    state, out = (first, second) if form == "step" else (second, first)
    if not is_array(out):
        raise target_error(TypeError, name, form, f"must return {want} with "
                           f"{'o_t' if form == 'step' else 'out'} an array, got "
                           f"{type(out).__name__}")
    if state is None and state_optional:
        return
    if not isinstance(state, tuple | list) or not all(
            is_array(s) or (none_entries and s is None) for s in state):
        got = "an array" if is_array(state) else type(state).__name__
        raise target_error(TypeError, name, form, f"must return its state as a tuple of "
                           f"arrays, got {got}"
                           + (" (are (o_t, state) swapped?)" if form == "step" else ""))


def check_target_name(name: object) -> None:
    """A target's name is a non-empty str."""
    if not isinstance(name, str) or not name.strip():
        raise TypeError(f"target name must be a non-empty str, got {name!r}")


def check_claim_set(name: str, claims: object, vocabulary: Mapping[str, str]) -> None:
    """``claims`` is a set of words of ``vocabulary``, never both 'biased' and 'unbiased'."""
    if isinstance(claims, str | bytes) or not isinstance(claims, set | frozenset | list | tuple):
        raise target_error(TypeError, name, "claims", "must be a set of claim names (e.g. "
                           f"frozenset({{'unbiased'}})), got {type(claims).__name__} {claims!r}")
    bad_types = [c for c in claims if not isinstance(c, str)]
    if bad_types:
        raise target_error(TypeError, name, "claims", f"must be strings, got {bad_types!r}")
    unknown = set(claims) - set(vocabulary)
    if unknown:
        raise target_error(ValueError, name, "claims", f"has unknown claims {sorted(unknown)}; "
                           f"known: {sorted(vocabulary)}")
    if "biased" in claims and "unbiased" in claims:
        raise target_error(ValueError, name, "claims", "cannot hold both 'biased' and 'unbiased'")


def check_callable_field(name: str, field_name: str, value: object, *, optional: bool) -> None:
    """``value`` is callable (or None when ``optional``)."""
    if value is None and optional:
        return
    if not callable(value):
        what = "a callable or None" if optional else "a callable"
        raise target_error(TypeError, name, field_name, f"must be {what}, got "
                           f"{type(value).__name__} {value!r}")


def check_choice_field(name: str, field_name: str, value: object, choices: set[str], *,
                       optional: bool) -> None:
    """``value`` is one of ``choices`` (or None when ``optional``)."""
    if value is None and optional:
        return
    if not isinstance(value, str):
        raise target_error(TypeError, name, field_name, f"must be a str, got "
                           f"{type(value).__name__}")
    if value not in choices:
        raise target_error(ValueError, name, field_name, f"{value!r} is unknown; choose one of "
                           f"{', '.join(sorted(choices))}")


def check_count_field(name: str, field_name: str, value: object) -> None:
    """``value`` is an int >= 1."""
    if isinstance(value, bool) or not isinstance(value, int | np.integer):
        raise target_error(TypeError, name, field_name, f"must be an int, got "
                           f"{type(value).__name__}")
    if value < 1:
        raise target_error(ValueError, name, field_name, f"must be >= 1, got {value}")


#: The array libraries and dtypes a sequence target (attention, gated attention) may accept.
TARGET_BACKENDS = ("numpy", "torch")
TARGET_DTYPES = ("float64", "float32", "float16", "bfloat16")


def check_backends_and_dtypes(name: str, backends: object, dtypes: object) -> None:
    """``backends`` and ``dtypes`` are non-empty tuples of :data:`TARGET_BACKENDS` and
    :data:`TARGET_DTYPES` names (a TypeError for another type, a ValueError for a bad name)."""
    for field_name, value, allowed in (("backends", backends, TARGET_BACKENDS),
                                       ("dtypes", dtypes, TARGET_DTYPES)):
        if isinstance(value, str) or not isinstance(value, tuple | list | frozenset | set):
            raise target_error(TypeError, name, field_name, "must be a tuple of names among "
                               f"{', '.join(allowed)}, got {value!r}")
        if not value or any(v not in allowed for v in value):
            raise target_error(ValueError, name, field_name, "must be a non-empty tuple of "
                               f"names among {', '.join(allowed)}; got {tuple(value)}")


def check_chunk_sizes(name: str, chunk_sizes: object) -> None:
    """``chunk_sizes`` is None (any size) or a non-empty tuple of ints >= 1."""
    if chunk_sizes is None:
        return
    if isinstance(chunk_sizes, str) or not isinstance(chunk_sizes, tuple | list):
        raise target_error(TypeError, name, "chunk_sizes", "must be a tuple of chunk sizes or "
                           f"None (any size), got {chunk_sizes!r}")
    if not chunk_sizes:
        raise target_error(ValueError, name, "chunk_sizes", "must not be empty (None: any size)")
    for c in chunk_sizes:
        check_count_field(name, "chunk_sizes", c)


def check_call_seconds(name: str, call_seconds: object) -> None:
    """``call_seconds`` is None (calls are fast) or a positive finite number of seconds: a
    TypeError for another type, a ValueError for a number out of range."""
    if call_seconds is None:
        return
    if isinstance(call_seconds, bool) or not isinstance(call_seconds, int | float | np.number):
        raise target_error(TypeError, name, "call_seconds", "must be a positive number of "
                           f"seconds or None, got {type(call_seconds).__name__} "
                           f"{call_seconds!r}")
    if not 0 < call_seconds < float("inf"):
        raise target_error(ValueError, name, "call_seconds", "must be a positive finite number "
                           f"of seconds or None, got {call_seconds!r}")


def check_ulps_field(name: str, field_name: str, value: object) -> None:
    """``value`` (a count of ulps) is an int >= 0: a TypeError for another type (a float, a
    bool), a ValueError for a negative count."""
    if isinstance(value, bool) or not isinstance(value, int | np.integer):
        raise target_error(TypeError, name, field_name, "must be an int >= 0 (ulps of the "
                           f"compute dtype), got {type(value).__name__} {value!r}")
    if value < 0:
        raise target_error(ValueError, name, field_name, "must be an int >= 0 (ulps of the "
                           f"compute dtype), got {value!r}")


#: Checks that the names of ``known_failures`` are properties of the target's kind. The suite
#: (``kernel_verify.properties.property_index``) registers it when it is imported: the code under
#: test cannot import the suite (imports go down only), and a target is only ever run by it.
_KNOWN_PROPERTY_CHECK: list[Callable[[object, str, Mapping[str, str]], None]] = []


def set_known_property_check(check: Callable[[object, str, Mapping[str, str]], None]) -> None:
    """Register ``check(target_name, kind, known_failures)`` (it raises on an unknown name)."""
    _KNOWN_PROPERTY_CHECK[:] = [check]


def check_known_failures(name: str, known: object, kind: str | None = None) -> None:
    """``known_failures``: property (test function) name -> reason, with a link where there is
    one (array-api-tests' expected-failures file, as data on the target). With ``kind`` (the
    target's class name) and the suite imported, every name must be a property of that kind."""
    if not isinstance(known, Mapping):
        raise target_error(TypeError, name, "known_failures", "must be a mapping property name "
                           f"-> reason, got {type(known).__name__} {known!r}")
    for prop, reason in known.items():
        if not isinstance(prop, str) or not prop.startswith("test_"):
            raise target_error(ValueError, name, "known_failures", "keys must be property names "
                               f"(test function names, 'test_…'), got {prop!r}")
        if not isinstance(reason, str) or not reason.strip():
            raise target_error(TypeError, name, "known_failures", f"[{prop!r}] must be a "
                               f"non-empty reason string, got {reason!r}")
    if kind is not None and known:
        for check in _KNOWN_PROPERTY_CHECK:
            check(name, kind, known)



__all__ = [
    "TARGET_BACKENDS",
    "TARGET_DTYPES",
    "check_array",
    "check_backends_and_dtypes",
    "check_bool",
    "check_call_seconds",
    "check_callable_field",
    "check_choice_field",
    "check_chunk_sizes",
    "check_claim_set",
    "check_config",
    "check_count_field",
    "check_finite_result",
    "check_form_result",
    "check_known_failures",
    "check_last_dim",
    "check_one_backend",
    "check_params",
    "check_positive_int",
    "check_rng",
    "check_same_dtype",
    "check_same_leading",
    "check_scalar",
    "check_target_name",
    "check_ulps_field",
    "config_value",
    "dtype_name",
    "is_torch",
    "set_known_property_check",
    "target_error",
]
