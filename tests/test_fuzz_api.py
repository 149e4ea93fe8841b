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

Every entry point is swept, not sampled: each of its (argument, bad value) pairs is tried once
(:func:`sweep_point`; about 12,000 pairs, in a context drawn per pair from a generator seeded by
the entry point's id). A Hypothesis property drew about 26 of them per entry point; it missed
pairs a sweep tries, and cost four times the time, most of it in drawing. Each pair mutates
**one** argument of a valid call into a bad value (NaN, ±Inf, an integer,
complex or boolean dtype, a list, the other backend, a wrong rank or last dimension, a
mismatched dtype; NaN/Inf/0/negative/bool/str scalars; missing, unknown or non-mapping configs
and params) and requires a ``ValueError``/``TypeError`` whose message names the argument. The
only inputs allowed to give a result are declared ones whose correct result is known (a map's
*name* instead of its entry: the result must equal the entry's, bit for bit). Anything else —
a returned value (a wrong number), another exception type, a message naming another argument —
fails the property.

``CI=true pytest tests/test_fuzz_api.py -n 0 -s`` prints the number of entry points and of
bad-input cases tried.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import re
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest
import torch

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
    "kernel_verify.impls.gated_checks": "argument checks of the gated forms (exercised through "
    "their log_gates below)",
    "kernel_verify.impls.recurrence_checks": "argument checks of the delta-rule recurrence "
    "(exercised through its forms below: transition, g, beta)",
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
    # FAVOR#'s dense-exponential features (docs/math.md §20): the registered sderf[iid] is fuzzed
    # through its entry; these take matrices/parameter dicts built by the functions below
    "log_dense_exponential": "internal stage of sderf and aderf_features (A, B, C built by "
    "sderf_parameters / aderf_parameters); fuzzed through the sderf[iid] entry",
    "aderf_features": "takes a parameter dict of aderf_parameters and a side; the refusals in "
    "tests/test_dense_exponential.py::test_bad_parameters_are_refused",
    "aderf_parameters": "a scalar and a matrix -> ADERF's parameter dict; refusals in "
    "tests/test_dense_exponential.py::test_bad_parameters_are_refused",
    "optimal_aderf": "two sets of vectors -> parameters; refusals in "
    "tests/test_dense_exponential.py::test_bad_parameters_are_refused",
    "optimal_sderf_a": "two sets of vectors -> A; the set checks shared with optimal_aderf",
    "optimal_gerf_a_for_sets": "two sets of vectors -> a; the set checks shared with "
    "optimal_aderf",
    "sderf_parameters": "a symmetric matrix -> (B, log D); refusals in "
    "tests/test_dense_exponential.py::test_bad_parameters_are_refused",
    "sderf_config_matrix": "the sderf entry's config -> A; fuzzed through the sderf[iid] entry",
    # ReBased and DARKFormer (docs/math.md §21): stages of the registered entries, which are
    # fuzzed as rebased.draw / rebased.numpy_fn / darkformer.draw / darkformer.numpy_fn / ...
    "rebased_affine": "the rebased entry's config -> (γ, β); fuzzed through rebased.draw",
    "draw_rebased": "the rebased entry's draw; fuzzed as rebased.draw",
    "rebased_values": "the rebased entry's params/config -> validated values; fuzzed through "
    "rebased.numpy_fn and rebased.torch_fn",
    "darkformer_matrix": "the darkformer entry's config -> M; fuzzed through darkformer.draw",
    "draw_darkformer": "the darkformer entry's draw; fuzzed as darkformer.draw",
    # the conventions of the delta rule (impls/recurrence_conventions.py): element- and row-wise
    # maps valid at any rank and width (no shape to tie); their refusals (NaN, types, unknown
    # convention, bad eps/A_log/dt_bias/lower) in tests/test_recurrence_impls.py
    "l2_normalise": "row-wise map valid at any rank and width; refusals in "
    "tests/test_recurrence_impls.py",
    "beta_from_logit": "element-wise map valid at any rank; refusals in "
    "tests/test_recurrence_impls.py",
    "mamba_log_gate": "element-wise map valid at any rank; refusals in "
    "tests/test_recurrence_impls.py",
    "bounded_log_gate": "element-wise map valid at any rank; refusals in "
    "tests/test_recurrence_impls.py",
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
    # packed sequences of the forms (None: not packed); every bad value is bad for any T
    "cu_seqlens": Recipe(lambda c: None, "cu_seqlens"),
    # the gated forms: log-gates g <= 0, one per token ((2, n); one token: (2,))
    "log_gates": Recipe(lambda c: c.arr(-np.exp(c.rng.standard_normal((2, c.n)))), "gates"),
    "log_gate_t": Recipe(lambda c: c.arr(-np.exp(c.rng.standard_normal(2))), "gates"),
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
    ("gated_system", "gates"): Recipe(lambda c: "scalar", "choice"),
    ("segment_means", "x"): Recipe(_arr(lambda c: (2, c.n, c.d)), "array"),  # any d
    **{(f, "seed"): Recipe(lambda c: 0, "count", min_value=0)
       for f in ("build_tiny_lm", "build_hybrid_lm")},
    # the delta rule (impls/{numpy,torch}/recurrence.py), as the gated delta rule: scalar
    # log-gates g <= 0 and β per token; one token's q_t, k_t, g_t, beta_t
    **{(f, "transition"): Recipe(lambda c: "gated_delta", "choice")
       for f in ("chunked", "recurrent", "recurrent_step", "transition_terms")},
    **{(f, "g"): Recipe(lambda c: c.arr(-np.exp(c.rng.standard_normal((2, c.n)))), "gates")
       for f in ("chunked", "recurrent", "transition_terms")},
    **{(f, "beta"): Recipe(_arr(lambda c: (2, c.n)), "array")
       for f in ("chunked", "recurrent", "transition_terms")},
    ("transition_terms", "k"): Recipe(_arr(lambda c: (2, c.n, c.d)), "array"),
    ("recurrent_step", "g_t"): Recipe(lambda c: c.arr(-np.exp(c.rng.standard_normal(2))),
                                      "gates"),
    ("recurrent_step", "beta_t"): Recipe(_arr(lambda c: (2,)), "array"),
    **{("recurrent_step", a): Recipe(_arr(lambda c: (2, c.d)), "array", last_dim=True)
       for a in ("q_t", "k_t")},
    # hybrid attention (docs/math.md §22): a window w >= 0, a mixing factor > 0, one token's q, k
    **{(f, "window"): Recipe(lambda c: 1, "count", min_value=0)
       for f in ("hybrid_attention", "hybrid_attention_step")},
    **{(f, "mix"): Recipe(lambda c: 0.75, "real")
       for f in ("hybrid_attention", "hybrid_attention_step")},
    **{("hybrid_attention_step", a): Recipe(_arr(lambda c: (2, c.d)), "array", last_dim=True)
       for a in ("q_t", "k_t")},
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


def _wrong_rank(x: Any, c: Ctx) -> Any:
    """``x`` flattened to one dimension; a one-dimensional ``x`` gets a leading axis instead
    (flattening it would leave it unchanged: no bad value at all)."""
    a = _np(x)
    return c.arr(a.reshape(-1) if a.ndim > 1 else a.reshape(1, -1))


ARRAY_BAD = [
    Bad("nan", _with_value(np.nan)),
    Bad("+inf", _with_value(np.inf)),
    Bad("-inf", _with_value(-np.inf)),
    Bad("int64", _astype(np.int64)),
    Bad("complex", _astype(np.complex128)),
    Bad("bool", lambda x, c: c.arr(_np(x) > 0)),
    Bad("list", lambda x, c: _np(x).tolist()),
    Bad("other backend", _other_backend),
    Bad("wrong rank", _wrong_rank),
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


#: Boundaries of packed sequences that no T accepts (``T = c.n`` rows).
CU_SEQLENS_BAD = [Bad("negative", lambda x, c: np.array([0, -1, c.n])),
                  Bad("non-monotone", lambda x, c: np.array([0, c.n, 1, c.n])),
                  Bad("not from 0", lambda x, c: np.array([1, c.n])),
                  Bad("not to T", lambda x, c: np.array([0, c.n - 1])),
                  Bad("past T", lambda x, c: np.array([0, c.n + 1])),
                  Bad("float", lambda x, c: np.array([0.0, 1.5, c.n])),
                  Bad("bool", lambda x, c: np.array([False, True])),
                  Bad("one boundary", lambda x, c: np.array([0])),
                  Bad("2-D", lambda x, c: np.array([[0, c.n]])),
                  Bad("str", lambda x, c: "0,2")]


#: Log-gates (``g <= 0``, finite): the array bad values but ``-inf`` (checked apart), and a
#: positive gate (a growth ``e^g > 1``).
GATES_BAD = [b for b in ARRAY_BAD if b.label != "-inf"] + [
    Bad("positive", _with_value(0.5)), Bad("-inf", _with_value(-np.inf))] + MISMATCH_BAD


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
            "indices": INDEX_BAD, "state": STATE_BAD,
            "cu_seqlens": CU_SEQLENS_BAD, "gates": GATES_BAD}[recipe.kind]


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
            # The same holds for an empty config and a missing parameter: a map may read no
            # config key given its parameters, or hold an optional parameter (DARKFormer's
            # learned M; without it, the M its config derives, which the draw returns).
            ignored |= {f"config:{b.label}" for c in config_cases for b in c.bads}
            ignored |= {"params:missing key"}
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


def contexts(point: EntryPoint) -> Iterator[tuple[Case, Bad, Ctx]]:
    """Every (argument, bad value) pair of ``point``, each with its own context: sizes
    ``n, d ∈ [2, 4]``, ``m`` in ``[max(2, min_m), max(2, min_m) + 3]`` and the seed of the valid
    call's values, drawn from a generator seeded by the entry point's id (the same pairs and
    contexts every run)."""
    draw = np.random.default_rng(zlib.crc32(point.id.encode()))
    low_m = max(2, point.min_m)
    for case in point.cases:
        for bad in case.bads:
            n, d = (int(v) for v in draw.integers(2, 5, size=2))
            m, seed = int(draw.integers(low_m, low_m + 4)), int(draw.integers(2**32))
            yield case, bad, Ctx(point.backend, n=n, d=d, m=m, rng=np.random.default_rng(seed))


def sweep_point(point: EntryPoint) -> None:
    """Try every bad value of every argument of ``point`` (:func:`contexts`), one at a time;
    raise AssertionError listing each one not refused by name, with its context (which
    re-runs it: ``Ctx(backend, n, d, m, rng=default_rng(seed))``)."""
    failures = []
    for case, bad, ctx in contexts(point):
        seed = ctx.rng.bit_generator.seed_seq.entropy  # before the calls consume the generator
        try:
            check_one(point, ctx, case, bad)
        except AssertionError as err:
            failures.append(f"{err} [n={ctx.n}, d={ctx.d}, m={ctx.m}, seed={seed}]")
    assert not failures, f"{len(failures)} bad inputs not refused by name:\n" + \
        "\n".join(failures)


@pytest.fixture(scope="module", autouse=True)
def _report_counts():
    yield
    print(f"\nfuzz_api: {len(ENTRY_POINTS)} entry points "
          f"({len(MODULE_POINTS)} from __all__, {len(ENTRY_POINTS) - len(MODULE_POINTS)} from "
          f"the registry), {STATS['cases']} bad-input cases generated; "
          f"{len(LEFT_OUT)} public functions excused")


@pytest.mark.parametrize("point", ENTRY_POINTS, ids=[p.id for p in ENTRY_POINTS])
def test_bad_input_is_a_named_error(point: EntryPoint) -> None:
    sweep_point(point)


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
    # And the sweep of the entry point itself finds it.
    with pytest.raises(AssertionError, match=r"v = <int64>: accepted"):
        sweep_point(point)


# --- Newer surfaces (issue 30): the forms of attention targets, declarations, check() ----------
# A deterministic sweep, enumerated as the entry points above are: every form of the protocol
# (``ATTENTION_FORMS`` + ``features``, ``state_sums``) of the built-in attention targets, one per
# kind of state (log-space and plain, taken from the registry), on both backends, with every
# parameter of its signature; every field of the target dataclasses; every parameter of
# ``kernel_verify.check``. One argument at a time is replaced by a bad value. Outcomes:
# *clear* (ValueError/TypeError naming the argument), *unclear* (one that does not name it),
# *wrong* (a result was returned), *traceback* (any other exception). Only clear is allowed.
# ``CI=true pytest tests/test_fuzz_api.py -k sweep -n 0 -s`` prints the counts.
import dataclasses  # noqa: E402

from kernel_verify.impls.descriptor import FeatureMapTarget  # noqa: E402
from kernel_verify.properties.protocol import (  # noqa: E402
    ATTENTION_FORMS,
    AttentionTarget,
    KernelApproxTarget,
    RandomMatrixTarget,
)

SWEEP: dict[str, dict[str, int]] = {}
OUTCOMES = ("tried", "clear", "unclear", "wrong", "traceback")


def _outcome(call: Callable[[], Any], names: tuple[str, ...]) -> tuple[str, str]:
    try:
        result = call()
    except BAD_EXC as err:
        kind = "clear" if _names_argument(str(err), names) else "unclear"
        return kind, f"{type(err).__name__}: {err}"
    except (Exception, pytest.skip.Exception, pytest.fail.Exception) as err:  # classify all
        return "traceback", f"{type(err).__name__}: {err}"
    return "wrong", f"returned {type(result).__name__}"


def _sweep(surface: str, cases: list[tuple[str, Callable[[], Any], tuple[str, ...]]]) -> None:
    """Run ``cases`` (label, call, names the message may use); record and check the tally."""
    tally = dict.fromkeys(OUTCOMES, 0)
    bad = []
    for label, call, names in cases:
        kind, what = _outcome(call, names)
        tally["tried"] += 1
        tally[kind] += 1
        if kind != "clear":
            bad.append(f"{label}: {kind}: {what[:200]}")
    SWEEP[surface] = tally
    print(f"\nsweep {surface}: " + ", ".join(f"{k} {v}" for k, v in tally.items()))
    assert not bad, f"{len(bad)} of {tally['tried']} bad inputs not refused by name:\n" + \
        "\n".join(bad[:40])


# ---- the forms
def _form_targets() -> list[AttentionTarget]:
    """One built-in attention target per kind of state (log-space (L, V̄), plain (S, z)), on
    the torch and NumPy backends, from the registry's order."""
    from kernel_verify.properties.builtin_attention import registry_attention_targets

    chosen: dict[bool, AttentionTarget] = {}
    for t in registry_attention_targets():
        if all(getattr(t, f) is not None for f in (*ATTENTION_FORMS, "features", "state_sums")):
            entry = get_entry(t)
            chosen.setdefault(entry.has("log_features"), t)
    return list(chosen.values())


def get_entry(t: AttentionTarget) -> FeatureMap:
    from kernel_verify.impls.registry import get

    return get(t.name.split(":")[-1].split("@")[0]) if ":" in t.name else next(
        e for e in all_maps() if t.name.startswith(e.name) or e.name in t.name)


def _arr4(rng: np.random.Generator, backend: str, *shape: int) -> Any:
    a = rng.standard_normal(shape)
    return torch.as_tensor(a) if backend == "torch" else a


def _index(a: Any, backend: str) -> Any:
    return torch.as_tensor(np.asarray(a)) if backend == "torch" else np.asarray(a)


def _array_bads(backend: str, *, tied_last: bool, time_axis: int | None,
                alone: bool = False) -> list[Bad]:
    """Bad values of an array argument; ``alone``: the only array of the call (``features``'
    x: no dtype to mismatch, and an empty batch has its exact, empty, result)."""
    def to(a: Any) -> np.ndarray:
        return a.numpy() if isinstance(a, torch.Tensor) else np.asarray(a)

    def back(a: np.ndarray) -> Any:
        return torch.as_tensor(a) if backend == "torch" else a

    def put(value: float) -> Callable[[Any, Ctx], Any]:
        def make(x: Any, c: Ctx) -> Any:
            a = to(x).copy()
            a.reshape(-1)[a.size // 2] = value
            return back(a)
        return make

    out = [Bad("nan", put(np.nan)), Bad("+inf", put(np.inf)), Bad("-inf", put(-np.inf)),
           Bad("int64", lambda x, c: back((to(x) * 3).astype(np.int64))),
           Bad("bool", lambda x, c: back(to(x) > 0)),
           Bad("complex", lambda x, c: back(to(x) + 1j)),
           Bad("list", lambda x, c: to(x).tolist()),
           Bad("other backend", lambda x, c: to(x) if backend == "torch"
               else torch.as_tensor(x)),
           Bad("rank 1", lambda x, c: back(to(x).reshape(-1))),
           Bad("float32 among float64", lambda x, c: back(to(x).astype(np.float32))),
           Bad("batch 0", lambda x, c: back(to(x)[:0]))]
    if alone:
        out = out[:-2]
    if tied_last:
        out.append(Bad("last dim + 1", lambda x, c: back(np.concatenate(
            [to(x), to(x)[..., :1]], axis=-1))))
    if time_axis is not None:
        out.append(Bad("one row less", lambda x, c: back(np.delete(to(x), 0, axis=time_axis))))
    if backend == "torch":
        out.append(Bad("meta tensor", lambda x, c: torch.empty(tuple(x.shape), device="meta",
                                                               dtype=x.dtype)))
    return out


SEED_BAD = [Bad("-1", lambda x, c: -1), Bad("str", lambda x, c: "0"),
            Bad("float", lambda x, c: 2.5), Bad("bool", lambda x, c: True),
            Bad("None", lambda x, c: None)]
CU_BAD = [Bad("negative", lambda x, c: [0, -1, 5]), Bad("non-monotone", lambda x, c: [0, 4, 2, 5]),
          Bad("not from 0", lambda x, c: [1, 3, 5]), Bad("not to T", lambda x, c: [0, 2, 4]),
          Bad("past T", lambda x, c: [0, 2, 6]), Bad("float 2.5", lambda x, c: [0, 2.5, 5]),
          Bad("bool", lambda x, c: [False, True]), Bad("one boundary", lambda x, c: [0]),
          Bad("2-D", lambda x, c: [[0, 2, 5]]), Bad("None", lambda x, c: None),
          Bad("str", lambda x, c: "0,2,5")]
MASK_BAD = [Bad("B-1 rows", lambda x, c: np.ones((1, 5), bool)),
            Bad("T+1 columns", lambda x, c: np.ones((2, 6), bool)),
            Bad("1-D", lambda x, c: np.ones(5, bool)),
            Bad("float 0.2", lambda x, c: np.full((2, 5), 0.2)),
            Bad("integer 2", lambda x, c: np.full((2, 5), 2)),
            Bad("None", lambda x, c: None), Bad("str", lambda x, c: "all")]
CHUNK_BAD = [Bad(b.label, b.make) for b in COUNT_BAD + ZERO_BAD]


def _state_bads(n_states: int | None) -> list[Bad]:
    """Bad (initial) states; ``n_states``: how many states the call takes along the batch (None:
    any number, and any backend: ``state_sums`` reads a state of any batch as float64)."""
    def more(x: Any, c: Ctx) -> Any:
        good = c.extra["state"]
        lib = torch if isinstance(good[0], torch.Tensor) else np
        return tuple(lib.concatenate([s, s[:1]]) if lib is np else torch.cat([s, s[:1]])
                     for s in good)

    def nan(x: Any, c: Ctx) -> Any:
        good = c.extra["state"]
        return tuple(s * float("nan") for s in good)

    def swapped(x: Any, c: Ctx) -> Any:
        return tuple(reversed(c.extra["state"]))

    out = [Bad("int", lambda x, c: 3), Bad("one array", lambda x, c: (c.extra["state"][0],)),
           Bad("swapped pair", swapped), Bad("NaN", nan)]
    if n_states is None:
        return out
    return [*out, Bad(f"{n_states + 1} states for {n_states}", more),
            Bad("other backend", lambda x, c: tuple(
                s.numpy() if isinstance(s, torch.Tensor) else torch.as_tensor(s)
                for s in c.extra["state"]))]


@dataclass
class _FormCtx:
    extra: dict[str, Any]


def _form_calls(target: AttentionTarget, backend: str) -> list[tuple[str, Callable[[], Any],
                                                                     tuple[str, ...]]]:
    """Every (form, parameter, bad value) of ``target`` on ``backend``."""
    rng = np.random.default_rng(0)
    b, h, t, d, dv = 2, 2, 5, 3, 2
    q, k, v = (_arr4(rng, backend, b, h, t, w) for w in (d, d, dv))
    good_state = target.stateful(q, k, v)[1]
    q1, k1, v1 = (x[:1] for x in (q, k, v))
    two_states = target.stateful(*(x[:2, :, :2] for x in (q, k, v)))[1]
    mask = np.ones((b, t), bool)
    mask[1, 3:] = False
    goods: dict[str, dict[str, Any]] = {
        "stateful": {"q": q, "k": k, "v": v, "initial_state": good_state, "seed": 0},
        "chunked": {"q": q, "k": k, "v": v, "chunk_size": 2, "initial_state": good_state,
                    "seed": 0},
        "step": {"state": good_state, "q_t": q[..., 0, :], "k_t": k[..., 0, :],
                 "v_t": v[..., 0, :], "seed": 0},
        "varlen": {"q": q1, "k": k1, "v": v1, "cu_seqlens": _index([0, 2, 5], backend),
                   "initial_state": two_states, "seed": 0},
        "padded": {"q": q, "k": k, "v": v, "mask": _index(mask, backend),
                   "initial_state": good_state, "seed": 0},
        "features": {"x": rng.standard_normal((b, h, t, d)), "seed": 0},
        "state_sums": {"state": good_state},
    }
    missing = [f for f in (*ATTENTION_FORMS, "features", "state_sums") if f not in goods]
    assert not missing, f"forms without a valid call in the sweep: {missing}"
    calls = []
    for form, good in goods.items():
        fn = getattr(target, form)
        params = list(inspect.signature(fn).parameters)
        unknown = [p for p in params if p not in good]
        assert not unknown, f"{target.name}.{form}: parameters without a recipe: {unknown}"
        fn(**good) if form not in ("features", "state_sums") else fn(*good.values())
        n_states = None if form == "state_sums" else 2
        for param in params:
            if param in ("q", "k", "v", "q_t", "k_t", "v_t", "x"):
                bads = _array_bads("numpy" if form == "features" else backend,
                                   tied_last=param in ("q", "k", "q_t", "k_t"),
                                   time_axis=-2 if param in ("k", "v") else None,
                                   alone=form == "features")
            elif param in ("state", "initial_state"):
                bads = _state_bads(n_states)
            elif param == "seed":
                bads = SEED_BAD
            elif param == "chunk_size":
                bads = CHUNK_BAD
            elif param == "cu_seqlens":
                bads = [Bad(x.label, lambda x_, c, m=x.make: (
                    None if m(x_, c) is None or isinstance(m(x_, c), str)
                    else _index(m(x_, c), backend))) for x in CU_BAD]
            elif param == "mask":
                bads = [Bad(x.label, lambda x_, c, m=x.make: (
                    m(x_, c) if m(x_, c) is None or isinstance(m(x_, c), str)
                    else _index(m(x_, c), backend))) for x in MASK_BAD]
            else:
                raise AssertionError(f"{target.name}.{form}: no bad values for {param!r}")
            ctx = _FormCtx({"state": two_states if form == "varlen" else good_state})
            for bad in bads:
                args = {**good, param: bad.make(good[param], ctx)}

                def call(fn=fn, args=args, form=form) -> Any:
                    if form in ("features", "state_sums"):
                        return fn(*args.values())
                    return fn(**args)

                calls.append((f"{target.name}.{form} on {backend}: {param} = <{bad.label}>",
                              call, (param, *_FORM_ALIASES.get(param, ()))))
    return calls


#: Names a message may use for a form's argument besides its own (``state_sums`` validates the
#: state it is given as ``state``; the step's state is the form's ``state``).
_FORM_ALIASES = {"initial_state": ("state",)}


def test_sweep_forms_of_attention_targets() -> None:
    targets = _form_targets()
    assert len(targets) == 2, [t.name for t in targets]
    cases = [c for t in targets for backend in ("numpy", "torch") for c in _form_calls(t, backend)]
    _sweep("forms", cases)


# ---- the declarations: every field of every target dataclass, and what is checked at first call
def _stub_form(*args: Any, **kwargs: Any) -> Any:
    return None, None


_BASE_TARGETS: dict[type, Callable[..., Any]] = {
    AttentionTarget: lambda **kw: AttentionTarget(**{
        "name": "a", "attention": lambda q, k, v, **_: v, "claims": frozenset({"causal"}),
        **{f: _stub_form for f in ATTENTION_FORMS}, "chunk_sizes": (2,), **kw}),
    FeatureMapTarget: lambda **kw: FeatureMapTarget(**{
        "name": "f", "kernel": "softmax", "claims": frozenset({"unbiased"}),
        "draw": lambda rng, d, m, config: {"W": rng.standard_normal((m, d))},
        "numpy_fn": lambda x, p, c: np.exp(x @ p["W"].T), "formula": "softmax_positive", **kw}),
    RandomMatrixTarget: lambda **kw: RandomMatrixTarget(**{
        "name": "r", "draw": lambda rng, m, d: rng.standard_normal((m, d)),
        "claims": frozenset(), **kw}),
    KernelApproxTarget: lambda **kw: KernelApproxTarget(**{
        "name": "k", "approximate": lambda X, kernel, rng: (kernel(X, X), np.arange(2)),
        "claims": frozenset(), **kw}),
}
#: Bad values by a field's annotation (``X | None`` as ``X``): every field gets those of its type;
#: a new field of a new type fails :func:`test_sweep_declarations` until it gets a row.
_FIELD_BAD: dict[str, list[Any]] = {
    "str": [3, b"x"],
    "Callable": [3, "fn"],
    "frozenset[str]": [frozenset({"bogus"}), "causal", frozenset({3})],
    "tuple[str, ...]": [("bogus",), "numpy", ()],
    "bool": [1, "yes"],
    "Mapping[str, str]": [42, {"test_no_such_property": "typo"}, {"rows_law": "not a test"},
                          {"test_partition_of_unity": ""}],
    "Mapping[str, Any]": [3, "sigma=1"],
    "KernelParams": [3, "order=2"],
    "int": [0, -1, True, 2.5, "3"],
    "int | None": [-1, True, 2.5, "3"],
    "tuple[int, ...]": [(0,), (), 64, ("a",)],
    "float": [-1.0, 0, True, "x", float("nan")],
}
#: Fields whose value is a word of a vocabulary: an unknown word too.
_WORDS = {"kernel": "bogus", "formula": "bogus", "matrix": "bogus", "mean_kernel": "bogus",
          "layout": "BTDH", "name": ""}


def _annotation(kind: str) -> str:
    base = kind.removesuffix(" | None")
    if base.startswith(("Callable", "Draw", "MapFn")):
        return "Callable"
    return "int | None" if kind == "int | None" else base


def _declared_behaviour_cases() -> list[tuple[str, Callable[[], Any], tuple[str, ...]]]:
    """Declarations checked at construction or at the first call (issue 30)."""
    from kernel_verify.impls.registry import get
    from kernel_verify.properties.builtin_forms import registry_forms

    x = np.random.default_rng(0).standard_normal((3, 4))

    def sample(count: int) -> Callable[[Any, int], Any]:
        return lambda x, seed: np.ones((*np.shape(x)[:-1], count))

    fm = _BASE_TARGETS[FeatureMapTarget]
    att = _BASE_TARGETS[AttentionTarget]
    forms = registry_forms(get("softmax_positive[iid]"), 8)
    q = np.random.default_rng(1).standard_normal((1, 2, 6, 3))
    two = forms["stateful"](*(np.random.default_rng(2).standard_normal((3, 2, 2, 3)),) * 3)[1]
    o = np.zeros((1, 1, 3, 2))
    return [
        ("m = 8 declared, sample_fn returns 9", lambda: fm(
            draw=None, numpy_fn=None, m=8, sample_fn=sample(9)).sample_fn(x, 0), ("m",)),
        ("formula's count (2m) not met", lambda: FeatureMapTarget(
            "p", "gaussian", frozenset({"unbiased"}), m=8, sample_fn=sample(8),
            formula="rff_pairs", config={"sigma": 1.0}).sample_fn(x, 0), ("m",)),
        ("differentiable without torch_fn", lambda: fm(
            claims=frozenset({"unbiased", "differentiable"})), ("differentiable", "claims")),
        ("differentiable, NumPy-only sample_fn, torch input", lambda: fm(
            draw=None, numpy_fn=None, m=8, sample_fn=sample(8),
            claims=frozenset({"unbiased", "differentiable"})).sample_fn(torch.ones(3, 4), 0),
         ("sample_fn",)),
        ("attention differentiable without torch", lambda: att(
            claims=frozenset({"causal", "differentiable"})), ("differentiable", "claims")),
        ("stateful returns only the output", lambda: att(
            stateful=lambda q, k, v, **kw: v).stateful(o, o, o), ("stateful",)),
        ("chunked returns three values", lambda: att(
            chunked=lambda q, k, v, **kw: (v, (v,), 1)).chunked(o, o, o, chunk_size=2),
         ("chunked",)),
        ("step returns (o, state)", lambda: att(
            step=lambda s, q, k, v, **kw: (v, (v,))).step(None, o[0], o[0], o[0]), ("step",)),
        ("varlen returns an array as state", lambda: att(
            varlen=lambda q, k, v, **kw: (v, v)).varlen(o, o, o, cu_seqlens=np.array([0, 3])),
         ("varlen",)),
        ("3 initial states for 2 sequences", lambda: forms["varlen"](
            q, q, q[..., :2], cu_seqlens=np.array([0, 3, 6]), initial_state=two),
         ("initial_state",)),
    ]


def test_sweep_declarations() -> None:
    cases = []
    for cls, make in _BASE_TARGETS.items():
        make()  # the base declaration is valid
        for f in dataclasses.fields(cls):
            kind = _annotation(str(f.type))
            assert kind in _FIELD_BAD, f"{cls.__name__}.{f.name}: no bad values for {f.type}"
            bads = list(_FIELD_BAD[kind]) + ([_WORDS[f.name]] if f.name in _WORDS else [])
            if not str(f.type).endswith("| None") and kind not in ("bool",) and f.default in (
                    dataclasses.MISSING,):
                bads.append(None)
            for bad in bads:
                cases.append((f"{cls.__name__}.{f.name} = {bad!r}",
                              lambda make=make, f=f, bad=bad: make(**{f.name: bad}),
                              (f.name, "target name")))
    cases += _declared_behaviour_cases()
    _sweep("declarations", cases)


# ---- kernel_verify.check's arguments: refused before anything runs
class _Ran(Exception):
    """Raised in place of the suite: ``check`` accepted its arguments."""


_CHECK_BAD: dict[str, list[Any]] = {
    "targets": [42, None, "", "kernel_verify_no_such_module:targets", "kernel_verify:no_attr",
                [], [42], "no-colon"],
    "profile": ["nonsense", 3, ""],
    "keyword": ["", "   ", 3],
    "jobs": [0, -1, True, 2.5, "2"],
    "shrink_seconds": [-1, True, "x", float("nan")],  # 0: no shrinking, valid
    "timeout": [-1, 0, True, "x", float("nan")],  # inf: no limit, valid
    "progress": [1, "yes", None],
    "probe": [1, "yes", None],
}


def test_sweep_check_arguments(monkeypatch) -> None:
    """Every parameter of ``kernel_verify.check`` (a new one needs a row of bad values); the
    suite itself is replaced by :class:`_Ran`, so an accepted bad value is a *wrong* outcome."""
    import kernel_verify.api as api

    def ran(*args: Any, **kwargs: Any) -> Any:
        raise _Ran

    monkeypatch.setattr(api, "run_suite", ran)
    monkeypatch.setattr(api, "_run_in_process", ran)
    target = _BASE_TARGETS[RandomMatrixTarget]()
    good: dict[str, Any] = {"targets": [target]}
    with pytest.raises(_Ran):  # the valid call reaches the suite
        api.check(**good)
    params = list(inspect.signature(api.check).parameters)
    missing = [p for p in params if p not in _CHECK_BAD]
    assert not missing, f"check() parameters without bad values in the sweep: {missing}"

    def call(**kw: Any) -> Any:
        try:
            return api.check(**{**good, **kw})
        except _Ran:
            return "the suite ran"

    # a spec string is "the target" (as on the command line: kernel-verify check <target>)
    cases = [(f"check({p}={bad!r})", lambda p=p, bad=bad: call(**{p: bad}),
              (p, "target") if p == "targets" else (p,))
             for p in params for bad in _CHECK_BAD[p]]
    _sweep("check", cases)


def test_sweep_catches_a_planted_silent_wrong(monkeypatch) -> None:
    """Control: with the cu_seqlens check of issue 30 undone (boundaries read as given, floats
    truncated, as before), the forms sweep reports wrong results for ``varlen``."""
    import kernel_verify.impls.packed as packed

    def lenient(cu: Any, *, length: int, allow_empty: bool = True,
                name: str = "cu_seqlens") -> list[int]:
        values = cu.tolist() if hasattr(cu, "tolist") else list(cu)
        return [int(b) for b in values]

    monkeypatch.setattr(packed, "check_cu_seqlens", lenient)
    monkeypatch.setitem(SWEEP, "forms", SWEEP.get("forms", {}))  # not counted as the sweep's
    target = _form_targets()[0]
    cases = [c for c in _form_calls(target, "numpy") if ".varlen " in c[0]
             and "cu_seqlens" in c[0]]
    with pytest.raises(AssertionError, match=r"cu_seqlens = <(negative|non-monotone|not to T|"
                                             r"float 2.5)>: wrong: returned"):
        _sweep("control", cases)
    assert SWEEP["control"]["wrong"] >= 3
