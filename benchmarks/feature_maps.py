"""Cost of computing features ``φ(x)`` for representative registry entries, per backend.

Random-feature entries (one per formula family, docs/math.md §1–§3) are timed at every ``(n, m)``;
deterministic and exact finite maps (claims ``deterministic``/``exact_finite``, docs/math.md §5–§6),
whose size does not depend on ``m``, are timed per ``n`` only. The deterministic list is read from
the registry at import time, so a newly registered map is benchmarked without editing this file.
"""

from __future__ import annotations

from typing import Any, ClassVar

from benchmarks._common import (
    BACKENDS,
    BackendBenchmark,
    params_to_backend,
    positions_for,
    require,
    rng_for,
    sync,
    to_backend,
)
from kernel_verify.impls.attention import map_features
from kernel_verify.impls.registry import FeatureMap, all_maps, get

#: One random-feature entry per formula of interest (brief: Performer SM⁺, hyperbolic ORF, RFF,
#: GERF, ReLU). A renamed entry fails loudly at import (KeyError listing the known names).
RANDOM_ENTRIES: list[str] = [
    "softmax_positive[iid]",
    "softmax_hyperbolic[orthogonal]",
    "rff_pairs[iid]",
    "gerf[iid]",
    "relu_features[iid]",
]


def deterministic_entries() -> list[str]:
    """Registered maps with no random parameters (claims ``deterministic`` or ``exact_finite``)."""
    names = {e.name for e in all_maps(claims=("deterministic",))}
    names |= {e.name for e in all_maps(claims=("exact_finite",))}
    return sorted(names)


DETERMINISTIC_ENTRIES: list[str] = deterministic_entries()

D = 16
DTYPES = ["float64", "float32"]


def prepare(
    entry: FeatureMap, backend: str, dtype: str, n: int, m: int, d: int = D
) -> tuple[Any, dict[str, Any], dict[str, Any], Any]:
    """Seeded inputs ``x`` (entries ``N(0, 1/4)``), the parameter draw, the config and positions.

    Positional maps get positions ``0..n-1`` and ``M = n`` (if the map has an ``M`` setting).
    ``m`` below the entry's ``min_m`` is skipped (``NotImplementedError``) on every machine alike.
    """
    if m < entry.min_m:
        raise NotImplementedError(f"{entry.name}: m = {m} < min_m = {entry.min_m}")
    rng = rng_for(entry.name, n, m, d)
    config = dict(entry.config)
    if entry.has("positional") and "M" in config:
        config["M"] = n
    params = entry.draw(rng, d, m, config)
    x = to_backend(0.5 * rng.standard_normal((n, d)), backend, dtype)
    positions = positions_for(n, backend) if entry.has("positional") else None
    return x, params_to_backend(params, backend), config, positions


class RandomFeatureMaps(BackendBenchmark):
    """``φ(x; ω)`` of random-feature maps: x ``(n, 16)``, ``m`` frequencies."""

    params: ClassVar[list[Any]] = [RANDOM_ENTRIES, BACKENDS, DTYPES, [512, 4096], [64, 256]]
    param_names: ClassVar[list[str]] = ["entry", "backend", "dtype", "n", "m"]
    timeout = 60.0

    def setup(self, name: str, backend: str, dtype: str, n: int, m: int) -> None:
        require(backend, dtype)
        self.pin()
        self.entry = get(name)
        self.x, self.p, self.config, self.positions = prepare(self.entry, backend, dtype, n, m)

    def time_features(self, name: str, backend: str, dtype: str, n: int, m: int) -> None:
        map_features(self.entry, self.x, self.p, config=self.config, positions=self.positions)
        sync(backend)


class DeterministicFeatureMaps(BackendBenchmark):
    """``φ(x)`` of deterministic/exact maps (Taylor, polynomial, elu+1, …): x ``(n, 16)``."""

    params: ClassVar[list[Any]] = [DETERMINISTIC_ENTRIES, BACKENDS, DTYPES, [512, 4096]]
    param_names: ClassVar[list[str]] = ["entry", "backend", "dtype", "n"]
    timeout = 60.0

    def setup(self, name: str, backend: str, dtype: str, n: int) -> None:
        require(backend, dtype)
        self.pin()
        self.entry = get(name)
        self.x, self.p, self.config, self.positions = prepare(
            self.entry, backend, dtype, n, self.entry.min_m
        )

    def time_features(self, name: str, backend: str, dtype: str, n: int) -> None:
        map_features(self.entry, self.x, self.p, config=self.config, positions=self.positions)
        sync(backend)
