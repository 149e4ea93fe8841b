"""Black-box wrapping: a white-box feature-map target seen only through ``sample_fn(x, seed)``.

What the wrapper keeps is what a library's user could state: the target kernel and its
parameters, the claims, the output's ``m`` and, with ``family=True``, the declared estimator
family (``formula``, ``matrix`` and the ``config`` the formula's constants come from, e.g.
GERF's ``A``). It drops the parameter draw, the backend and log functions, the registry
``entry`` and the attention pre-scaling. The loader of the wrapped mutants and controls is
:mod:`kernel_verify.mutants.blackbox`; this module imports nothing of the mutant catalogue (the
catalogue's black-box mutants are built with it).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from kernel_verify.properties.protocol import FeatureMapTarget, Target

#: Claims that describe white-box internals a ``sample_fn`` cannot provide.
_WHITE_ONLY_CLAIMS = frozenset({"log_features", "positional", "learned"})

#: Correct registry maps wrapped black-box as controls (the families of issue 10's catalogue:
#: positive, hyperbolic, trigonometric, orthogonal positive, GERF, Taylor, compressed Taylor,
#: plus the bounded RFF maps, ReLU features and the deterministic elu+1).
CONTROLS: tuple[str, ...] = (
    "softmax_positive[iid]", "softmax_positive[orthogonal]", "softmax_hyperbolic[iid]",
    "softmax_trig[iid]", "gerf[iid]", "rff_pairs[iid]", "rff_pairs[orthogonal]",
    "rff_phase[iid]", "relu_features[iid]", "taylor2", "taylor2_compressed", "elu_plus_one",
)


def sampler(target: FeatureMapTarget) -> Callable[[np.ndarray, int], np.ndarray]:
    """``sample_fn(x, seed)`` of a white-box target: a fresh draw from ``default_rng(seed)``."""
    def sample_fn(x: np.ndarray, seed: int) -> np.ndarray:
        params = target.draw_params(np.random.default_rng(seed), x.shape[-1])
        fn = target.numpy_fn
        if fn is None:  # torch-only target: the wrapper is the adapter, NumPy in and out
            import torch

            from kernel_verify.impls.torch.convert import to_torch

            out = target.torch_fn(torch.as_tensor(x), to_torch(params), target.config)
            return out.detach().cpu().numpy()
        return np.asarray(fn(x, params, target.config))

    return sample_fn


def as_black_box(target: FeatureMapTarget, *, family: bool = True,
                 name: str | None = None) -> FeatureMapTarget:
    """``target`` with only ``sample_fn`` (see the module docstring)."""
    if not target.white_box:
        return target
    return FeatureMapTarget(
        name=name or f"{target.name}@blackbox",
        kernel=target.kernel,
        claims=frozenset(target.claims - _WHITE_ONLY_CLAIMS),
        # the kernel's arguments of the wrapped map, from its own config (the black-box
        # version may declare no config at all)
        kernel_params=lambda config, d, white=target: white.kernel_args(d),
        m=target.m,
        # the wrapped map returns output_dim(d, m) features (2m for paired maps): said so, since
        # a declared m is checked against what sample_fn returns
        output_dim=target.output_dim,
        config=dict(target.config) if family else {},
        sample_fn=sampler(target),
        formula=target.formula if family else None,
        matrix=target.matrix if family else None,
        mean_kernel=target.mean_kernel,
    )


def wrap_targets(targets: list[Target], *, family: bool = True) -> list[Target]:
    """The black-box versions of the feature-map targets in ``targets`` (others dropped: a
    black-box feature-map check sees only the map)."""
    return [as_black_box(t, family=family) for t in targets if isinstance(t, FeatureMapTarget)]


def control_targets(name: str, *, family: bool = True) -> list[Target]:
    """A correct registry map, wrapped black-box."""
    from kernel_verify.impls.registry import get

    entry = get(name)
    return [as_black_box(entry, family=family,
                         name=f"control:{name}@blackbox")]
