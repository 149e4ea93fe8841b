"""The public API, fuzzed with bad input (issue 13).

Entry points are **enumerated, not listed**: every registry entry's functions (``numpy_fn``,
``torch_fn``, the log-feature functions, ``draw``) and :func:`feature_map_attention` /
:func:`map_features` with every entry on both backends, and every function in the ``__all__``
of every public module of ``kernel_verify.impls`` whose parameters all have a recipe below
(recipes are keyed by parameter *name*, the project's conventions: ``q, k, v, x, X, K, d, m,
rank, n_landmarks, scale, causal, …``). A new map or a new conventional function is covered
without editing this file; a function with an unknown parameter name fails
:func:`test_every_public_function_is_fuzzed_or_excused` until it gets a recipe (or a stated
reason in :data:`EXCUSED`).

Each example mutates **one** argument of a valid call into a bad value (NaN, ±Inf, an integer,
complex or boolean dtype, a list, the other backend, a wrong rank or last dimension, a
mismatched dtype; NaN/Inf/0/negative/bool/str scalars; missing, unknown or non-mapping configs
and params) and requires a ``ValueError``/``TypeError`` whose message names the argument. The
only inputs allowed to give a result are declared ones whose correct result is known (a map's
*name* instead of its entry: the result must equal the entry's, bit for bit). Anything else —
a returned value (a wrong number), another exception type, a message naming another argument —
fails the property.

``CI=true pytest tests/test_fuzz_api.py -n 0 -s`` prints the number of entry points and of
bad-input cases generated.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import kernel_verify.impls as impls_pkg
from kernel_verify.impls import attention as attention_mod
from kernel_verify.impls.registry import FeatureMap, all_maps
from kernel_verify.impls.torch.convert import to_torch

# Modules of kernel_verify.impls that are not public API (helpers called by the entry points,
# which are themselves fuzzed through those entry points), with the reason.
INTERNAL_MODULES = {
    "kernel_verify.impls.validation": "the checks themselves (exercised by every entry point)",
    "kernel_verify.impls.attention_checks": "argument checks of the attention functions",
    "kernel_verify.impls.registry": "the registry; its entries are enumerated below",
    "kernel_verify.impls.torch.convert": "dtype policy helpers used by the torch maps",
    "kernel_verify.impls.forms_checks": "argument checks of the forms of causal attention",
    "kernel_verify.impls.sequence_validation": "checks of cu_seqlens, masks and per-sequence "
    "states (exercised through the forms' cu_seqlens and the targets' varlen/padded below)",
    "kernel_verify.impls.packed": "runs packed sequences through a form (the forms' cu_seqlens)",
}
# Public functions that the recipes cannot drive, with the reason (kept short on purpose).
EXCUSED = {
    "draw_fastfood": "parameter draw of the learned Fastfood map; fuzzed through its registry "
    "entry's draw",
    "fastfood_matrix": "builds a matrix from a Fastfood draw; fuzzed through the map",
    "fastfood_learned_params": "config -> parameters of a learned map; fuzzed through the map",
    "generative_frequencies": "internal stage of the generative map; fuzzed through the map",
    "generative_params": "config -> parameters of a learned map; fuzzed through the map",
    "gmm_frequencies": "internal stage of the GMM maps; fuzzed through the maps",
    "gmm_params": "config -> parameters of a learned map; fuzzed through the maps",
    "hedgehog_weights": "config -> weights of the Hedgehog map; fuzzed through the map",
    "hedgehog_values": "params/config -> weights of the Hedgehog map; fuzzed through the map",
    "gmm_values": "params/config -> mixture of the GMM maps; fuzzed through the maps",
    "generative_values": "params/config -> weights of the generative map; fuzzed through the map",
    "factors_matrix": "explicit matrix of a draw_factors result (a dataclass, not user input); "
    "checked against draw_matrix in tests/test_structured.py",
    "structured_projections": "applies a draw_factors result with the fast Walsh-Hadamard "
    "transform; checked against the explicit matrix in tests/test_structured.py",
    "radices": "an internal factorisation of a power of two (p from the draw, not user input)",
    "draw_hedgehog": "Hedgehog's parameter draw; fuzzed through its registry entry's draw",
    "math_section": "the docs/math.md sections a registry source string cites; checked by "
    "tests/test_math_citations.py",
    "draw_generative": "the generative map's parameter draw; fuzzed through its registry "
    "entry's draw",
    "draw_gmm": "the GMM maps' parameter draw (one per tag); fuzzed through their registry "
    "entries' draw",
    "check_order": "a validator (name, value)",
    "check_perm": "a validator of a permutation array",
    "check_positions": "a validator of cosFormer positions; fuzzed through the map",
    "resolve_entry": "the entry argument of feature_map_attention/map_features (fuzzed there)",
    "trig_overflow_remedy": "builds the text of an error message",
    "pinv_cutoff": "eigenvalues of a PSD block from eigh (internal to psd_pinv, fuzzed there)",
    "kernel_gram": "kernel argument is a name, an entry or a callable; covered in test_nystrom",
    "nystrom": "kernel argument is a name, an entry or a callable; covered in test_nystrom",
    "identifier": "a registry name -> its identifier form; every registered name and the "
    "refusals in tests/test_names.py",
    "from_identifier": "the inverse of identifier; tests/test_names.py",
    "split_name": "a registry name -> (family, variant); tests/test_names.py",
}
BAD_EXC = (ValueError, TypeError)
STATS = {"entry_points": 0, "cases": 0}


# --- contexts and recipes ------------------------------------------------------------------


@dataclass
class Ctx:
    """What a valid call is built from: backend, sizes, a seeded generator."""

    backend: str
    n: int
    d: int
    m: int
    rng: np.random.Generator
    dtype: Any = np.float64

    def arr(self, a: np.ndarray) -> Any:
        return torch.as_tensor(a) if self.backend == "torch" else a


@dataclass(frozen=True)
class Recipe:
    """A parameter kind: how to build a good value and which bad values apply."""

    good: Callable[[Ctx], Any]
    kind: str  # "array", "count", "real", "flag", "choice", "rng", "indices"
    last_dim: bool = False  # the last dimension is tied to another argument
    min_value: int = 1  # counts: the smallest valid value


def _arr(shape_fn: Callable[[Ctx], tuple[int, ...]], positive: bool = False):
    def good(c: Ctx) -> Any:
        a = c.rng.standard_normal(shape_fn(c))
        return c.arr(np.exp(a) if positive else a)

    return good


def _psd(c: Ctx) -> Any:
    a = c.rng.standard_normal((c.n, c.n + 1))
    return c.arr(a @ a.T + np.eye(c.n))


RECIPES: dict[str, Recipe] = {
    "x": Recipe(_arr(lambda c: (2, c.n, c.d)), "array", last_dim=True),
    "q": Recipe(_arr(lambda c: (2, c.n, c.d)), "array", last_dim=True),
    "k": Recipe(_arr(lambda c: (2, c.n, c.d)), "array", last_dim=True),
    "v": Recipe(_arr(lambda c: (2, c.n, 3)), "array"),
    "phi_q": Recipe(_arr(lambda c: (2, c.n, c.m), positive=True), "array", last_dim=True),
    "phi_k": Recipe(_arr(lambda c: (2, c.n, c.m), positive=True), "array", last_dim=True),
    "log_phi_q": Recipe(_arr(lambda c: (2, c.n, c.m)), "array", last_dim=True),
    "log_phi_k": Recipe(_arr(lambda c: (2, c.n, c.m)), "array", last_dim=True),
    "e_proj": Recipe(_arr(lambda c: (2, c.n)), "array", last_dim=True),
    "f_proj": Recipe(_arr(lambda c: (2, c.n)), "array", last_dim=True),
    "K": Recipe(_psd, "array", last_dim=True),
    "w": Recipe(_psd, "array", last_dim=True),
    "d": Recipe(lambda c: c.d, "count"),
    "m": Recipe(lambda c: c.m, "count"),
    "n": Recipe(lambda c: c.n, "count"),
    "rank": Recipe(lambda c: 1, "count"),
    "n_landmarks": Recipe(lambda c: 1, "count"),
    "n_segments": Recipe(lambda c: 1, "count"),
    "n_iter": Recipe(lambda c: 2, "count", min_value=0),
    "chunk_size": Recipe(lambda c: 2, "count"),
    "scale": Recipe(lambda c: 0.5, "real"),
    "sq_norm_sum": Recipe(lambda c: 1.0, "real"),
    "causal": Recipe(lambda c: False, "flag"),
    "rng": Recipe(lambda c: np.random.default_rng(0), "rng"),
    "kind": Recipe(lambda c: "iid", "choice"),
    "landmarks": Recipe(lambda c: np.array([0, c.n - 1]), "indices"),
    "zero_denominator": Recipe(lambda c: "raise", "choice"),
    # one token of the recurrent forms (impls/{numpy,torch}/forms.py) and their state
    "phi_q_t": Recipe(_arr(lambda c: (2, c.m), positive=True), "array", last_dim=True),
    "phi_k_t": Recipe(_arr(lambda c: (2, c.m), positive=True), "array", last_dim=True),
    "log_phi_q_t": Recipe(_arr(lambda c: (2, c.m)), "array", last_dim=True),
    "log_phi_k_t": Recipe(_arr(lambda c: (2, c.m)), "array", last_dim=True),
    "v_t": Recipe(_arr(lambda c: (2, 3)), "array"),
    "state": Recipe(lambda c: None, "state"),
    "initial_state": Recipe(lambda c: None, "state"),
}
#: Per-function overrides where a conventional name means something else.
OVERRIDES: dict[tuple[str, str], Recipe] = {
    ("gerf_constants", "a"): Recipe(lambda c: 0.1, "real"),
    ("iterative_pinv", "a"): Recipe(_psd, "array", last_dim=True),
    ("polynomial_dim", "p"): Recipe(lambda c: 2, "count", min_value=0),
    ("polynomial_indices", "p"): Recipe(lambda c: 2, "count", min_value=0),
    ("taylor_dim", "order"): Recipe(lambda c: 2, "count", min_value=0),
    ("mixture_layout", "c"): Recipe(lambda c: 1, "count"),
    ("truncated_svd", "K"): Recipe(_psd, "array"),  # any (m, n) matrix
    ("draw_factors", "kind"): Recipe(lambda c: "sorf", "choice"),
    ("get_system", "name"): Recipe(lambda c: "nystrom", "choice"),
    ("all_systems", "kind"): Recipe(lambda c: "attention", "choice"),
    ("segment_means", "x"): Recipe(_arr(lambda c: (2, c.n, c.d)), "array"),  # any d
}
#: Names a message may use for an argument (besides the argument's own name).
ALIASES = {"e_proj": ("E",), "f_proj": ("F",), "sq_norm_sum": ("sq_norm",)}


def _recipe(fn_name: str, param: str) -> Recipe | None:
    return OVERRIDES.get((fn_name, param), RECIPES.get(param))


# --- bad values ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Bad:
    label: str
    make: Callable[[Any, Ctx], Any]


def _np(x: Any) -> np.ndarray:
    return x.numpy() if isinstance(x, torch.Tensor) else np.asarray(x)


def _with_value(value: float) -> Callable[[Any, Ctx], Any]:
    def make(x: Any, c: Ctx) -> Any:
        a = _np(x).copy()
        a.reshape(-1)[c.rng.integers(a.size)] = value
        return c.arr(a)

    return make


def _astype(dtype: Any) -> Callable[[Any, Ctx], Any]:
    return lambda x, c: c.arr((_np(x) * 3).astype(dtype))


def _other_backend(x: Any, c: Ctx) -> Any:
    return _np(x) if c.backend == "torch" else torch.as_tensor(x)


def _grow_last(x: Any, c: Ctx) -> Any:
    a = _np(x)
    return c.arr(np.concatenate([a, a[..., :1]], axis=-1))


ARRAY_BAD = [
    Bad("nan", _with_value(np.nan)),
    Bad("+inf", _with_value(np.inf)),
    Bad("-inf", _with_value(-np.inf)),
    Bad("int64", _astype(np.int64)),
    Bad("complex", _astype(np.complex128)),
    Bad("bool", lambda x, c: c.arr(_np(x) > 0)),
    Bad("list", lambda x, c: _np(x).tolist()),
    Bad("other backend", _other_backend),
    Bad("rank 1", lambda x, c: c.arr(_np(x).reshape(-1))),
]
LAST_DIM_BAD = [Bad("last dim + 1", _grow_last)]
MISMATCH_BAD = [Bad("float32 among float64", _astype(np.float32))]
COUNT_BAD = [Bad("-1", lambda x, c: -1), Bad("bool", lambda x, c: True),
             Bad("float", lambda x, c: 2.5), Bad("str", lambda x, c: "3"),
             Bad("None", lambda x, c: None), Bad("nan", lambda x, c: float("nan"))]
ZERO_BAD = [Bad("0", lambda x, c: 0)]
REAL_BAD = [Bad("nan", lambda x, c: float("nan")), Bad("inf", lambda x, c: float("inf")),
            Bad("-inf", lambda x, c: -float("inf")), Bad("bool", lambda x, c: True),
            Bad("str", lambda x, c: "0.5"), Bad("array", lambda x, c: np.ones(2))]
POSITIVE_REAL_BAD = [Bad("0", lambda x, c: 0.0), Bad("-1", lambda x, c: -1.0)]
FLAG_BAD = [Bad("int", lambda x, c: 1), Bad("str", lambda x, c: "yes"),
            Bad("None", lambda x, c: None)]
CHOICE_BAD = [Bad("unknown", lambda x, c: "bogus"), Bad("int", lambda x, c: 3)]
RNG_BAD = [Bad("int seed", lambda x, c: 3), Bad("None", lambda x, c: None)]
INDEX_BAD = [Bad("out of range", lambda x, c: np.array([0, c.n])),
             Bad("negative", lambda x, c: np.array([-1, 0])),
             Bad("duplicate", lambda x, c: np.array([0, 0])),
             Bad("float", lambda x, c: np.array([0.0, 1.0])),
             Bad("empty", lambda x, c: np.array([], dtype=int)),
             Bad("2-D", lambda x, c: np.array([[0, 1]]))]
POSITIVE_REALS = {"scale", "sigma"}
#: A state of the forms is None (empty) or a pair of arrays of the inputs' shapes.
STATE_BAD = [Bad("int", lambda x, c: 3), Bad("one array", lambda x, c: (c.arr(np.zeros(2)),)),
             Bad("wrong shapes", lambda x, c: (c.arr(np.zeros((3, c.m + 1))),
                                               c.arr(np.zeros((3, c.m + 1, 2))))),
             Bad("nan", lambda x, c: (c.arr(np.full((2, c.m), np.nan)),
                                      c.arr(np.full((2, c.m), np.nan))))]


def bad_values(fn_name: str, param: str, recipe: Recipe, n_arrays: int) -> list[Bad]:
    """The bad values of one parameter (only values that are invalid in every context)."""
    if recipe.kind == "array":
        out = ARRAY_BAD + (LAST_DIM_BAD if recipe.last_dim else [])
        return out + (MISMATCH_BAD if n_arrays > 1 else [])
    if recipe.kind == "count":
        return COUNT_BAD + (ZERO_BAD if recipe.min_value >= 1 else [])
    if recipe.kind == "real":
        return REAL_BAD + (POSITIVE_REAL_BAD if param in POSITIVE_REALS else [])
    return {"flag": FLAG_BAD, "choice": CHOICE_BAD, "rng": RNG_BAD,
            "indices": INDEX_BAD, "state": STATE_BAD}[recipe.kind]


# --- entry points --------------------------------------------------------------------------


@dataclass(frozen=True)
class Case:
    """One argument to break: its name (as messages should name it) and its bad values."""

    arg: str
    bads: tuple[Bad, ...]
    names: tuple[str, ...] = ()  # words any of which the message must contain


@dataclass(frozen=True)
class EntryPoint:
    """A callable and how to build a valid call of it for a context."""

    id: str
    call: Callable[[dict[str, Any]], Any]
    build: Callable[[Ctx], dict[str, Any]]
    cases: tuple[Case, ...]
    backend: str
    min_d: int = 1
    min_m: int = 1
    #: "arg:label" of bad values that may instead give the result of the valid call, exactly
    equal_if_accepted: frozenset[str] = frozenset()


def _config_cases(entry: FeatureMap) -> list[Case]:
    """config: {}, an unknown key, a non-mapping; each numeric value NaN/Inf/bool/str."""
    cases = [Case("config", (
        Bad("{}", lambda x, c: {}) if entry.config else Bad("list", lambda x, c: [("a", 1)]),
        Bad("unknown key", lambda x, c: {**x, "zz_unknown": 1.0}),
        Bad("not a mapping", lambda x, c: 42),
    ), ("config",))]
    for key, value in entry.config.items():
        if isinstance(value, bool) or not isinstance(value, int | float):
            continue
        bads = [Bad(f"{key}=nan", lambda x, c, k=key: {**x, k: float("nan")}),
                Bad(f"{key}=inf", lambda x, c, k=key: {**x, k: float("inf")}),
                Bad(f"{key}=True", lambda x, c, k=key: {**x, k: True}),
                Bad(f"{key}='1'", lambda x, c, k=key: {**x, k: "1"})]
        cases.append(Case("config", tuple(bads), (key,)))
    return cases


def _params_cases(ctx_backend: str) -> list[Case]:
    def drop_one(x: Any, c: Ctx) -> Any:
        if not x:
            return 42
        key = sorted(x)[int(c.rng.integers(len(x)))]
        return {k: v for k, v in x.items() if k != key}

    def nan_one(x: Any, c: Ctx) -> Any:
        if not x:
            return 42
        key = sorted(x)[int(c.rng.integers(len(x)))]
        return {**x, key: _with_value(np.nan)(x[key], c)}

    bads = [Bad("missing key", drop_one), Bad("not a mapping", lambda x, c: 42),
            Bad("NaN value", nan_one)]
    if ctx_backend == "numpy":
        bads.append(Bad("torch values", lambda x, c: to_torch(x) if x else 42))
    return [Case("params", tuple(bads), ("params",))]


def _positions(entry: FeatureMap, c: Ctx) -> dict[str, Any]:
    if not entry.has("positional"):
        return {}
    return {"positions": np.arange(c.n) % (int(entry.config.get("M", c.n)) + 1)}


def _draw(entry: FeatureMap, c: Ctx, config: Any = None) -> dict[str, Any]:
    cfg = dict(entry.config if config is None else config)
    return entry.draw(np.random.default_rng(0), c.d, c.m, cfg)


def _map_fn_points() -> Iterator[EntryPoint]:
    from kernel_verify.impls.registry import no_params

    for entry in all_maps():
        fns = [("numpy_fn", entry.numpy_fn, "numpy"), ("torch_fn", entry.torch_fn, "torch"),
               ("log_numpy_fn", entry.log_numpy_fn, "numpy"),
               ("log_torch_fn", entry.log_torch_fn, "torch")]
        for attr, fn, backend in fns:
            if fn is None:
                continue

            def build(c: Ctx, e=entry) -> dict[str, Any]:
                p = _draw(e, c)
                return {"x": RECIPES["x"].good(c), "params": p, "config": dict(e.config),
                        **_positions(e, c)}

            def call(kw: dict[str, Any], f=fn) -> Any:
                kw = dict(kw)
                return f(kw.pop("x"), kw.pop("params"), kw.pop("config"), **kw)

            # x's last dimension is tied to the parameters only through a frequency matrix W
            # (other maps take any d: identity, polynomial, …, or derive weights from d).
            x_bads = bad_values("", "x", RECIPES["x"], 1)
            if "W" not in _draw(entry, Ctx("numpy", 2, 2, max(2, entry.min_m),
                                           np.random.default_rng(0))):
                x_bads = [b for b in x_bads if b not in LAST_DIM_BAD]
            config_cases = _config_cases(entry)
            cases = [Case("x", tuple(x_bads), ("x",)), *_params_cases(backend), *config_cases]
            # A parameter-free (config-free) map ignores ``params`` (``config``): its result is
            # then the correct one.
            ignored = (frozenset(f"params:{b.label}" for b in _params_cases(backend)[0].bads)
                       if entry.draw is no_params else frozenset())
            # The map functions read the config keys they need and validate those; the
            # config as a whole (unknown or missing keys) is validated by map_features and
            # feature_map_attention. A bad value of a key the map does not read is accepted
            # only if the result is exactly that of the valid call.
            ignored |= {f"config:{b.label}" for c in config_cases for b in c.bads
                        if b.label != "{}"}
            yield EntryPoint(f"{entry.name}.{attr}", call, build, tuple(cases), backend,
                             min_m=entry.min_m, equal_if_accepted=ignored)


def _draw_points() -> Iterator[EntryPoint]:
    from kernel_verify.impls.registry import no_params

    for entry in all_maps():
        if entry.draw is no_params:
            continue

        def build(c: Ctx, e=entry) -> dict[str, Any]:
            return {"rng": np.random.default_rng(0), "d": c.d, "m": c.m, "config": dict(e.config)}

        def call(kw: dict[str, Any], e=entry) -> Any:
            return e.draw(kw["rng"], kw["d"], kw["m"], kw["config"])

        cases = [Case("d", tuple(COUNT_BAD + ZERO_BAD), ("d",)),
                 Case("m", tuple(COUNT_BAD + ZERO_BAD), ("m",)),
                 Case("rng", tuple(RNG_BAD), ("rng",))]
        yield EntryPoint(f"{entry.name}.draw", call, build, tuple(cases), "numpy",
                         min_m=entry.min_m)


def _attention_points() -> Iterator[EntryPoint]:
    for entry in all_maps():
        for backend in ("numpy", "torch"):

            def build(c: Ctx, e=entry) -> dict[str, Any]:
                p = _draw(e, c)
                q = RECIPES["q"].good(c)
                # Signed maps (trigonometric, linear, …) can have denominators of any sign on
                # random inputs: "allow" divides by them (the identity-check policy).
                signed = {} if e.has("positive") or e.has("nonnegative") else {
                    "zero_denominator": "allow"}
                return {"entry": e, "params": p, "q": q, "k": RECIPES["k"].good(c),
                        "v": RECIPES["v"].good(c), "causal": False, "config": dict(e.config),
                        **signed, **_positions(e, c)}

            def call(kw: dict[str, Any]) -> Any:
                kw = dict(kw)
                return attention_mod.feature_map_attention(
                    kw.pop("entry"), kw.pop("params"), kw.pop("q"), kw.pop("k"), kw.pop("v"),
                    **kw)

            cases = [Case(a, tuple(bad_values("", a, RECIPES[a], 3)), (a,)) for a in "qkv"]
            cases += [Case("causal", tuple(FLAG_BAD), ("causal",)),
                      Case("entry", (Bad("name", lambda x, c: x.name),
                                     Bad("unknown name", lambda x, c: x.name + "_typo"),
                                     Bad("int", lambda x, c: 42)), ("entry", "feature map")),
                      *_params_cases(backend), *_config_cases(entry)]
            # A bad value of a config key the map does not read must leave the result exact.
            unread = {f"config:{b.label}" for c in cases[5:] if c.arg == "config"
                      and c.names != ("config",) for b in c.bads}
            yield EntryPoint(f"feature_map_attention[{entry.name}, {backend}]", call, build,
                             tuple(cases), backend, min_m=entry.min_m,
                             equal_if_accepted=frozenset({"entry:name", *unread}))


def public_modules() -> list[Any]:
    """Every public module of :mod:`kernel_verify.impls` (catalogue modules register maps)."""
    out = []
    for info in pkgutil.walk_packages(impls_pkg.__path__, "kernel_verify.impls."):
        if info.ispkg or ".catalogue" in info.name or info.name in INTERNAL_MODULES:
            continue
        out.append(importlib.import_module(info.name))
    return out


def _registry_functions() -> set[int]:
    fns = set()
    for e in all_maps():
        fns |= {id(f) for f in (e.numpy_fn, e.torch_fn, e.log_numpy_fn, e.log_torch_fn, e.draw)
                if f}
    return fns


def _module_points() -> tuple[list[EntryPoint], dict[str, str]]:
    """Entry points from ``__all__``; returns them and the functions left out (with reasons)."""
    points, left_out = [], {}
    via_registry = _registry_functions()
    for mod in public_modules():
        backend = "torch" if ".torch." in mod.__name__ else "numpy"
        for name in getattr(mod, "__all__", ()):
            fn = getattr(mod, name)
            if not inspect.isfunction(fn):
                continue
            qual = f"{mod.__name__}.{name}"
            if id(fn) in via_registry or name in ("feature_map_attention", "map_features"):
                continue  # fuzzed through the registry entry points
            if name in EXCUSED:
                left_out[qual] = EXCUSED[name]
                continue
            sig = inspect.signature(fn)
            required = [p for p in sig.parameters.values()
                        if p.default is inspect.Parameter.empty
                        and p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL)]
            optional = [p for p in sig.parameters.values()
                        if p.default is not inspect.Parameter.empty
                        and _recipe(name, p.name) is not None]
            missing = [p.name for p in required if _recipe(name, p.name) is None]
            if missing:
                left_out[qual] = f"no recipe for parameter(s) {missing}"
                continue
            params = required + optional
            n_arrays = sum(_recipe(name, p.name).kind == "array" for p in params)
            keyword = {p.name for p in params if p.kind == p.KEYWORD_ONLY}

            def build(c: Ctx, ps=tuple(params), fname=name) -> dict[str, Any]:
                return {p.name: _recipe(fname, p.name).good(c) for p in ps}

            def call(kw: dict[str, Any], f=fn, kwo=frozenset(keyword),
                     order=tuple(p.name for p in params if p.name not in keyword)) -> Any:
                return f(*(kw[a] for a in order), **{a: kw[a] for a in kwo})

            cases = tuple(
                Case(p.name, tuple(bad_values(name, p.name, _recipe(name, p.name), n_arrays)),
                     (p.name, *ALIASES.get(p.name, ())))
                for p in params
            )
            points.append(EntryPoint(qual, call, build, cases, backend))
    return points, left_out


MODULE_POINTS, LEFT_OUT = _module_points()
ENTRY_POINTS: list[EntryPoint] = [*_map_fn_points(), *_draw_points(), *_attention_points(),
                                  *MODULE_POINTS]


# --- the property --------------------------------------------------------------------------


def _names_argument(message: str, names: tuple[str, ...]) -> bool:
    return any(re.search(rf"(?<![A-Za-z0-9_]){re.escape(n)}(?![A-Za-z0-9_])", message,
                         flags=re.IGNORECASE) for n in names)


def check_one(point: EntryPoint, ctx: Ctx, case: Case, bad: Bad) -> None:
    """Call ``point`` with ``case.arg`` replaced by ``bad``; raise AssertionError unless the
    outcome is a named ValueError/TypeError or a declared, correct result."""
    good = point.build(ctx)
    point.call(good)  # the valid call works (else the recipe is wrong, not the code)
    kwargs = {**good, case.arg: bad.make(good[case.arg], ctx)}
    STATS["cases"] += 1
    what = f"{point.id}: {case.arg} = <{bad.label}>"
    try:
        result = point.call(kwargs)
    except BAD_EXC as err:
        message = str(err)
        assert _names_argument(message, case.names), (
            f"{what}: {type(err).__name__} does not name {'/'.join(case.names)}: {message!r}")
        return
    except Exception as err:  # an unrelated exception type is a failure
        raise AssertionError(f"{what}: unrelated {type(err).__name__}: {err}") from err
    if f"{case.arg}:{bad.label}" not in point.equal_if_accepted:
        raise AssertionError(f"{what}: accepted and returned {type(result).__name__} "
                             f"{_np_or_repr(result)} (a silent result for bad input)")
    np.testing.assert_array_equal(_np(result), _np(point.call(good)), err_msg=what)


def _np_or_repr(x: Any) -> str:
    try:
        a = _np(x)
        return f"dtype {a.dtype} {a.ravel()[:4]}"
    except Exception:
        return repr(x)[:80]


@st.composite
def contexts(draw, point: EntryPoint) -> Ctx:
    return Ctx(point.backend, n=draw(st.integers(2, 4)), d=draw(st.integers(2, 4)),
               m=draw(st.integers(max(2, point.min_m), max(2, point.min_m) + 3)),
               rng=np.random.default_rng(draw(st.integers(0, 2**32 - 1))))


def fuzz_property(point: EntryPoint, **overrides: Any) -> Callable[[], None]:
    """The Hypothesis property of one entry point (also driven by the planted-bug test, with
    settings ``overrides``); the profile's settings otherwise."""

    @settings(suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
              **overrides)
    @given(data=st.data())
    def prop(data: st.DataObject) -> None:
        ctx = data.draw(contexts(point), label="context")
        case = data.draw(st.sampled_from(point.cases), label="argument")
        bad = data.draw(st.sampled_from(case.bads), label=f"bad {case.arg}")
        check_one(point, ctx, case, bad)

    return prop


@pytest.fixture(scope="module", autouse=True)
def _report_counts():
    yield
    print(f"\nfuzz_api: {len(ENTRY_POINTS)} entry points "
          f"({len(MODULE_POINTS)} from __all__, {len(ENTRY_POINTS) - len(MODULE_POINTS)} from "
          f"the registry), {STATS['cases']} bad-input cases generated; "
          f"{len(LEFT_OUT)} public functions excused")


@pytest.mark.parametrize("point", ENTRY_POINTS, ids=[p.id for p in ENTRY_POINTS])
def test_bad_input_is_a_named_error(point: EntryPoint) -> None:
    fuzz_property(point)()


def test_every_public_function_is_fuzzed_or_excused() -> None:
    """A public function nobody can drive must say why; an unknown parameter name needs a
    recipe above."""
    unexplained = {q: why for q, why in LEFT_OUT.items() if why.startswith("no recipe")}
    assert not unexplained, unexplained
    assert len(MODULE_POINTS) >= 20 and len(ENTRY_POINTS) >= 200


def test_public_modules_declare_all() -> None:
    """Coverage comes from ``__all__``: every public module must have one."""
    missing = [m.__name__ for m in public_modules() if not hasattr(m, "__all__")]
    assert not missing, f"public modules without __all__: {missing}"


def test_fuzz_catches_a_planted_silent_wrong(monkeypatch) -> None:
    """Re-allow integer ``v`` (the validator skips ``v``'s checks, as before issue 13): the log
    path then returns integers, a silent wrong number; the fuzz property must report it."""
    import kernel_verify.impls.attention as att

    real = att._check_inputs

    def lenient(entry: Any, params: Any, config: Any, arrays: dict[str, Any]) -> Any:
        v = arrays.get("v")
        if isinstance(v, np.ndarray) and np.issubdtype(v.dtype, np.integer):
            arrays = {k: a for k, a in arrays.items() if k != "v"}  # the planted bug
        return real(entry, params, config, arrays)

    monkeypatch.setattr(att, "_check_inputs", lenient)
    monkeypatch.setitem(STATS, "cases", STATS["cases"])  # not counted as fuzz cases
    point = next(p for p in ENTRY_POINTS
                 if p.id == "feature_map_attention[softmax_positive[iid], numpy]")
    # Deterministic, direct: the integer-v case is reported as a silent result.
    case = next(c for c in point.cases if c.arg == "v")
    bad = next(b for b in case.bads if b.label == "int64")
    ctx = Ctx("numpy", n=3, d=2, m=4, rng=np.random.default_rng(0))
    with pytest.raises(AssertionError, match=r"v = <int64>: accepted .*dtype int64"):
        check_one(point, ctx, case, bad)
    # And the Hypothesis property itself finds it (derandomized: the same verdict every run).
    prop = fuzz_property(point, max_examples=300, derandomize=True, database=None)
    with pytest.raises(AssertionError, match=r"v = <int64>: accepted"):
        prop()
