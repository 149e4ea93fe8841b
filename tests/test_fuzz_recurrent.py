"""The newer surfaces, swept with bad input (issue 45, item 3): the recurrent (gated, delta-rule)
targets' forms and the impls under them, the hybrid impls, the gated and hybrid target
dataclasses, the HF model helper and the command line.

Each case replaces **one** argument of a valid call by a bad value and classifies the outcome as
in ``tests/test_fuzz_api.py``'s sweeps: *clear* (a ``ValueError``/``TypeError`` whose message
names the argument), *unclear* (one that does not), *wrong* (the call returned: a bad input
accepted), *traceback* (any other exception: an ``IndexError``, a NumPy broadcasting error, a
``MemoryError``). Only clear is allowed; every sweep first makes the valid call, so a failing
recipe is not mistaken for a refusal. ``pytest tests/test_fuzz_recurrent.py -s`` prints the
tally of each surface.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import torch

BAD_EXC = (ValueError, TypeError)
OUTCOMES = ("tried", "clear", "unclear", "wrong", "traceback")
SWEEP: dict[str, dict[str, int]] = {}
Case = tuple[str, Callable[[], Any], tuple[str, ...]]


def _names_argument(message: str, names: tuple[str, ...]) -> bool:
    return any(re.search(rf"(?<![A-Za-z0-9_]){re.escape(n)}(?![A-Za-z0-9_])", message,
                         flags=re.IGNORECASE) for n in names)


def _outcome(call: Callable[[], Any], names: tuple[str, ...]) -> tuple[str, str]:
    try:
        result = call()
    except BAD_EXC as err:
        kind = "clear" if _names_argument(str(err), names) else "unclear"
        return kind, f"{type(err).__name__}: {err}"
    except (Exception, MemoryError, SystemExit) as err:  # classify every other ending
        return "traceback", f"{type(err).__name__}: {err}"
    return "wrong", f"returned {type(result).__name__}"


def _sweep(surface: str, cases: list[Case]) -> None:
    """Run ``cases`` (label, call, names the message may use); record and check the tally."""
    tally = dict.fromkeys(OUTCOMES, 0)
    bad = []
    for label, call, names in cases:
        kind, what = _outcome(call, names)
        tally["tried"] += 1
        tally[kind] += 1
        if kind != "clear":
            bad.append(f"{label}: {kind}: {what[:240]}")
    SWEEP[surface] = tally
    print(f"\nsweep {surface}: " + ", ".join(f"{k} {v}" for k, v in tally.items()))
    assert not bad, f"{len(bad)} of {tally['tried']} bad inputs not refused by name:\n" + \
        "\n".join(bad)


# ---- the recurrent targets' forms (over impls/{numpy,torch}/{gated_forms,recurrence}.py)
B, H, T, D, DV = 2, 2, 5, 3, 2


def _lib(backend: str) -> Callable[[np.ndarray], Any]:
    return (lambda a: torch.as_tensor(a)) if backend == "torch" else (lambda a: a)


def _targets() -> list[Any]:
    """One built-in recurrent target per gate kind (a fixed per-head decay included) and per
    kind of transition input (β of the delta rule, none)."""
    from kernel_verify.properties.builtin_gated import builtin_gated_targets

    wanted = ("gated_scalar", "gated_fixed_decay", "gated_key_dim", "gated_delta_rule",
              "delta_rule")
    chosen = [t for t in builtin_gated_targets() if t.name.split(":")[-1] in wanted]
    assert len(chosen) == len(wanted), [t.name for t in chosen]
    return chosen


def _good_gates(t: Any, rng: np.random.Generator) -> np.ndarray | None:
    shape = {"scalar_fixed": (H,), "scalar": (B, H, T), "key_dim": (B, H, T, D)}.get(t.gates)
    return None if shape is None else -rng.uniform(0.05, 1.0, shape)


def _put(a: Any, value: float) -> Any:
    out = a.clone() if isinstance(a, torch.Tensor) else a.copy()
    out.reshape(-1)[0] = value
    return out


def _np(a: Any) -> np.ndarray:
    return a.numpy() if isinstance(a, torch.Tensor) else np.asarray(a)


def _gate_bads(t: Any, g: Any, to: Callable, backend: str, *, step: bool = False
               ) -> list[tuple[str, Any]]:
    """Bad gates of ``t``'s kind (``g`` the valid ones): wrong rank, one token short, > 0, NaN,
    another dtype or backend, a meta tensor, None."""
    a = _np(g)
    out = [("rank + 1", to(a[..., None])), ("rank − 1", to(a.reshape(-1)[:a.shape[0]]
                                                      if a.ndim > 1 else a[0])),
           ("> 0", to(np.abs(a) + 0.5)), ("NaN", _put(g, np.nan)), ("+Inf", _put(g, np.inf)),
           ("float32", to(a.astype(np.float32))), ("int", to((a * 0).astype(np.int64))),
           ("other backend", a if backend == "torch" else torch.as_tensor(a)), ("None", None),
           ("list", a.tolist())]
    if t.gates == "scalar_fixed":
        out += [("(B, H) for (H,)", to(np.broadcast_to(a, (B, H)).copy())),
                ("(H + 1,)", to(np.concatenate([a, a[:1]]))), ("(B, H, T)", to(
                    np.broadcast_to(a[None, :, None], (B, H, T)).copy()))]
    elif not step:
        out += [("one token short", to(np.delete(a, 0, axis=2))),
                ("one token long", to(np.concatenate([a, a[:, :, :1]], axis=2)))]
    if backend == "torch":
        out.append(("meta", torch.empty(tuple(g.shape), dtype=g.dtype, device="meta")))
    return out


def _state_bads(state: tuple, backend: str) -> list[tuple[str, Any]]:
    """Bad initial states: wrong shape, dtype, backend, device (meta), NaN, not a tuple."""
    first = state[0]
    lib_cat = (lambda x: torch.cat([x, x[:1]])) if backend == "torch" else (
        lambda x: np.concatenate([x, x[:1]]))
    out = [("batch + 1", tuple(lib_cat(s) for s in state)),
           ("last axis + 1", (_grow(first, backend), *state[1:])),
           ("int64", tuple(s.to(torch.int64) if backend == "torch" else s.astype(np.int64)
                           for s in state)),
           ("NaN", tuple(s * float("nan") for s in state)),
           ("other backend", tuple(_np(s) if backend == "torch" else torch.as_tensor(s)
                                   for s in state)),
           ("int", 3), ("bare array", first)]
    if backend == "torch":
        out.append(("meta", tuple(torch.empty(tuple(s.shape), dtype=s.dtype, device="meta")
                                  for s in state)))
    return out


def _grow(x: Any, backend: str) -> Any:
    if backend == "torch":
        return torch.cat([x, x[..., :1]], dim=-1)
    return np.concatenate([x, x[..., :1]], axis=-1)


CHUNK_BADS = [("0", 0), ("-1", -1), ("True", True), ("2.5", 2.5), ("'2'", "2"), ("None", None)]


def _recurrent_form_cases(t: Any, backend: str) -> list[Case]:
    rng = np.random.default_rng(0)
    to = _lib(backend)
    q, k = (to(rng.standard_normal((B, H, T, D)) * 0.5) for _ in range(2))
    v = to(rng.standard_normal((B, H, T, DV)))
    g = _good_gates(t, rng)
    g = None if g is None else to(g)
    extra = {n: to(rng.uniform(0.1, 0.9, (B, H, T))) for n in t.token_inputs() if n == "beta"}
    mask = np.ones((B, T), bool)
    mask[1, 3:] = False
    cu = to(np.array([0, 2, T]))
    state = t.stateful(q, k, v, g, **extra)[1]
    two = t.stateful(*(x[:1, :, :3] for x in (q, k, v)), g if t.gates in ("scalar_fixed", "none")
                     else g[:1, :, :3], **{n: x[:1, :, :3] for n, x in extra.items()})[1]
    two = tuple(torch.cat([s, s]) if backend == "torch" else np.concatenate([s, s])
                for s in two)
    q1, k1, v1 = (x[:1] for x in (q, k, v))
    g1 = g if t.gates in ("scalar_fixed", "none") else g[:1]
    e1 = {n: x[:1] for n, x in extra.items()}
    step_g = None if g is None else (g if t.gates == "scalar_fixed" else g[:, :, 0])
    goods: dict[str, tuple[tuple, dict]] = {
        "parallel": ((q, k, v, g), {"initial_state": state, **extra}),
        "chunked": ((q, k, v, g), {"chunk_size": 2, "initial_state": state, **extra}),
        "step": ((state, q[:, :, 0], k[:, :, 0], v[:, :, 0], step_g),
                 {n: x[:, :, 0] for n, x in extra.items()}),
        "varlen": ((q1, k1, v1, g1), {"cu_seqlens": cu, "initial_state": two, **e1}),
        "padded": ((q, k, v, g), {"mask": to(mask), "initial_state": state, **extra}),
    }
    gate_pos = {"parallel": 3, "chunked": 3, "step": 4, "varlen": 3, "padded": 3}
    cases: list[Case] = []
    for form, (args, kwargs) in goods.items():
        fn = getattr(t, form)
        fn(*args, **kwargs)  # the valid call works

        def add(param: str, label: str, new_args: tuple, new_kwargs: dict,
                names: tuple[str, ...], fn=fn, form=form) -> None:
            cases.append((f"{t.name}.{form} on {backend}: {param} = <{label}>",
                          lambda: fn(*new_args, **new_kwargs), names))

        if t.gates != "none":
            i = gate_pos[form]
            good_g = args[i]
            for label, bad in _gate_bads(t, good_g, to, backend, step=form == "step"):
                new = (*args[:i], bad, *args[i + 1:])
                add("g", label, new, kwargs, ("g", "g_t", "log_gates", "log_gate_t", "gates"))
        for name in extra:
            good_b = kwargs[name]
            a = _np(good_b)
            bads = [("rank + 1", to(a[..., None])), ("one token short", to(a[..., 1:])),
                    ("NaN", _put(good_b, np.nan)), ("float32", to(a.astype(np.float32)))]
            if backend == "torch":
                bads.append(("meta", torch.empty(tuple(good_b.shape), dtype=good_b.dtype,
                                                 device="meta")))
            for label, bad in bads:
                if form == "step" and label == "one token short":
                    continue
                add(name, label, args, {**kwargs, name: bad}, (name, f"{name}_t"))
        if "initial_state" in kwargs or form == "step":
            good_s = kwargs["initial_state"] if form != "step" else args[0]
            for label, bad in _state_bads(good_s, backend):
                if form == "step":
                    add("state", label, (bad, *args[1:]), kwargs, ("state", "initial_state"))
                else:
                    add("initial_state", label, args, {**kwargs, "initial_state": bad},
                        ("initial_state", "state"))
        if form == "chunked":
            for label, bad in CHUNK_BADS:
                add("chunk_size", label, args, {**kwargs, "chunk_size": bad}, ("chunk_size",))
        if form == "padded":
            for label, bad in [("B − 1 rows", np.ones((B - 1, T), bool)),
                               ("T + 1 columns", np.ones((B, T + 1), bool)),
                               ("1-D", np.ones(T, bool)), ("float", np.full((B, T), 0.5)),
                               ("integer 2", np.full((B, T), 2)), ("None", None)]:
                bad = bad if bad is None else to(bad)
                add("mask", label, args, {**kwargs, "mask": bad}, ("mask",))
        if form == "varlen":
            for label, bad in [("not increasing", [0, 3, 2, T]), ("not ending at T", [0, 2, 4]),
                               ("past T", [0, 2, T + 1]), ("float", [0, 2.5, T]),
                               ("not from 0", [1, 3, T]), ("None", None)]:
                bad = bad if bad is None or any(isinstance(x, float) for x in bad) \
                    else to(np.array(bad))
                add("cu_seqlens", label, args, {**kwargs, "cu_seqlens": bad},
                    ("cu_seqlens",))
    return cases


def test_sweep_recurrent_forms() -> None:
    cases = [c for t in _targets() for backend in ("numpy", "torch")
             for c in _recurrent_form_cases(t, backend)]
    _sweep("recurrent forms", cases)


def test_sweep_recurrence_impls() -> None:
    """The delta-rule recurrence called directly: its state is one array, not a tuple."""
    from kernel_verify.impls.numpy import recurrence as rn
    from kernel_verify.impls.torch import recurrence as rt

    cases: list[Case] = []
    for mod, backend in ((rn, "numpy"), (rt, "torch")):
        rng = np.random.default_rng(1)
        to = _lib(backend)
        q, k = (to(rng.standard_normal((B, H, T, D)) * 0.3) for _ in range(2))
        v = to(rng.standard_normal((B, H, T, DV)))
        g, beta = to(-rng.uniform(0.1, 1.0, (B, H, T))), to(rng.uniform(0.1, 0.9, (B, H, T)))
        s0 = to(rng.standard_normal((B, H, D, DV)))
        good = {"transition": "gated_delta", "g": g, "beta": beta, "initial_state": s0}
        for fn, extra in ((mod.chunked, {"chunk_size": 2}), (mod.recurrent, {})):
            fn(q, k, v, **good, **extra)
            bads: list[tuple[str, str, Any]] = [
                ("initial_state", "batch + 1", to(np.zeros((B + 1, H, D, DV)))),
                ("initial_state", "(d_v, d)", to(np.zeros((B, H, DV, D)))),
                ("initial_state", "int64", to(np.zeros((B, H, D, DV), np.int64))),
                ("initial_state", "tuple", (s0,)),
                ("g", "> 0", to(np.full((B, H, T), 0.5))),
                ("g", "one token short", to(np.full((B, H, T - 1), -0.5))),
                ("beta", "(B, H, T, 1)", to(np.full((B, H, T, 1), 0.5))),
                ("beta", "NaN", _put(beta, np.nan)),
                ("transition", "unknown", "deltaa")]
            if backend == "torch":
                bads.append(("initial_state", "meta", torch.empty((B, H, D, DV),
                                                                  dtype=torch.float64,
                                                                  device="meta")))
            if fn is mod.chunked:
                bads += [("chunk_size", label, bad) for label, bad in CHUNK_BADS]
            for param, label, bad in bads:
                kw = {**good, **extra, param: bad}
                cases.append((f"{backend} {fn.__name__}: {param} = <{label}>",
                              lambda fn=fn, kw=kw, qkv=(q, k, v): fn(*qkv, **kw), (param,)))
    _sweep("recurrence impls", cases)


def test_sweep_gated_form_impls() -> None:
    """The gated forms called directly (``impls/{numpy,torch}/gated_forms.py``): their state is
    the pair ``(S, z)``."""
    from kernel_verify.impls.numpy import gated_forms as gn
    from kernel_verify.impls.torch import gated_forms as gt

    cases: list[Case] = []
    for mod, backend in ((gn, "numpy"), (gt, "torch")):
        rng = np.random.default_rng(3)
        to = _lib(backend)
        fq, fk = (to(rng.uniform(0.1, 1.0, (B, H, T, D))) for _ in range(2))
        v = to(rng.standard_normal((B, H, T, DV)))
        g = to(-rng.uniform(0.1, 1.0, (B, H, T)))
        state = mod.gated_attention_chunked(fq, fk, v, g, chunk_size=2)[1]
        good = {"chunk_size": 2, "initial_state": state}
        bads: list[tuple[str, str, Any]] = [
            *(("initial_state", label, bad) for label, bad in _state_bads(state, backend)),
            *(("chunk_size", label, bad) for label, bad in CHUNK_BADS),
            *(("log_gates", label, bad) for label, bad in [
                ("rank + 1", to(_np(g)[..., None, None])), ("one token short", g[..., 1:]),
                ("> 0", -g), ("NaN", _put(g, np.nan)), ("None", None)])]
        for param, label, bad in bads:
            if param == "log_gates":
                def call(bad=bad, qkv=(fq, fk, v), fn=mod.gated_attention_chunked,
                         good=good) -> Any:
                    return fn(*qkv, bad, **good)
            else:
                def call(param=param, bad=bad, qkv=(fq, fk, v), gg=g,
                         fn=mod.gated_attention_chunked, good=good) -> Any:
                    return fn(*qkv, gg, **{**good, param: bad})
            cases.append((f"{backend} gated_attention_chunked: {param} = <{label}>", call,
                          (param, "state") if param == "initial_state" else (param,)))
    _sweep("gated form impls", cases)


def test_sweep_catches_a_planted_unchecked_call(monkeypatch) -> None:
    """Control: with the per-call check of the recurrent targets undone, the sweep of the fixed
    per-head decay's forms reports the NumPy broadcasting errors issue 45 found."""
    import kernel_verify.properties.gated_protocol as gp

    monkeypatch.setattr(gp, "_check_gated_call", lambda *args, **kwargs: None)
    target = next(t for t in _targets() if t.gates == "scalar_fixed")
    cases = [c for c in _recurrent_form_cases(target, "numpy") if ": g = <" in c[0]]
    with pytest.raises(AssertionError, match=r"g = <\(B, H\) for \(H,\)>: (unclear|traceback)"):
        _sweep("control", cases)
    assert SWEEP["control"]["unclear"] + SWEEP["control"]["traceback"] >= 5


# ---- the hybrid impls (impls/{numpy,torch}/hybrid_attention.py)
WINDOW_BADS = [("-1", -1), ("True", True), ("2.5", 2.5), ("'3'", "3"), ("None", None),
               ("10**12", 10**12), ("2**40", 2**40)]


def _hybrid_calls(backend: str) -> list[tuple[str, Callable[..., Any]]]:
    from kernel_verify.properties.builtin_hybrid import builtin_hybrid_targets

    t = next(t for t in builtin_hybrid_targets() if backend in t.backends)
    rng = np.random.default_rng(2)
    to = _lib(backend)
    q, k = (to(rng.standard_normal((B, H, T, D))) for _ in range(2))
    v = to(rng.standard_normal((B, H, T, DV)))
    return [("attention", lambda window: t.attention(q, k, v, window=window)),
            ("step", lambda window: t.step(None, q[:, :, 0], k[:, :, 0], v[:, :, 0],
                                          window=window))]


@pytest.mark.parametrize("backend", ["numpy", "torch"])
def test_window_zero_and_past_t_are_valid(backend: str) -> None:
    """Window 0 (linear attention only) and a window past T (softmax only) are valid inputs
    (the protocol draws them): they return finite outputs."""
    for form, call in _hybrid_calls(backend):
        for window in (0, T + 3):
            res = call(window)
            out = res[0] if form == "attention" else res[1]
            assert np.isfinite(_np(out)).all(), (form, window)


def test_sweep_hybrid_impls() -> None:
    cases = [(f"hybrid {form} on {backend}: window = <{label}>",
              lambda call=call, bad=bad: call(bad), ("window",))
             for backend in ("numpy", "torch") for form, call in _hybrid_calls(backend)
             for label, bad in WINDOW_BADS]
    _sweep("hybrid impls", cases)


# ---- the gated and hybrid target dataclasses
def _gated_base() -> Any:
    from kernel_verify.properties.builtin_gated import gated_target

    return gated_target("scalar", backends=("numpy", "torch"))


def _hybrid_base() -> Any:
    from kernel_verify.properties.builtin_hybrid import builtin_hybrid_targets

    return builtin_hybrid_targets()[0]


_COMMON_FIELD_BADS: dict[str, list[Any]] = {
    "backends": [("jax",), "numpy", (), 3],
    "dtypes": [("float8",), "float64", (), 3],
    "feature_ulps": [-1, True, 2.5, "1"],
    "known_failures": [{"test_no_such_property": "typo"}, {"not_a_test": "x"}, 3,
                       {"test_full_window_is_softmax_attention": ""}],
    "claims": [frozenset({"bogus"}), "causal", frozenset({3})],
    "name": ["", 3],
    "features": [3, None],
}


def test_sweep_target_declarations() -> None:
    from kernel_verify.properties.property_index import properties_by_kind

    index = properties_by_kind()
    cases: list[Case] = []
    for base, kind, other in ((_gated_base(), "GatedAttentionTarget", "HybridAttentionTarget"),
                              (_hybrid_base(), "HybridAttentionTarget",
                               "GatedAttentionTarget")):
        bads = {**_COMMON_FIELD_BADS}
        # a property of the other kind is not one of this kind's
        bads["known_failures"] = [*bads["known_failures"],
                                  {sorted(index[other])[0]: "another kind's property"}]
        if kind == "HybridAttentionTarget":
            bads |= {"mix": [0, -1.0, float("nan"), True, "1"], "scale": [0, -1.0, "x"],
                     "attention": [3, None], "step": [3]}
        else:
            bads |= {"min_log_gate": [0.5, 0, True, float("nan")], "chunk_sizes": [(0,), ()],
                     "fixed_log_gates": [3], "call_seconds": [-1, 0, True]}
        for field_name, values in bads.items():
            for bad in values:
                cases.append((f"{kind}.{field_name} = {bad!r}",
                              lambda base=base, f=field_name, bad=bad: dataclasses.replace(
                                  base, **{f: bad}), (field_name, "target name")))
    # fixed_log_gates is checked when the suite calls it: a decay that grows (g > 0), a NaN,
    # the wrong shape
    fixed = _fixed_decay_base()
    for label, fn in [("g > 0", lambda h: np.full(h, 0.5)),
                      ("NaN", lambda h: np.full(h, np.nan)),
                      ("(H + 1,)", lambda h: np.full(h + 1, -0.5)),
                      ("(1, H)", lambda h: np.full((1, h), -0.5)),
                      ("a str", lambda h: "gamma")]:
        cases.append((f"GatedAttentionTarget.fixed_log_gates returns <{label}>",
                      lambda fn=fn: dataclasses.replace(fixed, fixed_log_gates=fn)
                      .fixed_log_gates(H), ("fixed_log_gates",)))
    _sweep("target declarations", cases)


def _fixed_decay_base() -> Any:
    from kernel_verify.properties.builtin_gated import gated_target

    return gated_target("scalar_fixed")


def test_fixed_log_gates_pass_through_unchanged() -> None:
    """A valid ``fixed_log_gates`` (RetNet's ``log(1 − 2^(−5−h))``) returns its own values."""
    want = np.log1p(-(2.0 ** -(5.0 + np.arange(4))))
    t = dataclasses.replace(_fixed_decay_base(), fixed_log_gates=lambda h: want[:h])
    np.testing.assert_array_equal(t.fixed_log_gates(4), want)


# ---- the HF model helper
def _hf_cases() -> list[Case]:
    from kernel_verify.adapters.hf_models import hf_model_target

    def make() -> Any:
        return torch.nn.Linear(2, 2)

    good: dict[str, Any] = {"name": "m", "make": make, "vocab_size": 8}
    hf_model_target(**good)
    bads: dict[str, list[Any]] = {
        "name": ["", 3],
        "make": [3, None, "model"],
        "vocab_size": [0, 1, -1, True, 2.5, "8"],
        "claims": ["causal", frozenset({"bogus"})],
        "cache_arg": ["bogus", 3, None, ""],
        "cache_position": ["yes", 1],
        "packed_arg": [3, ""],
        "generate": ["yes", 1],
        "float64": ["yes", 1],
        "max_len": [0, -1, True],
        "init_scales": [(), (-1.0,), "1", (4.0, 1.0)],
        "call_seconds": [-1, True],
        "zero_std": [-1.0, float("nan"), "x", True],
        "known_failures": [{"test_no_such_property": "typo"}, 3],
        "serving": ["yes", 1],
        "padded_prefill": ["yes", 1],
        "decode_mask": ["yes", 1],
        "cache_calls": ["yes", 1],
        "chunk_sizes": [(0,), (-2,), "4", (True,)],
        "conv_window": [0, -1, True, 2.5],
    }
    import inspect

    params = [p for p in inspect.signature(hf_model_target).parameters]
    missing = [p for p in params if p not in bads]
    assert not missing, f"hf_model_target parameters without bad values in the sweep: {missing}"
    return [(f"hf_model_target({p}={bad!r})",
             lambda p=p, bad=bad: hf_model_target(**{**good, p: bad}), (p, "target name"))
            for p in params for bad in bads[p]]


def test_sweep_hf_model_helper() -> None:
    _sweep("hf model helper", _hf_cases())


# ---- the command line: one line on stderr, exit status 2, never a run with bad arguments
class _Ran(Exception):
    """Raised in place of a command: the arguments were accepted."""


_CLI_BADS = [
    ["calibrate", "--seeds", "0"], ["calibrate", "--seeds", "-5"], ["calibrate", "--jobs", "0"],
    ["calibrate", "--part"], ["calibrate", "--part", ""], ["calibrate", "--seeds", "2.5"],
    ["check", "x:t", "--jobs", "0"], ["check", "x:t", "--max-examples", "0"],
    ["check", "x:t", "--shrink-seconds", "-1"], ["check", "x:t", "--profile", ""],
    ["mutants", "--only"], ["mutants", "--jobs", "-1"], ["report", "--maps"],
    ["report", "--maps", ""], ["list", "--d", "0"], ["conformance", "nonsense_library"],
]


def test_sweep_command_line(monkeypatch, capsys) -> None:
    import kernel_verify.cli as cli

    def ran(args: Any) -> int:
        raise _Ran

    for name in dir(cli):
        if name.startswith("_cmd_"):
            monkeypatch.setattr(cli, name, ran)

    def call(argv: list[str]) -> Any:
        capsys.readouterr()
        try:
            code = cli.main(argv)
        except SystemExit as err:
            code = err.code
        except _Ran:
            return "ran"
        out, err = capsys.readouterr()
        lines = [ln for ln in err.splitlines() if ln.strip()]
        if code == 2 and len(lines) == 1 and not out.strip():
            raise ValueError(lines[0])
        return f"exit {code}, {len(lines)} stderr lines, stdout {out[:80]!r}"

    cases = [(" ".join(argv), lambda argv=argv: call(argv),
              tuple(a for a in argv if a.startswith("--")) or (argv[-1], "LIBRARY", "library"))
             for argv in _CLI_BADS]
    _sweep("command line", cases)
