"""Cost of the mpmath reference features (:mod:`verify.references.features`), slow by design.

One ``features_reference`` call (exact conversion to mpmath, the formula at the working
precision, one rounding back to float64) on a tiny input: ``n = d = m = 4``. If the reference
module or an entry's mpmath twin is missing, that combination is skipped (NotImplementedError).
"""

from __future__ import annotations

import importlib.util
from typing import Any, ClassVar

import numpy as np

from benchmarks._common import rng_for
from benchmarks.feature_maps import DETERMINISTIC_ENTRIES, RANDOM_ENTRIES
from kernel_verify.impls.registry import get

N = D = M = 4
HAVE_REFERENCES = importlib.util.find_spec("kernel_verify.verify.references.features") is not None


class MpFeatureReference:
    """``features_reference(entry, x, params)`` at ``n = d = m = 4`` (float64 result)."""

    params: ClassVar[list[Any]] = [RANDOM_ENTRIES + DETERMINISTIC_ENTRIES, [False, True]]
    param_names: ClassVar[list[str]] = ["entry", "log"]
    timeout = 60.0

    def setup(self, name: str, log: bool) -> None:
        if not HAVE_REFERENCES:
            raise NotImplementedError("kernel_verify.verify.references.features is not installed")
        from kernel_verify.verify.references import features

        self.features_reference = features.features_reference
        self.entry = get(name)
        if log and not self.entry.has("log_features"):
            raise NotImplementedError(f"{name}: no log_features claim")
        rng = rng_for("mp", name, N, D, M)
        self.config = dict(self.entry.config)
        if self.entry.has("positional") and "M" in self.config:
            self.config["M"] = N
        self.p = self.entry.draw(rng, D, max(M, self.entry.min_m), self.config)
        self.x = 0.5 * rng.standard_normal((N, D))
        self.positions = np.arange(N) if self.entry.has("positional") else None
        try:  # a missing twin is a skip, not a failure of the benchmark run
            self.time_features_reference(name, log)
        except KeyError as err:
            raise NotImplementedError(f"{name}: no mpmath twin ({err})") from None

    def time_features_reference(self, name: str, log: bool) -> None:
        self.features_reference(
            self.entry, self.x, self.p, self.config, log=log, positions=self.positions
        )
