"""A bad-input sweep over every public surface (issue #45): the Python API (``check``), each
target kind's constructor (attention, feature map, gated/recurrent with every transition,
hybrid, model), the calls of each kind's forms, the declaration probe, the HF model helper, the
command line (every subcommand) and the pytest plugin.

Each row of :data:`CASES` is (surface, label, the bad call, the error class expected, words its
message must contain: the argument's name and the problem). A row is classified as

* ``clear``: the expected class, every word in the message (the command line: exit status 2 —
  the pytest plugin: pytest's usage-error status 4 — nothing on stdout, one line on stderr, no
  traceback, every word in that line);
* ``unclear``: another class, a message missing a word, a traceback, another exit status;
* ``accepted``: no error at all (the command line: the work it guards was started);
* ``wrong value``: no error, and what came back is a value computed from the bad input.

Every row must be ``clear``. ``python -m tests.test_bad_input_sweep`` prints the counts per
surface and kind (and each row that is not clear) without pytest. The subcommands' work and
``check``'s runs are stubbed while a row runs (:data:`_WORK`): a bad input that reaches them is
``accepted``, and nothing long runs or rewrites a report. Beside this table,
``tests/test_fuzz_api.py`` breaks every argument of every public entry point of the impls one
at a time and ``tests/test_fuzz_recurrent.py`` every argument of the recurrent and hybrid forms
(those sweeps ask that the message name the argument; this one also asks for the class and the
problem). Rows whose fix lies outside
the files this sweep's fixes could touch are marked ``open`` (an xfail that must fail: it turns
into a failure the day it is fixed, so that the mark is removed)."""

from __future__ import annotations

import contextlib
import dataclasses
import io
import sys
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from unittest import mock

import numpy as np
import pytest
import torch

#: Classification words of a row.
KINDS = ("clear", "unclear", "accepted", "wrong value")


@dataclass(frozen=True)
class Case:
    surface: str
    label: str
    call: Callable[[], object]
    exc: type[BaseException] | None
    words: tuple[str, ...]
    #: with no error, what came back is a value (not merely an accepted input)
    value: bool = False
    #: the fix lies outside the files of this sweep: why (the row is an xfail)
    open: str = ""


# ------------------------------------------------------------------ the targets the rows vary
R = dataclasses.replace
B, H, T, D = 1, 2, 4, 3
_rng = np.random.default_rng(0)
Q, K, V = (_rng.standard_normal((B, H, T, D)) for _ in range(3))
G = -np.ones((B, H, T))


def _gated(kind: str = "scalar", **kw):
    from kernel_verify.properties.builtin_gated import gated_target

    return gated_target(kind, **kw)


def _delta(transition: str, **kw):
    from kernel_verify.properties.builtin_delta import delta_target

    return delta_target(transition, **kw)


def _hybrid(**kw):
    from kernel_verify.properties.builtin_hybrid import hybrid_target

    return hybrid_target("h", **kw)


def _model():
    from kernel_verify.properties.builtin_models import tiny_lm_target

    return tiny_lm_target()


def _att(**changes):
    from kernel_verify.properties.protocol import AttentionTarget

    return AttentionTarget(**{"name": "a", "attention": lambda q, k, v, **kw: v,
                              "claims": frozenset({"causal"}), **changes})


def _fm(**changes):
    from kernel_verify.properties.protocol import FeatureMapTarget

    good = {"name": "t", "kernel": "softmax", "claims": frozenset({"unbiased"}),
            "draw": lambda rng, d, m, c: {"W": rng.standard_normal((m, d))},
            "numpy_fn": lambda x, p, c: np.exp(x @ p["W"].T), "formula": "softmax_positive"}
    return FeatureMapTarget(**{**good, **changes})


def _matrix(**changes):
    from kernel_verify.properties.protocol import RandomMatrixTarget

    good = {"name": "r", "draw": lambda rng, m, d: rng.standard_normal((m, d)),
            "claims": frozenset({"gaussian_rows"})}
    return RandomMatrixTarget(**{**good, **changes})


def _approx(**changes):
    from kernel_verify.properties.protocol import KernelApproxTarget

    good = {"name": "k", "approximate": lambda x, kern, rng: (kern(x, x), np.arange(2)),
            "claims": frozenset(), "rank": 2}
    return KernelApproxTarget(**{**good, **changes})


def _probe(t) -> object:
    """The probe of one target: its problems raised as the DeclarationError check() raises."""
    from kernel_verify.probe import DeclarationError, probe_target

    problems = probe_target(t)
    if problems:
        raise DeclarationError(problems)
    return t


def _tensor(x, **kw):
    return torch.as_tensor(x, dtype=torch.float64).to(**kw) if kw else torch.as_tensor(x)


def _unchecked(fn):
    return getattr(fn, "_kv_unchecked", fn)


# ------------------------------------------------------------------------------ the API
def _api(**kw: object) -> Callable[[], object]:
    def call():
        from kernel_verify.api import check

        args = dict(kw)
        targets = args.pop("targets") if "targets" in args else [_att(name="api_target")]
        return check(targets, **args)
    return call



def _label(kw: dict) -> str:
    """A row's label from its keyword arguments, with callables by name, not by address (the
    test ids must be the same in every pytest-xdist worker)."""
    def show(v) -> str:
        return f"<function {getattr(v, '__name__', '?')}>" if callable(v) else repr(v)
    return "{" + ", ".join(f"{k!r}: {show(v)}" for k, v in kw.items()) + "}"


API = [
    Case("api", "targets=42", _api(targets=42), TypeError, ("targets", "int")),
    Case("api", "targets=[]", _api(targets=[]), TypeError, ("targets", "empty list")),
    Case("api", "targets=[1]", _api(targets=[1]), TypeError, ("targets", "int")),
    Case("api", "targets='no_colon'", _api(targets="no_colon"), ValueError,
         ("module:attribute", "'no_colon'")),
    Case("api", "targets=module that does not exist", _api(targets="kv_no_such_module:t"),
         ValueError, ("kv_no_such_module", "No module")),
    Case("api", "duplicate target names", lambda: __import__("kernel_verify").check(
        [_att(), _att()]), ValueError, ("names", "unique", "'a'")),
    Case("api", "jobs=0", _api(jobs=0), ValueError, ("jobs", ">= 1", "0")),
    Case("api", "jobs=1.5", _api(jobs=1.5), TypeError, ("jobs", "int", "1.5")),
    Case("api", "jobs=True", _api(jobs=True), TypeError, ("jobs", "int", "True")),
    Case("api", "profile='fast'", _api(profile="fast"), ValueError,
         ("profile", "'fast'", "dev, ci")),
    Case("api", "profile=3", _api(profile=3), TypeError, ("profile", "str", "int")),
    Case("api", "keyword=''", _api(keyword=""), ValueError, ("keyword", "non-empty")),
    Case("api", "keyword=3", _api(keyword=3), TypeError, ("keyword", "str", "int")),
    Case("api", "shrink_seconds=-1", _api(shrink_seconds=-1), ValueError,
         ("shrink_seconds", ">= 0", "-1")),
    Case("api", "shrink_seconds=nan", _api(shrink_seconds=float("nan")), ValueError,
         ("shrink_seconds", "nan")),
    Case("api", "shrink_seconds='5'", _api(shrink_seconds="5"), TypeError,
         ("shrink_seconds", "number", "str")),
    Case("api", "timeout=0", _api(timeout=0), ValueError, ("timeout", "> 0", "0")),
    Case("api", "timeout=inf", _api(timeout=float("inf")), ValueError, ("timeout", "inf")),
    Case("api", "progress='yes'", _api(progress="yes"), TypeError, ("progress", "bool")),
    Case("api", "probe=1", _api(probe=1), TypeError, ("probe", "bool")),
    Case("api", "given(99)", lambda: __import__("kernel_verify.api").api.given(99), ValueError,
         ("in-process", "99")),
]

# --------------------------------------------------------------------- attention, feature map
ATTENTION = [
    Case("attention", "claims='causal'", lambda: _att(claims="causal"), TypeError,
         ("claims", "set")),
    Case("attention", "known_failures typo", lambda: _att(
        known_failures={"test_partition_of_unit": "x"}), ValueError,
         ("known_failures", "test_partition_of_unit", "did you mean")),
    Case("attention", "backends='torch'", lambda: _att(backends="torch"), TypeError,
         ("backends", "tuple", "'torch'")),
    Case("attention", "dtypes=('float128',)", lambda: _att(dtypes=("float128",)), ValueError,
         ("dtypes", "float128", "float64")),
    Case("attention", "layout='BTDH'", lambda: _att(layout="BTDH"), ValueError,
         ("layout", "'BTDH'", "BHTD")),
    Case("attention", "chunk_sizes=(0,)", lambda: _att(chunked=lambda *a, **k: (a[2], ()),
                                                      chunk_sizes=(0,)), ValueError,
         ("chunk_sizes", ">= 1")),
    Case("attention", "call_seconds=0", lambda: _att(call_seconds=0), ValueError,
         ("call_seconds", "positive", "0")),
    Case("attention", "call_seconds='1'", lambda: _att(call_seconds="1"), TypeError,
         ("call_seconds", "number", "'1'")),
    Case("attention", "stateful returns one array", lambda: _att(
        stateful=lambda q, k, v, **kw: v).stateful(Q, K, V), TypeError,
         ("stateful", "pair (out, final_state)", "one array")),
    Case("random_matrix", "draw an array", lambda: _matrix(draw=np.eye(3)), TypeError,
         ("draw", "callable")),
    Case("random_matrix", "claims={'gaussian'}", lambda: _matrix(claims=frozenset({"gaussian"})),
         ValueError, ("claims", "gaussian", "gaussian_rows")),
    Case("random_matrix", "known_failures of another kind", lambda: _matrix(
        known_failures={"test_partition_of_unity": "x"}), ValueError,
         ("known_failures", "attention targets")),
    Case("kernel_approx", "rank=0", lambda: _approx(rank=0), ValueError, ("rank", ">= 1")),
    Case("kernel_approx", "rank=2.0", lambda: _approx(rank=2.0), TypeError, ("rank", "int")),
    Case("kernel_approx", "approximate='nystrom'", lambda: _approx(approximate="nystrom"),
         TypeError, ("approximate", "callable")),
    Case("feature_map", "kernel='sofmax'", lambda: _fm(kernel="sofmax"), ValueError,
         ("kernel", "'sofmax'", "softmax")),
    Case("feature_map", "m=0", lambda: _fm(m=0), ValueError, ("m", ">= 1")),
    Case("feature_map", "m=2.5", lambda: _fm(m=2.5), TypeError, ("m", "int")),
    Case("feature_map", "claims={'unbaised'}", lambda: _fm(claims=frozenset({"unbaised"})),
         ValueError, ("claims", "unbaised")),
    Case("feature_map", "known_failures of another kind", lambda: _fm(
        known_failures={"test_partition_of_unity": "x"}), ValueError,
         ("known_failures", "test_partition_of_unity", "attention targets")),
]

# ----------------------------------------------------------- gated / recurrent: constructor
_GATED_FIELDS = [
    ({"known_failures": {"test_nope": "x"}}, ValueError, ("known_failures", "test_nope")),
    ({"known_failures": {"test_partition_of_unity": "x"}}, ValueError,
     ("known_failures", "test_partition_of_unity", "attention targets")),
    ({"known_failures": ["test_gated_split_invariance"]}, TypeError,
     ("known_failures", "mapping")),
    ({"backends": "torch"}, TypeError, ("backends", "tuple", "'torch'")),
    ({"backends": ("jax",)}, ValueError, ("backends", "jax", "numpy, torch")),
    ({"dtypes": ("float128",)}, ValueError, ("dtypes", "float128")),
    ({"dtypes": ()}, ValueError, ("dtypes", "non-empty")),
    ({"feature_ulps": -1}, ValueError, ("feature_ulps", ">= 0", "-1")),
    ({"feature_ulps": 1.5}, TypeError, ("feature_ulps", "int", "1.5")),
    ({"feature_ulps": True}, TypeError, ("feature_ulps", "int", "True")),
    ({"min_log_gate": 0}, ValueError, ("min_log_gate", "[−1e4, 0)", "0")),
    ({"min_log_gate": 5.0}, ValueError, ("min_log_gate", "5.0")),
    ({"min_log_gate": float("nan")}, ValueError, ("min_log_gate", "nan")),
    ({"min_log_gate": "-3"}, TypeError, ("min_log_gate", "number", "'-3'")),
    ({"chunk_sizes": (0,)}, ValueError, ("chunk_sizes", ">= 1")),
    ({"chunk_sizes": 64}, TypeError, ("chunk_sizes", "tuple", "64")),
    ({"transition": "delt"}, ValueError, ("transition", "'delt'", "gated_delta")),
    ({"gates": "vector"}, ValueError, ("gates", "'vector'", "scalar")),
    ({"gates": "none"}, ValueError, ("gates", "transition 'decay'", "'none'")),
    ({"beta": "logit"}, ValueError, ("beta", "'logit'", "sigmoid")),
    ({"gate_input": "mamba2"}, ValueError, ("gate_input", "'mamba2'", "mamba")),
    ({"gate_lower": -1.0}, ValueError, ("gate_lower", "bounded")),
    ({"layout": "BTDH"}, ValueError, ("layout", "'BTDH'", "BHTD")),
    ({"features": None}, TypeError, ("features", "callable", "None")),
    ({"parallel": None, "stateful": None, "chunked": None, "step": None}, ValueError,
     ("no form", "parallel, stateful, chunked, step")),
    ({"call_seconds": 0}, ValueError, ("call_seconds", "positive", "0")),
    ({"call_seconds": "1"}, TypeError, ("call_seconds", "number", "'1'")),
    ({"dv_equals_d": 1}, TypeError, ("dv_equals_d", "bool")),
    ({"claims": frozenset({"causal"})}, ValueError, ("claims", "causal", "state_bitwise")),
    ({"claims": frozenset({"negative_eigenvalues"})}, ValueError,
     ("claims", "negative_eigenvalues", "β")),
    ({"name": ""}, TypeError, ("name", "non-empty")),
    ({"state_sums": 3}, TypeError, ("state_sums", "callable")),
    ({"gate_side": "value"}, ValueError, ("gate_side", "'value'", "key")),
    ({"fixed_log_gates": lambda h: np.zeros(h)}, ValueError,
     ("fixed_log_gates", "scalar_fixed", "'scalar'")),
]
GATED_FIELDS = [Case("gated", f"GatedAttentionTarget {_label(c)}", (lambda c=c: R(_gated(), **c)),
                     exc, words) for c, exc, words in _GATED_FIELDS] + [
    Case("gated", "delta: gate_input='mamba' with gates='none'",
         lambda: R(_delta("delta"), gate_input="mamba"), ValueError,
         ("gate_input", "'mamba'", "'none'")),
    Case("gated", "kda: gate_input='bounded' without gate_lower",
         lambda: R(_delta("kda"), gate_input="bounded"), ValueError,
         ("gate_lower", "'bounded'", "None")),
    Case("gated", "rwkv7: claims negative_eigenvalues (no β)",
         lambda: R(_delta("rwkv7"), claims=frozenset({"negative_eigenvalues"})), ValueError,
         ("claims", "negative_eigenvalues", "'rwkv7'")),
    Case("gated", "comba: claims normalised", lambda: R(_delta("comba"),
                                                        claims=frozenset({"normalised"})),
         ValueError, ("claims", "normalised", "'comba'")),
    Case("gated", "fixed_log_gates returns a growing decay",
         lambda: R(_gated("scalar_fixed"), fixed_log_gates=lambda h: np.full(h, 0.1))
         .fixed_log_gates(2), ValueError, ("fixed_log_gates", "≤ 0", "grows")),
    Case("gated", "fixed_log_gates returns H + 1 gates",
         lambda: R(_gated("scalar_fixed"), fixed_log_gates=lambda h: -np.ones(h + 1))
         .fixed_log_gates(2), ValueError, ("fixed_log_gates", "shape (2,)", "(3,)")),
]


# ----------------------------------------------------------------- gated / recurrent: calls
def _torch_scalar():
    return _gated("scalar", backends=("torch",))


def _returns(form: str, result: Callable[..., object]):
    """A scalar gated target whose ``form`` returns ``result(out, state)`` (``step``: of
    ``(o_t, state)``)."""
    t = _gated("scalar")
    fn = _unchecked(getattr(t, form))

    def bad(*args, **kwargs):
        out = fn(*args, **kwargs)
        return result(*out) if form != "step" else result(*out[::-1])
    return R(t, **{form: bad})


GATED_CALLS = [
    Case("gated", "fixed decay: g of rank 3 (the gates of gates='scalar')",
         lambda: _gated("scalar_fixed").parallel(Q, K, V, G), ValueError,
         ("g", "shape (2,)", "(1, 2, 4)")),
    Case("gated", "fixed decay: g (H, 1)", lambda: _gated("scalar_fixed").parallel(
        Q, K, V, -np.ones((H, 1))), ValueError, ("g", "shape (2,)", "(2, 1)")),
    Case("gated", "padded: g one token short", lambda: _gated().padded(
        Q, K, V, G[..., :-1], mask=np.ones((B, T), bool)), ValueError,
         ("g", "shape (1, 2, 4)", "(1, 2, 3)")),
    Case("gated", "layout BTHD: g given in BHTD", lambda: R(_gated(), layout="BTHD").parallel(
        Q.swapaxes(1, 2), K.swapaxes(1, 2), V.swapaxes(1, 2), G), ValueError,
         ("g", "shape (1, 4, 2)", "(1, 2, 4)")),
    Case("gated", "layout BTHD: v in BHTD", lambda: R(_gated(), layout="BTHD").parallel(
        Q.swapaxes(1, 2), K.swapaxes(1, 2), V[..., :2], G.swapaxes(1, 2)), ValueError,
         ("v", "(1, 2, 4, 2)")),
    Case("gated", "padded: mask one token short", lambda: _gated().padded(
        Q, K, V, G, mask=np.ones((B, T - 1), bool)), ValueError, ("mask", "shape", "(1, 3)")),
    Case("gated", "g > 0 (a growing decay)", lambda: _gated().parallel(Q, K, V, -G),
         ValueError, ("g", "≤ 0", "grows")),
    Case("gated", "g NaN", lambda: _gated().parallel(Q, K, V, G * np.nan), ValueError,
         ("g", "NaN")),
    Case("gated", "g a torch tensor for NumPy queries", lambda: _gated().parallel(
        Q, K, V, _tensor(G)), TypeError, ("g", "numpy.ndarray", "torch")),
    Case("gated", "g int64", lambda: _gated().parallel(Q, K, V, G.astype(np.int64)), TypeError,
         ("g", "floating", "int64")),
    Case("gated", "g a list", lambda: _gated().parallel(Q, K, V, G.tolist()), TypeError,
         ("g", "numpy.ndarray", "list")),
    Case("gated", "q of rank 3", lambda: _gated().parallel(Q[0], K[0], V[0], G), ValueError,
         ("q", "4 dimensions", "(2, 4, 3)")),
    Case("gated", "k with fewer tokens than q", lambda: _gated().parallel(Q, K[..., :2, :], V, G),
         ValueError, ("k", "shape", "(1, 2, 2, 3)")),
    Case("gated", "v with fewer tokens than q", lambda: _gated().parallel(Q, K, V[..., :2, :], G),
         ValueError, ("v", "(1, 2, 2, 3)")),
    Case("gated", "q a list", lambda: _gated().parallel(Q.tolist(), K, V, G), TypeError,
         ("q", "list")),
    Case("gated", "step: q_t of rank 4", lambda: _gated().step(None, Q, K, V, G), ValueError,
         ("q_t", "3 dimensions", "(1, 2, 4, 3)")),
    Case("gated", "initial_state an array", lambda: _gated().stateful(
        Q, K, V, G, initial_state=np.zeros(3)), TypeError, ("initial_state", "tuple")),
    Case("gated", "initial_state of another width", lambda: _gated().stateful(
        Q, K, V, G, initial_state=(np.zeros((B, H, 5, 5)), np.zeros((B, H, 5)))), ValueError,
         ("initial_state[0]", "shape", "(1, 2, 5, 5)")),
    Case("gated", "initial_state on the meta device", lambda: _torch_scalar().stateful(
        *(_tensor(x) for x in (Q, K, V, G)), initial_state=(
            torch.zeros((B, H, D, D), dtype=torch.float64, device="meta"),
            torch.zeros((B, H, D), dtype=torch.float64, device="meta"))), ValueError,
         ("initial_state", "meta")),
    Case("gated", "q on the meta device", lambda: _torch_scalar().stateful(
        _tensor(Q).to("meta"), *(_tensor(x) for x in (K, V, G))), ValueError, ("q", "meta")),
    Case("gated", "chunk_size=0", lambda: _gated().chunked(Q, K, V, G, chunk_size=0),
         ValueError, ("chunk_size", ">= 1")),
    Case("gated", "chunk_size=2.5", lambda: _gated().chunked(Q, K, V, G, chunk_size=2.5),
         TypeError, ("chunk_size", "integer", "float")),
    Case("gated", "step: g_t of another shape", lambda: _gated().step(
        None, Q[:, :, 0], K[:, :, 0], V[:, :, 0], -np.ones((B, H, 2))), ValueError,
         ("g_t", "shape (1, 2)", "(1, 2, 2)")),
    Case("gated", "varlen: cu_seqlens not ending at T", lambda: _gated().varlen(
        Q, K, V, G, cu_seqlens=np.array([0, 2])), ValueError, ("cu_seqlens", "4")),
    Case("gated", "gated_delta: beta one token short", lambda: _delta("gated_delta").parallel(
        Q, K, V, G, beta=np.ones((B, H, T - 1))), ValueError,
         ("beta", "shape (1, 2, 4)", "(1, 2, 3)")),
    Case("gated", "gated_delta: beta missing", lambda: _delta("gated_delta").parallel(
        Q, K, V, G), ValueError, ("beta", "needs")),
    Case("gated", "delta: a gate given", lambda: _delta("delta").parallel(
        Q, K, V, G, beta=np.ones((B, H, T))), ValueError, ("g", "None", "'delta'")),
    Case("gated", "kda: g per token, not per key dimension", lambda: _delta("kda").parallel(
        Q, K, V, G, beta=np.ones((B, H, T))), ValueError, ("g", "shape (1, 2, 4, 3)")),
    Case("gated", "comba: p of another width", lambda: _delta("comba").parallel(
        Q, K, V, G, beta=np.ones((B, H, T)), p=np.ones((B, H, T, 2))), ValueError,
         ("p", "(1, 2, 4, 2)")),
    Case("gated", "rwkv7: a of another width", lambda: _delta("rwkv7").parallel(
        Q, K, V, -np.ones((B, H, T, D)), a=np.ones((B, H, T, 2)), b=np.ones((B, H, T, D))),
         ValueError, ("a", "shape (1, 2, 4, 3)", "(1, 2, 4, 2)")),
    Case("gated", "rwkv7: b NaN", lambda: _delta("rwkv7").parallel(
        Q, K, V, -np.ones((B, H, T, D)), a=np.ones((B, H, T, D)),
        b=np.full((B, H, T, D), np.nan)), ValueError, ("b", "NaN")),
    # a form returning the wrong tuple is named, at its own call
    Case("gated", "parallel returns only out", lambda: _returns("parallel", lambda o, s: o)
         .parallel(Q, K, V, G), TypeError, ("parallel", "pair (out, final_state)",
                                             "one array")),
    Case("gated", "chunked returns a triple", lambda: _returns("chunked", lambda o, s: (o, s, 1))
         .chunked(Q, K, V, G, chunk_size=2), TypeError, ("chunked", "pair", "length 3")),
    Case("gated", "stateful returns its state as an array", lambda: _returns(
        "stateful", lambda o, s: (o, s[0])).stateful(Q, K, V, G), TypeError,
         ("stateful", "state", "tuple of arrays")),
    Case("gated", "step returns (o_t, state)", lambda: _returns(
        "step", lambda o, s: (o, s)).step(None, Q[:, :, 0], K[:, :, 0], V[:, :, 0], G[:, :, 0]),
         TypeError, ("step", "(state, o_t)", "swapped")),
    Case("gated", "padded returns (state, out)", lambda: _returns(
        "padded", lambda o, s: (s, o)).padded(Q, K, V, G, mask=np.ones((B, T), bool)),
         TypeError, ("padded", "out an array", "tuple")),
]

# ------------------------------------------------------------------------------- hybrid
_HYBRID_FIELDS = [
    ({"known_failures": {"test_nope": "x"}}, ValueError, ("known_failures", "test_nope")),
    ({"known_failures": {"test_gated_split_invariance": "x"}}, ValueError,
     ("known_failures", "test_gated_split_invariance", "GatedAttentionTarget")),
    ({"backends": "numpy"}, TypeError, ("backends", "tuple", "'numpy'")),
    ({"dtypes": ("float8",)}, ValueError, ("dtypes", "float8")),
    ({"feature_ulps": -1}, ValueError, ("feature_ulps", ">= 0", "-1")),
    ({"feature_ulps": 2.5}, TypeError, ("feature_ulps", "int", "2.5")),
    ({"mix": 0}, ValueError, ("mix", "> 0")),
    ({"mix": float("nan")}, ValueError, ("mix", "finite")),
    ({"mix": "1"}, TypeError, ("mix", "real number", "str")),
    ({"scale": 0.0}, ValueError, ("scale", "> 0")),
    ({"attention": None}, TypeError, ("attention", "callable")),
    ({"features": None}, TypeError, ("features", "callable")),
    ({"step": 3}, TypeError, ("step", "callable")),
    ({"claims": frozenset({"causal"})}, ValueError, ("claims", "causal", "differentiable")),
    ({"claims": frozenset({"differentiable"})}, ValueError,
     ("claims", "differentiable", "torch")),
    ({"name": None}, TypeError, ("name", "non-empty")),
]
HYBRID = [Case("hybrid", f"HybridAttentionTarget {c}", (lambda c=c: R(_hybrid(), **c)), exc,
               words) for c, exc, words in _HYBRID_FIELDS] + [
    Case("hybrid", "window = 10**15 (allocates until MemoryError before)",
         lambda: _hybrid().attention(Q, K, V, window=10**15), ValueError,
         ("window", "too large", "GiB")),
    Case("hybrid", "step: window = 10**15", lambda: _hybrid().step(
        None, Q[:, :, 0], K[:, :, 0], V[:, :, 0], window=10**15), ValueError,
         ("window", "too large")),
    Case("hybrid", "window = -1", lambda: _hybrid().attention(Q, K, V, window=-1), ValueError,
         ("window", ">= 0", "-1")),
    Case("hybrid", "window = 1.5", lambda: _hybrid().attention(Q, K, V, window=1.5), TypeError,
         ("window", "integer", "float")),
    Case("hybrid", "window = True", lambda: _hybrid().attention(Q, K, V, window=True),
         TypeError, ("window", "integer", "bool")),
    Case("hybrid", "initial_state an array", lambda: _hybrid().attention(
        Q, K, V, window=2, initial_state=np.zeros(3)), TypeError, ("initial_state", "tuple")),
    Case("hybrid", "step: state of one array", lambda: _hybrid().step(
        (np.zeros(3),), Q[:, :, 0], K[:, :, 0], V[:, :, 0], window=2), TypeError,
         ("state", "6 arrays")),
    Case("hybrid", "q of rank 3", lambda: _hybrid().attention(Q[0], K[0], V[0], window=2),
         ValueError, ("q", "4 dimensions", "(2, 4, 3)"), value=True),
    Case("hybrid", "v with fewer tokens", lambda: _hybrid().attention(
        Q, K, V[:, :, :2], window=2), ValueError, ("v", "(1, 2, 2, 3)")),
    Case("hybrid", "step: q_t of rank 4", lambda: _hybrid().step(None, Q, K, V, window=2),
         ValueError, ("q_t", "3 dimensions", "(1, 2, 4, 3)"), value=True),
    Case("hybrid", "q on the meta device", lambda: _hybrid(backends=("torch",)).attention(
        _tensor(Q).to("meta"), _tensor(K), _tensor(V), window=2), ValueError, ("q", "meta")),
    Case("hybrid", "attention returns only out", lambda: R(
        _hybrid(), attention=lambda q, k, v, *, window, initial_state=None: v).attention(
        Q, K, V, window=2), TypeError, ("attention", "pair (out, state)", "one array")),
    Case("hybrid", "step returns (o_t, state)", lambda: R(
        _hybrid(), step=lambda s, q, k, v, *, window: _unchecked(_hybrid().step)(
            s, q, k, v, window=window)[::-1]).step(None, Q[:, :, 0], K[:, :, 0], V[:, :, 0],
                                                   window=2),
         TypeError, ("step", "(state, o_t)", "swapped")),
]

# ------------------------------------------------------------------------------- model
_MODEL_FIELDS = [
    ({"vocab_size": 1}, ValueError, ("vocab_size", "at least 2")),
    ({"vocab_size": 2.0}, TypeError, ("vocab_size", "int")),
    ({"max_len": 3}, ValueError, ("max_len", "at least 4")),
    ({"init_scales": ()}, TypeError, ("init_scales", "non-empty")),
    ({"init_scales": (0,)}, ValueError, ("init_scales", "positive", "0")),
    ({"init_scales": (4.0, 1.0)}, ValueError, ("init_scales", "rise")),
    ({"init_scales": (1.0, float("inf"))}, ValueError, ("init_scales", "finite", "inf")),
    ({"init_scales": (float("nan"),)}, ValueError, ("init_scales", "nan")),
    ({"init_scales": 1.0}, TypeError, ("init_scales", "tuple")),
    ({"chunk_sizes": (0,)}, ValueError, ("chunk_sizes", ">= 1")),
    ({"chunk_sizes": 4}, TypeError, ("chunk_sizes", "tuple")),
    ({"conv_window": 1}, ValueError, ("conv_window", "at least 2")),
    ({"conv_window": 2.5}, TypeError, ("conv_window", "int")),
    ({"known_failures": {"test_nope": "x"}}, ValueError, ("known_failures", "test_nope")),
    ({"known_failures": {"test_partition_of_unity": "x"}}, ValueError,
     ("known_failures", "attention targets")),
    ({"call_seconds": -1}, ValueError, ("call_seconds", "positive", "-1")),
    ({"claims": frozenset({"nope"})}, ValueError, ("claims", "nope", "left_padding")),
    ({"step": None}, ValueError, ("step", "prefill")),
    ({"build": None}, TypeError, ("build", "callable")),
    ({"forward": 3}, TypeError, ("forward", "callable")),
    ({"copy_cache": lambda c: c, "extend": None}, ValueError, ("copy_cache", "extend")),
    ({"padded": None}, ValueError, ("claims", "padding", "padded")),
]
MODEL = [Case("model", f"ModelTarget {_label(c)}", (lambda c=c: R(_model(), **c)), exc, words)
         for c, exc, words in _MODEL_FIELDS]


# ------------------------------------------------------------------------------- the probe
def _build_float32(seed, *, init_scale, dtype):
    return _model().build(seed, init_scale=init_scale, dtype="float32")


def _meta_state(q, k, v, g, *, initial_state=None, seed=0):
    out, state = _unchecked(_torch_scalar().stateful)(q, k, v, g, initial_state=initial_state,
                                                      seed=seed)
    return out, tuple(s.to("meta") for s in state)


def _hybrid_meta(q, k, v, *, window, initial_state=None):
    out, state = _unchecked(_hybrid(backends=("torch",)).attention)(
        q, k, v, window=window, initial_state=initial_state)
    return out, tuple(s.to("meta") for s in state)


PROBE = [
    Case("probe", "model: build ignores dtype", lambda: _probe(R(_model(), build=_build_float32)),
         ValueError, ("build", "dtype", "float64", "float32")),
    Case("probe", "model: build takes no dtype", lambda: _probe(R(
        _model(), build=lambda seed, *, init_scale: None)), ValueError,
         ("build", "dtype", "signature")),
    Case("probe", "model: vocab_size one too many", lambda: _probe(R(
        _model(), vocab_size=_model().vocab_size + 1)), ValueError, ("forward", "shape")),
    Case("probe", "gated: chunked without chunk_size", lambda: _probe(R(
        _gated(), chunked=lambda q, k, v, g, *, initial_state=None, seed=0: (v, ()))),
         ValueError, ("chunked", "chunk_size", "signature")),
    Case("probe", "gated: a state on the meta device", lambda: _probe(R(
        _torch_scalar(), stateful=_meta_state)), ValueError, ("stateful", "meta")),
    Case("probe", "hybrid: a state on the meta device", lambda: _probe(R(
        _hybrid(backends=("torch",)), attention=_hybrid_meta)), ValueError,
         ("attention", "meta")),
    Case("probe", "hybrid: attention without window", lambda: _probe(R(
        _hybrid(), attention=lambda q, k, v, *, initial_state=None: (v, ()))), ValueError,
         ("attention", "window", "signature")),
    Case("probe", "hybrid: step without window", lambda: _probe(R(
        _hybrid(), step=lambda s, q, k, v: (s, v))), ValueError, ("step", "window")),
    Case("probe", "gated: fixed_log_gates growing", lambda: _probe(R(
        _gated("scalar_fixed"), fixed_log_gates=lambda h: np.full(h, 0.1))), ValueError,
         ("fixed_log_gates", "≤ 0")),
    Case("probe", "gated: chunked returns only out", lambda: _probe(
        _returns("chunked", lambda o, s: o)), ValueError, ("chunked", "pair")),
]


# ------------------------------------------------------------------------- the HF helper
def _hf(**kw) -> Callable[[], object]:
    def call():
        from kernel_verify.adapters.hf_models import hf_model_target

        args = {"name": "hf", "make": lambda: None, "vocab_size": 64} | kw
        return hf_model_target(args.pop("name"), args.pop("make"), **args)
    return call


HF = [
    Case("hf_models", "make=3", _hf(make=3), TypeError, ("make", "callable", "int")),
    Case("hf_models", "cache_arg='cache_args'", _hf(cache_arg="cache_args"), ValueError,
         ("cache_arg", "'cache_args'", "past_key_values")),
    Case("hf_models", "cache_arg=1", _hf(cache_arg=1), TypeError, ("cache_arg", "1")),
    Case("hf_models", "packed_arg=''", _hf(packed_arg=""), ValueError, ("packed_arg", "''")),
    Case("hf_models", "packed_arg=3", _hf(packed_arg=3), TypeError, ("packed_arg", "3")),
    Case("hf_models", "generate='yes'", _hf(generate="yes"), TypeError, ("generate", "bool")),
    Case("hf_models", "serving=1", _hf(serving=1), TypeError, ("serving", "bool")),
    Case("hf_models", "zero_std=0", _hf(zero_std=0), ValueError, ("zero_std", "> 0")),
    Case("hf_models", "zero_std='0.1'", _hf(zero_std="0.1"), TypeError,
         ("zero_std", "number", "'0.1'")),
    Case("hf_models", "known_failures=[...]", _hf(known_failures=["test_x"]), TypeError,
         ("known_failures", "mapping")),
    Case("hf_models", "claims='left_padding' (a str)", _hf(claims="left_padding"), TypeError,
         ("claims", "set", "'left_padding'")),
    Case("hf_models", "claims={'left_pading'}", _hf(claims=frozenset({"left_pading"})),
         ValueError, ("claims", "left_pading", "left_padding")),
    Case("hf_models", "chunk_sizes=4", _hf(chunk_sizes=4), TypeError,
         ("chunk_sizes", "tuple", "4")),
    Case("hf_models", "chunk_sizes='4'", _hf(chunk_sizes="4"), TypeError,
         ("chunk_sizes", "tuple", "'4'")),
    Case("hf_models", "padded_prefill without left_padding", _hf(padded_prefill=True),
         ValueError, ("padded_prefill", "left_padding")),
    Case("hf_models", "vocab_size=0", _hf(vocab_size=0), ValueError, ("vocab_size", ">= 1")),
    Case("hf_models", "name=''", _hf(name=""), TypeError, ("name", "non-empty")),
    Case("hf_models", "init_scales=(0,)", _hf(init_scales=(0,)), ValueError,
         ("init_scales", "positive")),
    Case("hf_models", "max_len='12'", _hf(max_len="12"), TypeError, ("max_len", "int")),
]


# ---------------------------------------------------------------------------- command line
class _Started(Exception):
    """A stubbed subcommand's work was reached: the bad input was accepted."""


#: The functions that do each subcommand's work, stubbed while the sweep runs: a bad input that
#: reaches one was accepted (and nothing long runs or rewrites a report).
_WORK = ("kernel_verify.api.run_suite", "kernel_verify.api._run_in_process",
         "kernel_verify.mutants.runner.run_mutants", "kernel_verify.calibration.calibrate",
         "kernel_verify.calibration.power.run_power",
         "kernel_verify.adapters.conformance.run_conformance",
         "kernel_verify.report.main.run_report", "kernel_verify.fingerprints.refresh")


def _started(*args: object, **kwargs: object) -> None:
    raise _Started(f"{args!r:.80} {kwargs!r:.160}")


class CliResult(Exception):
    """What one command line run gave: exit status, stdout, stderr (raised so that a row's
    call ends in an exception like every other row's)."""

    def __init__(self, code: object, out: str, err: str) -> None:
        super().__init__(err.strip())
        self.code, self.out, self.err = code, out, err


def _cli(*argv: str) -> Callable[[], object]:
    def call():
        from kernel_verify.cli import main

        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = main(list(argv))
            except SystemExit as exc:
                code = exc.code
        raise CliResult(code, out.getvalue(), err.getvalue())
    call.argv = argv  # type: ignore[attr-defined]
    return call


_HERE = Path(__file__).resolve()
_ADAPTER = "tests.known_adapters:known"
CLI = [
    Case("cli", "no subcommand", _cli(), CliResult, ("COMMAND",)),
    Case("cli", "gpu (not a subcommand: python -m tools.gpu.run)", _cli("gpu"), CliResult,
         ("invalid choice", "'gpu'")),
    Case("cli", "check without TARGET", _cli("check"), CliResult, ("target",)),
    Case("cli", "check ''", _cli("check", ""), CliResult, ("target", "module:attribute")),
    Case("cli", "check nocolon", _cli("check", "nocolon"), CliResult,
         ("target", "module:attribute", "'nocolon'")),
    Case("cli", "check a module that does not exist", _cli("check", "kv_no_such_mod:t"),
         CliResult, ("kv_no_such_mod", "No module")),
    Case("cli", "check an attribute that does not exist", _cli("check", "tests.known_adapters:x"),
         CliResult, ("no attribute", "'x'")),
    Case("cli", "check -k ''", _cli("check", _ADAPTER, "-k", ""), CliResult,
         ("-k", "empty")),
    Case("cli", "check -k ' '", _cli("check", _ADAPTER, "-k", " "), CliResult,
         ("-k", "empty")),
    Case("cli", "check --json ''", _cli("check", _ADAPTER, "--json", ""), CliResult,
         ("--json", "empty")),
    Case("cli", "check --jobs -1", _cli("check", _ADAPTER, "--jobs", "-1"), CliResult,
         ("--jobs", ">= 1")),
    Case("cli", "check --max-examples 0", _cli("check", _ADAPTER, "--max-examples", "0"),
         CliResult, ("--max-examples", ">= 1")),
    Case("cli", "check --max-examples abc", _cli("check", _ADAPTER, "--max-examples", "abc"),
         CliResult, ("--max-examples", "integer", "'abc'")),
    Case("cli", "check --shrink-seconds 1.5", _cli("check", _ADAPTER, "--shrink-seconds", "1.5"),
         CliResult, ("--shrink-seconds", "integer")),
    Case("cli", "check --profile ''", _cli("check", _ADAPTER, "--profile", ""), CliResult,
         ("--profile", "''", "dev")),
    Case("cli", "list --kind bogus", _cli("list", "--kind", "bogus"), CliResult,
         ("--kind", "'bogus'", "feature_map")),
    Case("cli", "list --family ''", _cli("list", "--family", ""), CliResult,
         ("family", "''", "softmax")),
    Case("cli", "list --d 0", _cli("list", "--d", "0"), CliResult, ("--d", ">= 1")),
    Case("cli", "report --out ''", _cli("report", "--out", ""), CliResult, ("--out", "empty")),
    Case("cli", "report --maps a", _cli("report", "--maps", "a"), CliResult,
         ("--maps", "'a'")),
    Case("cli", "mutants --json ''", _cli("mutants", "--json", ""), CliResult,
         ("--json", "empty")),
    Case("cli", "mutants --only x ''", _cli("mutants", "--only", "causal_flag_ignored", ""),
         CliResult, ("--only", "empty name")),
    Case("cli", "mutants --jobs x", _cli("mutants", "--jobs", "x"), CliResult,
         ("--jobs", "integer")),
    Case("cli", "calibrate --seeds abc", _cli("calibrate", "--seeds", "abc"), CliResult,
         ("--seeds", "integer")),
    Case("cli", "calibrate --seeds 19", _cli("calibrate", "--seeds", "19"), CliResult,
         ("--seeds", ">= 20")),
    Case("cli", "calibrate --part power ''", _cli("calibrate", "--part", "power", ""),
         CliResult, ("--part", "invalid choice")),
    Case("cli", "calibrate --jobs -2", _cli("calibrate", "--jobs", "-2"), CliResult,
         ("--jobs", ">= 1")),
    Case("cli", "conformance --out ''", _cli("conformance", "--out", ""), CliResult,
         ("--out", "empty")),
    Case("cli", "conformance --profile ''", _cli("conformance", "--profile", ""), CliResult,
         ("--profile", "''")),
    Case("cli", "conformance ' '", _cli("conformance", " "), CliResult,
         ("LIBRARY", "empty name")),
    Case("cli", "conformance --quick into the committed pages",
         _cli("conformance", "sklearn", "--quick"), CliResult,
         ("--quick", "committed", "--out")),
    Case("cli", "conformance --out a file", _cli("conformance", "--out", str(_HERE)), CliResult,
         ("--out", "is a file")),
    Case("cli", "reports nosuch.md", _cli("reports", "nosuch.md"), CliResult,
         ("REPORT", "'nosuch.md'", "reports/power.md")),
    Case("cli", "reports ''", _cli("reports", ""), CliResult, ("REPORT", "empty name")),
    Case("cli", "reports --stale --refresh", _cli("reports", "--stale", "--refresh"), CliResult,
         ("--refresh", "--stale")),
]


def _gpu_run(*argv: str) -> Callable[[], object]:
    """``python -m tools.gpu.run`` (the prepared GPU run): its argument checks only."""
    def call():
        from tools.gpu.run import _args

        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                _args(list(argv))
            except SystemExit as exc:
                raise CliResult(exc.code, out.getvalue(), err.getvalue()) from None
        raise _Started(f"tools.gpu.run {argv} parsed")
    return call


GPU = [
    Case("gpu run", "--budget 0", _gpu_run("--budget", "0"), CliResult, ("--budget", "> 0")),
    Case("gpu run", "--rounds 0", _gpu_run("--rounds", "0"), CliResult, ("--rounds", ">= 1")),
    Case("gpu run", "--rounds x", _gpu_run("--rounds", "x"), CliResult, ("--rounds", "'x'")),
    Case("gpu run", "--alpha 1", _gpu_run("--alpha", "1"), CliResult, ("--alpha", "(0, 1)")),
    Case("gpu run", "--only ''", _gpu_run("--only", ""), CliResult, ("--only",)),
    Case("gpu run", "--device tpu", _gpu_run("--device", "tpu"), CliResult,
         ("--device", "'tpu'")),
    Case("gpu run", "--gate-budget over --budget", _gpu_run("--budget", "10", "--gate-budget",
                                                             "20"), CliResult,
         ("--gate-budget", "--budget")),
    Case("gpu run", "--base-tree that is no folder", _gpu_run("--base-tree", str(_HERE)),
         CliResult, ("tree", "not a folder")),
]


# --------------------------------------------------------------------------- pytest plugin
def _plugin(*argv: str) -> Callable[[], object]:
    """``pytest --kv-target …`` in a subprocess from an empty folder."""
    def call():
        import subprocess
        import tempfile

        with tempfile.TemporaryDirectory(prefix="kv-sweep-") as tmp:
            proc = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider",
                                   "-q", *argv], cwd=tmp, capture_output=True, text=True,
                                  timeout=300, check=False)
        raise CliResult(proc.returncode, "", proc.stdout + proc.stderr)
    return call


PLUGIN = [
    Case("plugin", "--kv-target nocolon", _plugin("--kv-target", "nocolon"), CliResult,
         ("--kv-target", "module:attribute", "'nocolon'")),
    Case("plugin", "--kv-target ''", _plugin("--kv-target", ""), CliResult,
         ("--kv-target", "empty")),
]

CASES: list[Case] = [*API, *ATTENTION, *GATED_FIELDS, *GATED_CALLS, *HYBRID, *MODEL, *PROBE,
                     *HF, *CLI, *GPU, *PLUGIN]


# --------------------------------------------------------------------------- classification
def classify(case: Case) -> tuple[str, str]:
    """(kind, what happened) of one row (module docstring); the work of every subcommand and of
    ``check`` is stubbed meanwhile (:data:`_WORK`)."""
    try:
        with contextlib.ExitStack() as stack:
            for name in _WORK:
                stack.enter_context(mock.patch(name, _started))
            result = case.call()
    except _Started as ran:
        return "accepted", f"the work started: {ran}"
    except CliResult as res:
        return _classify_cli(case, res)
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException as err:  # any error is classified
        message = f"{type(err).__name__}: {err}"
        if case.exc is None or not isinstance(err, case.exc):
            return "unclear", f"{message} (expected {getattr(case.exc, '__name__', None)})"
        missing = [w for w in case.words if w not in str(err)]
        if missing:
            return "unclear", f"{message} (missing {missing})"
        return "clear", message
    return ("wrong value" if case.value else "accepted"), f"returned {type(result).__name__}"


def _classify_cli(case: Case, res: CliResult) -> tuple[str, str]:
    """``kernel-verify`` and the plugin: one line on stderr (the plugin: pytest's status 4 for a
    usage error). ``python -m tools.gpu.run`` keeps
    argparse's usage block above its one error line: the last line is the error there."""
    lines = res.err.strip().splitlines()
    what = f"exit {res.code}; stdout {res.out.strip()[:80]!r}; stderr {res.err.strip()[-300:]!r}"
    if case.surface == "gpu run":
        lines = lines[-1:] if lines and lines[-1].startswith("python -m tools.gpu.run: error: ") \
            else lines
    # pytest's own status for a usage error is 4 (pytest.ExitCode.USAGE_ERROR), not 2
    status = 4 if case.surface == "plugin" else 2
    if res.code != status or res.out.strip() or len(lines) != 1 or "Traceback" in res.err:
        return "unclear", what
    missing = [w for w in case.words if w not in lines[0]]
    if missing:
        return "unclear", f"{what} (missing {missing})"
    return "clear", what


def _param(case: Case):
    marks = [pytest.mark.xfail(strict=True, reason=case.open)] if case.open else []
    return pytest.param(case, id=f"{case.surface}: {case.label}", marks=marks)


@pytest.mark.parametrize("case", [_param(c) for c in CASES])
def test_bad_input_is_a_clear_error(case: Case) -> None:
    kind, what = classify(case)
    assert kind == "clear", f"{kind}: {what}"


def test_the_table_covers_every_surface_and_transition() -> None:
    """Every surface has rows, and every transition of the recurrent protocol is called."""
    from kernel_verify.impls.systems import TRANSITIONS

    surfaces = {c.surface for c in CASES}
    assert surfaces == {"api", "attention", "feature_map", "random_matrix", "kernel_approx",
                        "gated", "hybrid", "model", "probe", "hf_models", "cli", "gpu run",
                        "plugin"}
    labels = " ".join(c.label for c in CASES if c.surface == "gated")
    for transition in TRANSITIONS:
        if transition != "decay":
            assert transition in labels, transition
    commands = {c.call.argv[0] for c in CLI if getattr(c.call, "argv", ())}
    assert commands == {"check", "list", "report", "mutants", "calibrate", "conformance",
                        "reports", "gpu"}


def test_a_classification_can_fail() -> None:
    """The classifier is not vacuous: an accepted input, a wrong class and a missing word."""
    assert classify(Case("x", "ok", lambda: 1, ValueError, ()))[0] == "accepted"
    assert classify(Case("x", "v", lambda: 1, ValueError, (), value=True))[0] == "wrong value"
    assert classify(Case("x", "c", lambda: int("a"), TypeError, ()))[0] == "unclear"
    assert classify(Case("x", "w", lambda: int("a"), ValueError, ("zzz",)))[0] == "unclear"
    assert classify(Case("x", "y", lambda: int("a"), ValueError, ("invalid",)))[0] == "clear"
    assert classify(Case("cli", "ok", _cli("list", "--kind", "model"), CliResult, ()))[0] == \
        "unclear"  # exit 0 with a table on stdout: not a usage error


def counts() -> dict[str, Counter]:
    """Kind counts per surface (and ``all``), with every row that is not clear printed."""
    table: dict[str, Counter] = {}
    for case in CASES:
        kind, what = classify(case)
        table.setdefault(case.surface, Counter())[kind] += 1
        table.setdefault("all", Counter())[kind] += 1
        if kind != "clear":
            print(f"  {kind:11s} {case.surface}: {case.label}: {what[:400]}")
    return table


if __name__ == "__main__":
    found = counts()
    print(f"{len(CASES)} rows")
    for surface, c in found.items():
        print(f"{surface:12s} " + ", ".join(f"{k} {c[k]}" for k in KINDS))
