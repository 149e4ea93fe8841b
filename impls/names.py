"""The one spelling of a registered map's name, and its identifier-safe form.

A map is named by its registry name everywhere a user sees it (``softmax_positive[iid]``: the
formula and, in brackets, the frequency matrix). Where Python needs an identifier (a module
attribute a loader spec ``module:attr`` can name) or a file needs a plain stem, the one derived
form is :func:`identifier` (``softmax_positive__iid``), and :func:`from_identifier` reads it back.
The mapping is a bijection on registry names: they use ``[`` … ``]`` once at the end and never
two underscores in a row (``tests/test_names.py`` checks every registered name).

It also holds the ids a feature-map descriptor may name: :data:`KERNELS` (its ``kernel`` and
``mean_kernel``) and :data:`FORMULAS` (its ``formula``). Each id names an mpmath reference of the
truth (``kernel_verify.verify.references``: a kernel, or the twin of a feature formula), but
``impls`` may not import the truth, so the ids are listed here and
:class:`kernel_verify.impls.descriptor.FeatureMapTarget` checks them when it is constructed,
whatever was imported before. ``tests/test_names.py`` checks the lists against the truth in both
directions (every id has its reference, every reference is listed) and against the registry
(every listed id is used by a registered map, except the :data:`DECLARED_KERNELS`, which only a
user's map declares).
"""

from __future__ import annotations

__all__ = ["DECLARED_KERNELS", "FORMULAS", "KERNELS", "from_identifier", "identifier", "split_name"]

_SEP = "__"

#: Kernel ids (a descriptor's ``kernel`` and ``mean_kernel``): each has its mpmath reference
#: (``verify/references/kernels.py``, ``kernels_catalogue.py``).
KERNELS: frozenset[str] = frozenset({
    "arccos1", "cauchy", "cosformer", "cosine", "dpfp", "elu_plus_one", "fastfood_learned",
    "gaussian", "laplacian", "matern",
    "darkformer", "rebased",
    "gaussian_fixed_norm", "generative", "gmm_prf", "hedgehog", "linear", "polynomial",
    "relu_dot", "softmax", "softmax_fixed_norm", "spectral_mixture", "square_dot", "taylor",
})

#: Kernel ids of :data:`KERNELS` that no registered map uses: stationary kernels a user's map may
#: declare (``kernel="laplacian"``, ``"matern"``, ``"cauchy"`` with their length; docs/math.md
#: §24). ``tests/test_stationary_kernels.py`` exercises each: its reference against a second
#: route, a correct random-feature map of it passing the suite, one at a wrong length failing.
DECLARED_KERNELS: frozenset[str] = frozenset({"cauchy", "laplacian", "matern"})

#: Feature-formula ids (a descriptor's ``formula``): each has its mpmath twin
#: (``verify/references/features.py``, ``features_catalogue.py``).
FORMULAS: frozenset[str] = frozenset({
    "cosformer", "cosine", "dpfp", "elu_plus_one", "fastfood", "generative", "gerf", "gmm_prf",
    "darkformer",
    "gmm_rks", "hedgehog", "identity", "linear", "polynomial", "polysketch", "random_maclaurin",
    "rebased", "relu", "relu_features", "rff_pairs", "rff_phase", "sderf", "softmax_hyperbolic",
    "softmax_positive",
    "softmax_trig", "square",
    "taylor", "taylor2_compressed",
})


def split_name(name: str) -> tuple[str, str | None]:
    """``softmax_positive[iid]`` → ``("softmax_positive", "iid")``; ``taylor2`` →
    ``("taylor2", None)``: the formula family and the bracketed variant (frequency matrix)."""
    base, bracket, rest = name.partition("[")
    return (base, rest.removesuffix("]")) if bracket else (base, None)


def identifier(name: str) -> str:
    """``softmax_positive[iid]`` → ``softmax_positive__iid``; a name without brackets is its own
    identifier. Raises ``ValueError`` for a name the inverse could not read back."""
    base, bracket, rest = name.partition("[")
    if _SEP in base or (bracket and not rest.endswith("]")) or "]" in base:
        raise ValueError(f"{name!r} is not a registry-style name (base[variant])")
    out = f"{base}{_SEP}{rest[:-1]}" if bracket else base
    if not out.isidentifier():
        raise ValueError(f"{name!r} has no identifier form ({out!r} is not an identifier)")
    return out


def from_identifier(ident: str) -> str:
    """The registry name of :func:`identifier`'s output: ``softmax_positive__iid`` →
    ``softmax_positive[iid]``."""
    base, sep, variant = ident.partition(_SEP)
    return f"{base}[{variant}]" if sep else base
