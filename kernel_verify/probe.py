"""Declarations checked once, before any property runs: :func:`probe_targets`.

A target's constructor checks each field on its own (``__post_init__``); what it cannot check
without calling the target is whether the declared functions keep their declared contract. The
probe calls each of them **once, on a tiny input** and compares what comes back with what the
target declares:

* every kind: each function binds the documented call (``inspect.signature``: a form that does
  not take ``chunk_size``, a step without ``seed``);
* feature maps: ``φ(x)`` for ``x (3, 4)`` has the declared width (``output_dim(d, m)``, else the
  width of the declared ``formula``, else ``m``) and one row per input row;
* attention (:class:`~kernel_verify.properties.protocol.AttentionTarget`): ``attention``
  returns a floating ``(B, H, T, d_v)`` array in the target's layout; every declared form
  returns ``(out, state)`` (``step``: ``(state, o_t)``) with ``out`` of that shape and the state
  a tuple of arrays whose first axis is the batch (none on torch's ``meta`` device: a shape
  without values, which would fail only later, in the call continuing from it); ``features``
  is ``(B, H, T, m)`` with ``m = feature_count`` where both are declared; ``state_sums``
  gives ``S (B, H, m, d_v)`` and ``z (B, H, m)`` or None;
* gated and recurrent targets (their ``varlen``: the signature only), hybrid targets: the
  same for their forms and ``features``;
* models: ``build(seed, init_scale, dtype)`` gives a model whose ``forward`` returns logits
  ``(B, T, vocab_size)`` **in the dtype asked for** (float32, and float64 where the target
  claims it), and the optional calls return what :mod:`~kernel_verify.properties.model_protocol`
  says;
* random matrices ``W (m, d)``; kernel approximations ``(K̃ (n, n), indices in [0, n))``.

Only a contradiction of the declaration is a problem. A call that raises its own error on the
probe's input is *not* one (a target may refuse a shape it never promised to take; the
properties report what it does with their inputs), except the errors of the protocol's own
checks (``target 'name': field …``), which name a broken declaration, and a call that ran on the
first declared pair and raises on another declared CPU (library, dtype) pair with the same
input: that pair contradicts ``backends``/``dtypes`` (attention, gated and hybrid targets).
A target whose every call is slow (``call_seconds`` ≥ :data:`PROBE_MAX_CALL_SECONDS`, e.g.
Triton kernels under the interpreter) gets the signature checks only. All problems of all
targets are raised together as one :class:`DeclarationError` (a ``ValueError``), one line per
target and field; ``check()`` and ``kernel-verify check`` (exit status 2) raise it before the
suite starts.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["PROBE_MAX_CALL_SECONDS", "DeclarationError", "Problem", "probe_target",
           "probe_targets"]

#: Targets declaring a ``call_seconds`` at least this large get no probing calls (only the
#: signature checks): a probe must cost well under a second.
PROBE_MAX_CALL_SECONDS = 0.1

#: Probe sizes: batch, heads, time (raised to a target's shape contract), key dim, value dim.
_B, _H, _T, _D, _DV = 1, 2, 3, 3, 2


@dataclass(frozen=True)
class Problem:
    """One contradiction between a target's declaration and what its function returned."""

    target: str
    field: str
    message: str

    def __str__(self) -> str:
        return f"target {self.target!r}: {self.field}: {self.message}"


class DeclarationError(ValueError):
    """Declarations contradicted by the targets' own functions (every problem, one per line)."""

    def __init__(self, problems: list[Problem]) -> None:
        self.problems = list(problems)
        lines = "\n".join(f"  {p}" for p in self.problems)
        n = len(self.problems)
        super().__init__(f"{n} declaration problem{'s' * (n != 1)} found before any property "
                         f"ran (each function was called once on a tiny input):\n{lines}")


class _Stop(Exception):
    """The probe of one function cannot go on (its call raised an error of its own)."""


# ------------------------------------------------------------------------------ helpers
def _is_array(x: Any) -> bool:
    return hasattr(x, "shape") and hasattr(x, "dtype")


def _shape(x: Any) -> tuple[int, ...]:
    return tuple(int(s) for s in x.shape)


def _floating(x: Any) -> bool:
    if type(x).__module__.startswith("torch"):
        return bool(x.dtype.is_floating_point)
    return bool(np.issubdtype(np.asarray(x).dtype, np.floating))


def _on_meta(x: Any) -> bool:
    """Whether ``x`` is a torch tensor on the ``meta`` device (a shape without values)."""
    return getattr(getattr(x, "device", None), "type", None) == "meta"


def _dtype(x: Any) -> str:
    return str(x.dtype).removeprefix("torch.")


def _what(x: Any) -> str:
    if _is_array(x):
        return f"an array of shape {_shape(x)}"
    if isinstance(x, tuple | list):
        return f"a {type(x).__name__} of length {len(x)}"
    return f"a {type(x).__name__}"


def _protocol_error(err: BaseException, name: str) -> bool:
    """Whether ``err`` is one of the protocol's own checks of this target (its message starts
    ``target 'name':``): a broken declaration, not the target refusing the input."""
    return isinstance(err, TypeError | ValueError) and str(err).startswith(f"target {name!r}")


def _is_skip(err: BaseException) -> bool:
    """Whether ``err`` is pytest's skip (``pytest.skip`` / ``importorskip`` in a target)."""
    return any(c.__name__ == "OutcomeException" for c in type(err).__mro__)


class _Probe:
    """The problems found for one target."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.problems: list[Problem] = []
        #: the field and error of a call that raised its own error (not a protocol check)
        self.raised: tuple[str, BaseException] | None = None

    def add(self, field_name: str, message: str) -> None:
        problem = Problem(self.name, field_name, message)
        if problem not in self.problems:  # (state_sums is read from each form's state)
            self.problems.append(problem)

    def binds(self, field_name: str, fn: Any, args: int, keywords: Iterable[str],
              call: str) -> bool:
        """Whether ``fn`` takes ``args`` positional arguments and ``keywords``."""
        fn = getattr(fn, "_kv_unchecked", fn)
        if isinstance(fn, type):
            self.add(field_name, f"is the class {fn.__name__}, not a function: give an instance "
                     f"({fn.__name__}(...), whose __call__ takes {call}) or a function")
            return False
        try:
            sig = inspect.signature(fn)
        except (TypeError, ValueError):  # a builtin or C function: nothing to read
            return True
        try:
            sig.bind(*([None] * args), **dict.fromkeys(keywords))
        except TypeError as err:
            self.add(field_name, f"must take the call {call}; its signature {sig} does not "
                     f"({err})")
            return False
        return True

    def call(self, field_name: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except (KeyboardInterrupt, SystemExit):
            raise
        except BaseException as err:  # pytest.skip (a library not installed) included
            if _protocol_error(err, self.name):  # "target 'name': field problem"
                named, _, message = str(err).removeprefix(f"target {self.name!r}: ").partition(
                    " ")
                self.add(named or field_name, message)
            elif not _is_skip(err):  # a skip (a library not installed) is no refusal
                self.raised = (field_name, err)
            raise _Stop from err

    def array(self, field_name: str, what: str, x: Any, shape: tuple[int | None, ...]) -> bool:
        """``x`` is a floating array of ``shape`` (None: any size on that axis)."""
        if not _is_array(x):
            self.add(field_name, f"must return {what} as an array, got {_what(x)}")
            return False
        got = _shape(x)
        if len(got) != len(shape) or any(w is not None and g != w
                                          for g, w in zip(got, shape, strict=False)):
            want = "(" + ", ".join("*" if w is None else str(w) for w in shape) + ")"
            self.add(field_name, f"returned {what} of shape {got}; expected {want}")
            return False
        if not _floating(x):
            self.add(field_name, f"returned {what} of dtype {_dtype(x)}; expected a floating "
                     "dtype")
            return False
        if _on_meta(x):
            self.add(field_name, f"returned {what} on the 'meta' device (a shape without data)")
            return False
        return True

    def pair(self, field_name: str, result: Any, want: str) -> tuple[Any, Any] | None:
        if not isinstance(result, tuple | list) or len(result) != 2:
            self.add(field_name, f"must return a pair {want}, got {_what(result)}")
            return None
        if want == "(state, o_t)" and _is_array(result[0]) and not _is_array(result[1]):
            self.add(field_name, f"must return (state, o_t), got ({_what(result[0])}, "
                     f"{_what(result[1])}): (o_t, state) swapped?")
            return None
        return result[0], result[1]

    def state(self, field_name: str, state: Any, batch: int, *, optional: bool = False) -> bool:
        if state is None and optional:
            return False
        if not isinstance(state, tuple | list) or not state or \
                not all(_is_array(s) for s in state):
            self.add(field_name, f"must return its state as a non-empty tuple of arrays, got "
                     f"{_what(state)}")
            return False
        meta = [i for i, s in enumerate(state) if _on_meta(s)]
        if meta:
            self.add(field_name, f"returned a state with arrays on the 'meta' device (entries "
                     f"{meta}; shapes without data): a state must hold values the next call "
                     "continues from")
            return False
        bad = [_shape(s) for s in state if not len(s.shape) or int(s.shape[0]) != batch]
        if bad:
            self.add(field_name, f"returned a state whose arrays do not have the batch ({batch})"
                     f" first: shapes {[_shape(s) for s in state]}")
            return False
        return True


#: The (library, dtype) the next probe run uses instead of its first choice (the other declared
#: CPU pairs of :func:`probe_target`); None: the first choice.
_FORCED: list[tuple[str, str] | None] = [None]
#: Forced ``d_v = d`` for the re-probe of a target that raised with ``d_v ≠ d``
#: (:func:`_probe_square_values`).
_FORCED_SQUARE: list[bool] = [False]


class _Arrays:
    """Tiny inputs of one backend and dtype (the first the target accepts, float64 first; or
    the pair :data:`_FORCED`)."""

    def __init__(self, backends: tuple[str, ...], dtypes: tuple[str, ...]) -> None:
        self.library = "numpy" if "numpy" in backends else backends[0]
        self.dtype = "float64" if "float64" in dtypes else dtypes[0]
        if _FORCED[0] is not None:
            self.library, self.dtype = _FORCED[0]

    def __call__(self, a: np.ndarray) -> Any:
        if self.library == "torch":
            import torch

            return torch.as_tensor(np.asarray(a)).to(getattr(torch, self.dtype))
        return np.asarray(a, dtype=self.dtype)

    def index(self, a: Iterable[int]) -> Any:
        if self.library == "torch":
            import torch

            return torch.as_tensor(list(a), dtype=torch.int64)
        return np.asarray(list(a), dtype=np.int64)

    def mask(self, b: int, t: int) -> Any:
        if self.library == "torch":
            import torch

            return torch.ones((b, t), dtype=torch.bool)
        return np.ones((b, t), dtype=bool)


def _slow(t: Any) -> bool:
    seconds = getattr(t, "call_seconds", None)
    return seconds is not None and seconds >= PROBE_MAX_CALL_SECONDS


def _length(t: Any) -> int:
    """A probe length inside the target's shape contract (``min_length``, a multiple of
    ``length_multiple_of``)."""
    multiple = int(getattr(t, "length_multiple_of", 1) or 1)
    length = max(_T, int(getattr(t, "min_length", 1) or 1))
    return -(-length // multiple) * multiple


def _in_layout(t: Any, shape: tuple[int, ...]) -> tuple[int, ...]:
    """A ``(B, H, T, …)`` shape in the target's layout."""
    if getattr(t, "layout", "BHTD") == "BTHD" and len(shape) >= 3:
        return (shape[0], shape[2], shape[1], *shape[3:])
    return shape


# ------------------------------------------------------------------------- feature maps
def _same_value(a: Any, b: Any) -> bool:
    try:
        return bool(np.allclose(np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64),
                                rtol=1e-12, atol=0.0))
    except (TypeError, ValueError):
        return a == b


def _check_kernel_params(t: Any, p: _Probe) -> None:
    """``kernel_params`` names only parameters the declared kernel takes, and agrees with a
    ``config`` entry of the same name (a map drawn at ``config["sigma"] = 3`` checked against the
    kernel at its default ``sigma = 1`` fails every statistical property for no fault of the
    map's)."""
    from kernel_verify.verify.references.kernels import MP_KERNELS

    fn = MP_KERNELS.get(t.kernel)
    if fn is None:
        return
    try:
        params = t.kernel_args(4)
    except Exception as err:  # a callable kernel_params that raises: say so, here
        p.add("kernel_params", f"kernel_params(config, d=4) raised {type(err).__name__}: {err}")
        return
    sig = inspect.signature(fn)
    named = {n: prm for n, prm in sig.parameters.items() if prm.kind is prm.KEYWORD_ONLY}
    if not any(prm.kind is prm.VAR_KEYWORD for prm in sig.parameters.values()):
        unknown = sorted(set(params) - set(named))
        if unknown:
            takes = ", ".join(sorted(named)) or "no parameters"
            p.add("kernel_params", f"the kernel {t.kernel!r} takes {takes}; got {unknown}")
            return
    _check_kernel_values(t, p, params)
    for key in sorted(set(named) & set(t.config)):
        if isinstance(t.config[key], np.ndarray):
            _check_array_param(t, p, key)
            continue
        if isinstance(t.config[key], bool) or not isinstance(t.config[key], int | float):
            continue  # a scalar hyperparameter only (learned maps keep None there: drawn)
        declared = params.get(key, named[key].default)
        if declared is inspect.Parameter.empty or _same_value(declared, t.config[key]):
            continue
        how = (f"{key}={declared!r}" if key in params
               else f"its default {key}={declared!r} (kernel_params gives no {key!r})")
        p.add("kernel_params", f"config[{key!r}] = {t.config[key]!r}, but the kernel "
              f"{t.kernel!r} is declared with {how}: the map is drawn at the config's value and "
              f"checked against the kernel's; give kernel_params={{{key!r}: "
              f"{t.config[key]!r}}} (or a callable (config, d) -> mapping)")


def _check_kernel_values(t: Any, p: _Probe, params: dict[str, Any]) -> None:
    """The declared kernel accepts its scalar parameters: evaluated once at two points of
    ``d = 4`` (20 digits), a ValueError or TypeError of its reference (``sigma ≤ 0``, a Matérn
    ``nu`` without a closed form, a required parameter missing) is a declaration problem, named
    here rather than in every property. Kernels with array parameters (learned, mixtures) are
    not evaluated: their arrays are checked against ``config`` instead; nor are positional
    kernels (cosFormer's takes the token positions)."""
    from kernel_verify.verify.references.kernels import kernel_mp

    if t.has("positional") or any(isinstance(v, np.ndarray) for v in params.values()):
        return
    x, y = np.zeros(4), np.full(4, 0.25)
    try:
        kernel_mp(t.kernel, x, y, dps=20, **params)
    except (ValueError, TypeError) as err:
        p.add("kernel_params", f"the kernel {t.kernel!r} refuses {params!r}: {err}")


def _check_array_param(t: Any, p: _Probe, key: str) -> None:
    """An array in ``config`` (a spectral mixture's ``pi``, ``mu``, ``L``) equals the kernel's
    parameter of the same name at the dimension the array is made for (its last axis): the map
    is drawn from the config's arrays and checked against the kernel's."""
    value = t.config[key]
    if value.ndim == 0 or value.size == 0 or not np.issubdtype(value.dtype, np.number):
        return
    d = int(value.shape[-1])
    try:
        declared = t.kernel_args(d).get(key)
    except Exception:  # kernel_params that raise at this d: reported by the d = 4 call
        return
    if declared is None:
        return
    declared = np.asarray(declared)
    if declared.shape == value.shape and _same_value(declared, value):
        return
    p.add("kernel_params", f"config[{key!r}] (shape {value.shape}) differs from the kernel "
          f"{t.kernel!r}'s {key!r} at d = {d} (shape {declared.shape}): the map is drawn from "
          "the config's arrays and checked against the kernel's; make kernel_params give the "
          "same arrays (a callable (config, d) -> mapping can read them from config)")


def _probe_feature_map(t: Any, p: _Probe) -> None:
    from kernel_verify.impls.descriptor import _features_expected

    _check_kernel_params(t, p)
    if t.sample_fn is not None:
        p.binds("sample_fn", t.sample_fn, 2, (), "sample_fn(x, seed)")
    if t.draw is not None:
        p.binds("draw", t.draw, 4, (), "draw(rng, d, m, config)")
    for f in ("numpy_fn", "torch_fn", "log_numpy_fn", "log_torch_fn"):
        fn = getattr(t, f)
        if fn is not None:
            kws = ("positions",) if t.has("positional") else ()
            p.binds(f, fn, 3, kws, f"{f}(x, params, config)")
    if p.problems or _slow(t):
        return
    x = np.random.default_rng(0).uniform(-1.0, 1.0, (3, 4))
    positions = np.arange(3) if t.has("positional") else None
    field_name = "sample_fn" if not t.white_box else ("numpy_fn" if t.numpy_fn else "torch_fn")
    out = p.call(field_name, t.features, x, seed=0, positions=positions)
    p.array(field_name, "the features", out, (3, _features_expected(t, 4)[0]))
    if not t.white_box:
        _check_largest_seed(t, p, x)


def _check_largest_seed(t: Any, p: _Probe, x: np.ndarray) -> None:
    """A black-box ``sample_fn`` takes every seed the suite passes, ``[0, 2³²)``: one that seeds
    a library refusing large seeds would fail property after property instead."""
    from kernel_verify.impls.descriptor import BLACKBOX_SEEDS

    top = BLACKBOX_SEEDS - 1
    try:
        t.sample(x, top)
    except (KeyboardInterrupt, SystemExit):
        raise
    except Exception as err:
        p.add("sample_fn", f"must accept every seed in [0, 2**32) (the suite draws them all); "
              f"at seed {top} it raised {type(err).__name__}: {err} (a library that takes "
              "smaller seeds: derive one, e.g. np.random.SeedSequence(seed).generate_state(1))")


# ---------------------------------------------------------------------------- attention
def _check_features(t: Any, p: _Probe, call: Callable[[np.ndarray], Any], b: int, tt: int,
                    ) -> int | None:
    """``features`` of a sequence target: float64 ``(B, H, T, m)``; returns ``m``."""
    x = np.random.default_rng(1).uniform(-1.0, 1.0, (b, _H, tt, _D))
    out = p.call("features", call, x)
    if not p.array("features", "the features", out, (b, _H, tt, None)):
        return None
    return int(out.shape[-1])


def _check_state_sums(t: Any, p: _Probe, state: Any, b: int, m: int | None, dv: int) -> None:
    if t.state_sums is None or state is None:
        return
    sums = p.pair("state_sums", p.call("state_sums", t.state_sums, state), "(S, z)")
    if sums is None:
        return
    s, z = sums
    if p.array("state_sums", "S", s, (b, _H, m, dv)) and z is not None:
        p.array("state_sums", "z", z, (b, _H, m if m is not None else int(s.shape[2])))


def _probe_attention(t: Any, p: _Probe) -> None:
    from kernel_verify.properties.attention_cases import modes

    p.binds("attention", t.attention, 3, ("causal", "seed"), "attention(q, k, v, *, causal, "
            "seed)")
    calls = {"stateful": (3, ("initial_state", "seed")),
             "chunked": (3, ("chunk_size", "initial_state", "seed")),
             "step": (4, ("seed",)),
             "varlen": (3, ("cu_seqlens", "initial_state", "seed")),
             "padded": (3, ("mask", "initial_state", "seed"))}
    for form, (n, words) in calls.items():
        if getattr(t, form) is not None:
            p.binds(form, getattr(t, form), n, words, f"{form}(…, *, {', '.join(words)})")
    if t.features is not None:
        p.binds("features", t.features, 2, (), "features(x, seed)")
    if t.state_sums is not None:
        p.binds("state_sums", t.state_sums, 1, (), "state_sums(state)")
    if p.problems or _slow(t):
        return
    arr = _Arrays(tuple(t.backends), tuple(t.dtypes))
    tt = _length(t)
    dv = _D if t.dv_equals_d or _FORCED_SQUARE[0] else _DV
    rng = np.random.default_rng(0)
    q = rng.uniform(-1.0, 1.0, (_B, _H, tt, _D))
    k = q if t.self_attention_only else rng.uniform(-1.0, 1.0, (_B, _H, tt, _D))
    v = rng.uniform(-1.0, 1.0, (_B, _H, tt, dv))
    lay = t.to_layout
    tq, tv = arr(lay(q)), arr(lay(v))
    tk = tq if k is q else arr(lay(k))
    out_shape = _in_layout(t, (_B, _H, tt, dv))
    m = None
    for field_name, run in _attention_calls(t, arr, tq, tk, tv, tt, dv, modes(t)[0]):
        try:
            m_or_state = run(p, out_shape)
        except _Stop:
            continue
        if field_name == "features":
            m = m_or_state
            if m is not None and t.feature_count not in (None, 0) and m != t.feature_count:
                p.add("features", f"returns {m} features per position, but feature_count "
                      f"declares {t.feature_count}")
        elif m_or_state is not None and field_name in ("stateful", "step"):
            try:
                _check_state_sums(t, p, m_or_state, _B, m, dv)
            except _Stop:
                pass


def _attention_calls(t: Any, arr: _Arrays, q: Any, k: Any, v: Any, tt: int, dv: int,
                     causal: bool) -> list[tuple[str, Callable[[_Probe, tuple], Any]]]:
    """(field, its probe) for every function the attention target declares, features first
    (the width ``state_sums`` is compared with)."""
    out: list[tuple[str, Callable[[_Probe, tuple], Any]]] = []

    def features(p: _Probe, _shape_: tuple) -> int | None:
        return _check_features(t, p, lambda x: t.features(x, 0), _B, tt)

    def attention(p: _Probe, shape: tuple) -> None:
        p.array("attention", "the output", p.call("attention", t.attention, q, k, v,
                                                  causal=causal, seed=0), shape)

    def form(name: str, *args: Any, **kw: Any) -> Callable[[_Probe, tuple], Any]:
        def run(p: _Probe, shape: tuple) -> Any:
            res = p.pair(name, p.call(name, getattr(t, name), *args, seed=0, **kw),
                         "(out, final_state)")
            if res is None:
                return None
            p.array(name, "out", res[0], shape)
            batch = 2 if name == "varlen" else _B
            return res[1] if p.state(name, res[1], batch, optional=name == "padded") else None
        return run

    def step(p: _Probe, _shape_: tuple) -> Any:
        at = (slice(None), 0) if t.layout == "BTHD" else (slice(None), slice(None), 0)
        res = p.pair("step", p.call("step", t.step, None, q[at], k[at], v[at], seed=0),
                     "(state, o_t)")
        if res is None:
            return None
        p.array("step", "o_t", res[1], (_B, _H, dv))
        return res[0] if p.state("step", res[0], _B) else None

    if t.features is not None:
        out.append(("features", features))
    out.append(("attention", attention))
    if t.stateful is not None:
        out.append(("stateful", form("stateful", q, k, v, initial_state=None)))
    if t.chunked is not None:
        c = int(t.chunk_sizes[0]) if t.chunk_sizes else 2
        out.append(("chunked", form("chunked", q, k, v, chunk_size=c, initial_state=None)))
    if t.step is not None:
        out.append(("step", step))
    if t.padded is not None:
        out.append(("padded", form("padded", q, k, v, mask=arr.mask(_B, tt),
                                   initial_state=None)))
    if t.varlen is not None:
        axis = 1 if t.layout == "BTHD" else 2
        cat = _concat(arr)
        packed = [cat([x, x], axis) for x in (q, k, v)]
        if k is q:
            packed[1] = packed[0]
        shape2 = _in_layout(t, (_B, _H, 2 * tt, dv))

        def varlen(p: _Probe, _shape_: tuple) -> Any:
            return form("varlen", *packed, cu_seqlens=arr.index([0, tt, 2 * tt]),
                        initial_state=None)(p, shape2)

        out.append(("varlen", varlen))
    return out


def _concat(arr: _Arrays) -> Callable[[list, int], Any]:
    if arr.library == "torch":
        import torch

        return lambda xs, axis: torch.cat(xs, dim=axis)
    return lambda xs, axis: np.concatenate(xs, axis=axis)


# ------------------------------------------------------------------- gated / recurrent
def _probe_gated(t: Any, p: _Probe) -> None:
    # the per-head parameters of a gate parametrisation (``gate_input``: A_log, dt_bias), by
    # keyword like the transition's per-token inputs
    head_params = tuple(getattr(t, "gate_parameters", tuple)())
    tokens = (*t.token_inputs(), *head_params)
    full = 4  # q, k, v, g (g=None for gates="none")
    sigs = {"parallel": (full, ("initial_state", "seed")),
            "stateful": (full, ("initial_state", "seed")),
            "chunked": (full, ("chunk_size", "initial_state", "seed")),
            "step": (5, ("seed",)),
            "varlen": (full, ("cu_seqlens", "initial_state", "seed")),
            "padded": (full, ("mask", "initial_state", "seed"))}
    for form, (n, words) in sigs.items():
        if getattr(t, form) is not None:
            words = (*words, *tokens)
            p.binds(form, getattr(t, form), n, words, f"{form}(q, k, v, g, *, "
                    f"{', '.join(words)})" if form != "step" else
                    f"step(state, q_t, k_t, v_t, g_t, *, {', '.join(words)})")
    p.binds("features", t.features, 2, (), "features(x, role)")
    if t.state_sums is not None:
        p.binds("state_sums", t.state_sums, 1, (), "state_sums(state)")
    if t.fixed_log_gates is not None:
        p.binds("fixed_log_gates", t.fixed_log_gates, 1, (), "fixed_log_gates(H)")
    if p.problems or _slow(t):
        return
    arr = _Arrays(tuple(t.backends), tuple(t.dtypes))
    rng = np.random.default_rng(0)
    tt, dv = _T, _DV
    q, k = rng.uniform(-1.0, 1.0, (2, _B, _H, tt, _D))
    v = rng.uniform(-1.0, 1.0, (_B, _H, tt, dv))
    g: np.ndarray | None
    if t.gates == "none":
        g = None
    elif t.gates == "scalar_fixed":
        if t.fixed_log_gates is not None:
            try:
                fixed = p.call("fixed_log_gates", t.fixed_log_gates, _H)
            except _Stop:
                return
            if not p.array("fixed_log_gates", "the log-gates", np.asarray(fixed), (_H,)):
                return
            g = np.asarray(fixed, dtype=np.float64)
        else:
            g = np.full(_H, -0.5)
    elif t.gates == "scalar":
        g = np.full((_B, _H, tt), -0.5)
    else:
        g = np.full((_B, _H, tt, _D), -0.5)
    per_token = {"beta": np.full((_B, _H, tt), 0.0 if t.beta == "sigmoid" else 0.5),
                 "p": rng.uniform(-0.5, 0.5, (_B, _H, tt, _D)),
                 "a": rng.uniform(-0.2, 0.2, (_B, _H, tt, _D)),
                 "b": rng.uniform(-0.2, 0.2, (_B, _H, tt, _D))}
    lay = t.to_layout

    def seq(x: np.ndarray | None) -> Any:  # a (B, H, T, …) or (B, H, T) array, or (H,) gates
        if x is None:
            return None
        return arr(x if x.ndim < 3 else lay(x))

    def tok(x: np.ndarray | None, i: int) -> Any:  # one token of it: (B, H, …), (H,) as is
        if x is None:
            return None
        return arr(x if x.ndim < 3 else x[:, :, i])

    per_head = np.zeros((_H, _D) if t.gates == "key_dim" else (_H,))
    kw = {n: seq(per_token[n]) for n in t.token_inputs()} | {n: arr(per_head)
                                                             for n in head_params}
    args = [seq(x) for x in (q, k, v, g)]
    shape = _in_layout(t, (_B, _H, tt, dv))
    m = None
    try:
        m = _check_features(t, p, lambda x: t.features(x, "k"), _B, tt)
    except _Stop:
        pass
    for form in ("parallel", "stateful", "chunked", "padded"):
        fn = getattr(t, form)
        if fn is None:
            continue
        extra: dict[str, Any] = {"initial_state": None}
        if form == "chunked":
            extra["chunk_size"] = int(t.chunk_sizes[0]) if t.chunk_sizes else 2
        if form == "padded":
            extra["mask"] = arr.mask(_B, tt)
        try:
            res = p.pair(form, p.call(form, fn, *args, seed=0, **kw, **extra),
                         "(out, final_state)")
        except _Stop:
            continue
        if res is None:
            continue
        p.array(form, "out", res[0], shape)
        # a parallel form may return no state (fla's delta_rule_parallel: the suite compares
        # its outputs only); a padded form's state is optional too
        if p.state(form, res[1], _B, optional=form in ("padded", "parallel")) \
                and form != "padded":
            try:
                _check_state_sums(t, p, res[1], _B, m, dv)
            except _Stop:
                pass
    if t.step is not None:
        step_kw = {n: tok(per_token[n], 0) for n in t.token_inputs()} | {
            n: arr(per_head) for n in head_params}
        g0 = None if g is None else (arr(g) if g.ndim == 1 else tok(g, 0))
        try:
            res = p.pair("step", p.call("step", t.step, None, tok(q, 0), tok(k, 0), tok(v, 0),
                                        g0, seed=0, **step_kw), "(state, o_t)")
        except _Stop:
            res = None
        if res is not None:
            p.array("step", "o_t", res[1], (_B, _H, dv))
            p.state("step", res[0], _B)


# ------------------------------------------------------------------------------- hybrid
def _probe_hybrid(t: Any, p: _Probe) -> None:
    p.binds("attention", t.attention, 3, ("window", "initial_state"),
            "attention(q, k, v, *, window, initial_state)")
    p.binds("features", t.features, 2, (), "features(x, role)")
    if t.step is not None:
        p.binds("step", t.step, 4, ("window",), "step(state, q_t, k_t, v_t, *, window)")
    if p.problems:
        return
    arr = _Arrays(tuple(t.backends), tuple(t.dtypes))
    rng = np.random.default_rng(0)
    q, k = rng.uniform(-1.0, 1.0, (2, _B, _H, _T, _D))
    v = rng.uniform(-1.0, 1.0, (_B, _H, _T, _DV))
    try:
        _check_features(t, p, lambda x: t.features(x, "k"), _B, _T)
    except _Stop:
        pass
    try:
        res = p.pair("attention", p.call("attention", t.attention, arr(q), arr(k), arr(v),
                                         window=1, initial_state=None), "(out, state)")
        if res is not None:
            p.array("attention", "out", res[0], (_B, _H, _T, _DV))
            p.state("attention", res[1], _B)
    except _Stop:
        pass
    if t.step is not None:
        try:
            res = p.pair("step", p.call("step", t.step, None, arr(q[:, :, 0]), arr(k[:, :, 0]),
                                        arr(v[:, :, 0]), window=1), "(state, o_t)")
            if res is not None:
                p.array("step", "o_t", res[1], (_B, _H, _DV))
                p.state("step", res[0], _B)
        except _Stop:
            pass


# ------------------------------------------------------------------------------- models
def _probe_model(t: Any, p: _Probe) -> None:
    p.binds("build", t.build, 1, ("init_scale", "dtype"), "build(seed, *, init_scale, dtype)")
    p.binds("forward", t.forward, 2, (), "forward(model, ids)")
    for name, n in (("prefill", 2), ("step", 3), ("generate", 3), ("packed", 3),
                    ("padded", 3), ("parameters", 1)):
        if getattr(t, name) is not None:
            p.binds(name, getattr(t, name), n, (), f"{name} with {n} positional arguments")
    if p.problems or _slow(t):
        return
    import torch

    vocab = int(t.vocab_size)
    b, tt = 2, 4
    # ids 0 and 1 only (every vocabulary has them): a declared vocab_size larger than the
    # model's shows as the logits' width, not as an index error of the embedding
    ids = torch.tensor([[0, 1, 1, 0], [1, 0, 0, 1]], dtype=torch.int64)
    dtypes = ("float32", "float64") if t.has("float64") else ("float32",)
    for dtype in dtypes:
        try:
            model = p.call("build", t.build, 0, init_scale=t.init_scales[0], dtype=dtype)
            logits = p.call("forward", t.forward, model, ids)
        except _Stop:
            if dtype == "float64" and p.raised is not None and not p.problems:
                # the float32 model ran: the claim is what contradicts the code (every float64
                # case would fail on this error, and the float32 cases, whose tolerances come
                # from the float64 run, with it)
                field_name, err = p.raised
                p.raised = None
                p.add("claims", f"claims float64, but {field_name} raised "
                      f"{type(err).__name__}: {_first_line(err)} for the float64 model (the "
                      "float32 model ran): drop the claim (hf_model_target: float64=False) or "
                      "make the model run in float64")
            return
        if not type(logits).__module__.startswith("torch"):
            p.add("forward", f"must return logits as a torch tensor, got {_what(logits)}")
            return
        if not p.array("forward", "the logits", logits, (b, tt, vocab)):
            return
        if _dtype(logits) != dtype and not _weights_in(t, model, dtype):
            # weights in the dtype asked for and logits in another: build honoured the
            # dtype and the model's own forward casts its logits (transformers' Mamba casts
            # to float32): a property about the model, judged by the model properties, not
            # a contradiction in the declaration
            p.add("build", f"build(seed, init_scale=…, dtype={dtype!r}) gave a model whose "
                  f"logits are {_dtype(logits)}: build must make the model in the dtype asked "
                  "for")
            return
    _probe_model_calls(t, p, model, ids, vocab)


def _weights_in(t: Any, model: Any, dtype: str) -> bool:
    """Whether every floating weight the target differentiates is in ``dtype`` (False where
    the weights cannot be listed)."""
    try:
        weights = [w for w in t.params_of(model) if _floating(w)]
    except Exception:  # a model without parameters() says nothing here
        return False
    return bool(weights) and all(_dtype(w) == dtype for w in weights)


def _probe_model_calls(t: Any, p: _Probe, model: Any, ids: Any, vocab: int) -> None:
    import torch

    b, tt = ids.shape
    try:
        if t.prefill is not None:
            res = p.pair("prefill", p.call("prefill", t.prefill, model, ids), "(logits, cache)")
            if res is not None and p.array("prefill", "the logits", res[0], (b, tt, vocab)):
                step = p.pair("step", p.call("step", t.step, model, res[1], ids[:, 0]),
                              "(logits, cache)")
                if step is not None:
                    p.array("step", "the logits", step[0], (b, vocab))
    except _Stop:
        pass
    try:
        if t.generate is not None:
            res = p.pair("generate", p.call("generate", t.generate, model, ids, 2),
                         "(tokens, scores)")
            if res is not None and _is_array(res[0]) and _shape(res[0]) != (b, 2):
                p.add("generate", f"returned tokens of shape {_shape(res[0])} for 2 new tokens "
                      f"of a batch of {b}; expected ({b}, 2)")
            elif res is not None:
                p.array("generate", "the scores", res[1], (b, 2, vocab))
    except _Stop:
        pass
    try:
        if t.packed is not None:
            row = ids[:1]
            cu = torch.tensor([0, tt // 2, tt], dtype=torch.int64)
            p.array("packed", "the logits", p.call("packed", t.packed, model, row, cu),
                    (1, tt, vocab))
    except _Stop:
        pass
    try:
        if t.padded is not None:
            mask = torch.ones((b, tt), dtype=torch.int64)
            p.array("padded", "the logits", p.call("padded", t.padded, model, ids, mask),
                    (b, tt, vocab))
    except _Stop:
        pass


# ---------------------------------------------------------------- matrices, approximations
def _probe_matrix(t: Any, p: _Probe) -> None:
    if not p.binds("draw", t.draw, 3, (), "draw(rng, m, d)"):
        return
    try:  # m > d: a transposed W shows
        w = p.call("draw", t.draw, np.random.default_rng(0), 5, 3)
    except _Stop:
        return
    p.array("draw", "W", w, (5, 3))


def _probe_approx(t: Any, p: _Probe) -> None:
    if not p.binds("approximate", t.approximate, 3, (), "approximate(X, kernel, rng)"):
        return
    n = max(6, int(t.rank) + 2)
    x = np.random.default_rng(0).uniform(-1.0, 1.0, (n, 2))

    def kernel(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return np.exp(-0.5 * ((a[:, None, :] - b[None, :, :]) ** 2).sum(-1))

    try:
        res = p.pair("approximate", p.call("approximate", t.approximate, x, kernel,
                                           np.random.default_rng(0)), "(K̃, landmark indices)")
    except _Stop:
        return
    if res is None or not p.array("approximate", "K̃", np.asarray(res[0]), (n, n)):
        return
    idx = np.asarray(res[1])
    if idx.ndim != 1 or (idx.size and (not np.issubdtype(idx.dtype, np.integer)
                                       or idx.min() < 0 or idx.max() >= n)):
        p.add("approximate", f"returned landmark indices {idx!r}; expected a 1-D integer "
              f"array of rows of X, in [0, {n})")


_PROBES: dict[str, Callable[[Any, _Probe], None]] = {
    "FeatureMapTarget": _probe_feature_map,
    "AttentionTarget": _probe_attention,
    "GatedAttentionTarget": _probe_gated,
    "HybridAttentionTarget": _probe_hybrid,
    "ModelTarget": _probe_model,
    "RandomMatrixTarget": _probe_matrix,
    "KernelApproxTarget": _probe_approx,
}


def probe_target(target: Any) -> list[Problem]:
    """The contradictions between ``target``'s declaration and its functions (module
    docstring); an empty list when there are none."""
    kind = type(target).__name__
    if kind not in _PROBES:
        raise TypeError(f"target must be one of {', '.join(_PROBES)}, got {kind}")
    p = _Probe(str(target.name))
    try:
        _PROBES[kind](target, p)
    except _Stop:
        pass
    if not p.problems and p.raised is None and kind in _PER_DTYPE and not _slow(target):
        _probe_other_dtypes(target, p)
    elif not p.problems and p.raised is not None and kind in _PER_DTYPE and not _slow(target):
        _probe_square_values(target, p) or _probe_first_pair(target, p)
    return p.problems


def _rerun(target: Any, pair: tuple[str, str] | None = None, square: bool = False) -> _Probe:
    """The probe of ``target`` again, on the (library, dtype) ``pair`` and with ``d_v = d``
    forced where asked."""
    again = _Probe(str(target.name))
    _FORCED[0], _FORCED_SQUARE[0] = pair, square
    try:
        _PROBES[type(target).__name__](target, again)
    except _Stop:
        pass
    finally:
        _FORCED[0], _FORCED_SQUARE[0] = None, False
    return again


def _first_line(err: BaseException) -> str:
    text = str(err).strip()
    return text.splitlines()[0][:200] if text else ""


def _probe_square_values(target: Any, p: _Probe) -> bool:
    """A call raised with ``d_v ≠ d`` on an attention target not declaring ``dv_equals_d``:
    probe again with ``d_v = d``; if that runs clean, the declaration lacks ``dv_equals_d``
    (every property drawing ``d_v ≠ d`` would fail on the same error). True when reported."""
    if type(target).__name__ != "AttentionTarget" or getattr(target, "dv_equals_d", True):
        return False
    again = _rerun(target, square=True)
    if again.problems or again.raised is not None:
        return False
    field_name, err = p.raised
    p.add("dv_equals_d", f"{field_name} raised {type(err).__name__}: {_first_line(err)} with "
          f"d_v = {_DV} ≠ d = {_D}, and ran with d_v = d: a kernel that needs d_v = d declares "
          "dv_equals_d=True (the suite then draws d_v = d)")
    return True


def _probe_first_pair(target: Any, p: _Probe) -> bool:
    """A call raised on the first declared CPU (library, dtype) pair: probe the others; if one
    runs clean, the first pair contradicts ``backends``/``dtypes`` (a kernel that cannot run
    float64 while declaring it). True when reported."""
    from kernel_verify.verify.backends import AXIS

    first = _Arrays(tuple(target.backends), tuple(target.dtypes))
    for b in AXIS:
        if (b.device != "cpu" or b.library not in target.backends
                or b.dtype not in target.dtypes or (b.library, b.dtype) == (first.library,
                                                                             first.dtype)):
            continue
        again = _rerun(target, (b.library, b.dtype))
        if again.problems or again.raised is not None:
            continue
        field_name, err = p.raised
        p.add("dtypes", f"declare {first.library} {first.dtype} (backends="
              f"{tuple(target.backends)}, dtypes={tuple(target.dtypes)}), but {field_name} "
              f"raised {type(err).__name__}: {_first_line(err)} on it (the same call ran on "
              f"{b.library} {b.dtype}): every property on {first.library} {first.dtype} would "
              "fail the same way; leave it out of the declaration")
        return True
    return False


#: The kinds whose every declared CPU (library, dtype) pair is probed (:func:`probe_target`).
_PER_DTYPE = ("AttentionTarget", "GatedAttentionTarget", "HybridAttentionTarget")


def _probe_other_dtypes(target: Any, p: _Probe) -> None:
    """Probe again on every other CPU (library, dtype) pair the target declares, after a probe
    on the first pair ran clean: a declared pair on which the same calls raise their own error
    contradicts ``backends``/``dtypes`` (a kernel that refuses float32, a NumPy function given
    a torch half tensor); one problem per pair, naming the call and its error; a pair where the
    contract is broken (a shape, a state) is reported as on the first pair."""
    from kernel_verify.verify.backends import AXIS

    first = _Arrays(tuple(target.backends), tuple(target.dtypes))
    pairs = [(b.library, b.dtype) for b in AXIS
             if b.device == "cpu" and b.library in target.backends and b.dtype in target.dtypes
             and (b.library, b.dtype) != (first.library, first.dtype)]
    for library, dtype in pairs:
        again = _rerun(target, (library, dtype))
        for problem in again.problems:
            p.add(problem.field, f"(on {library} {dtype}) {problem.message}")
        if again.raised is not None and not again.problems:
            field_name, err = again.raised
            text = str(err).strip().splitlines()[0] if str(err).strip() else ""
            p.add("dtypes", f"declare {library} {dtype} (backends={tuple(target.backends)}, "
                  f"dtypes={tuple(target.dtypes)}), but {field_name} raised "
                  f"{type(err).__name__}: {text[:200]} on it (the same call ran on "
                  f"{first.library} {first.dtype}): every property on {library} {dtype} would "
                  "fail the same way; leave it out of the declaration")


def probe_targets(targets: Iterable[Any]) -> None:
    """Probe every target; raise one :class:`DeclarationError` listing every problem found."""
    problems = [problem for t in targets for problem in probe_target(t)]
    if problems:
        raise DeclarationError(problems)
