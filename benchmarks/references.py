"""Cost of the mpmath reference features (:mod:`kernel_verify.verify.references.features`), slow by
design.

One ``features_reference`` call (exact conversion to mpmath, the formula at the working
precision, one rounding back to float64) on a tiny input: ``n = d = m = 4``, for every registered
map (and its log-features where it claims them: maps without are not generated). If the
reference module or an entry's mpmath twin is missing, that combination is skipped.
"""

from __future__ import annotations

import importlib.util
from typing import Any, ClassVar

import numpy as np

from benchmarks._common import rng_for, smoke
from kernel_verify.impls.registry import all_maps, get

N = D = M = 4
HAVE_REFERENCES = importlib.util.find_spec("kernel_verify.verify.references.features") is not None


class MpFeatureReference:
    """``features_reference(entry, x, params)`` at ``n = d = m = 4`` (float64 result)."""

    params: ClassVar[list[Any]] = [smoke(
        sorted(f"{e.name}{'|log' * log}" for e in all_maps()
               for log in (False, True) if not log or e.has("log_features"))
    )]
    param_names: ClassVar[list[str]] = ["entry"]
    timeout = 60.0

    def setup(self, case: str) -> None:
        name, log = case.removesuffix("|log"), case.endswith("|log")
        if not HAVE_REFERENCES:
            raise NotImplementedError("kernel_verify.verify.references.features is not installed")
        from kernel_verify.verify.references import features

        self.features_reference = features.features_reference
        self.entry = get(name)
        rng = rng_for("mp", name, N, D, M)
        self.config = dict(self.entry.config)
        if self.entry.has("positional") and "M" in self.config:
            self.config["M"] = N
        self.p = self.entry.draw(rng, D, max(M, self.entry.min_m), self.config)
        self.x = 0.5 * rng.standard_normal((N, D))
        self.positions = np.arange(N) if self.entry.has("positional") else None
        try:  # a missing twin is a skip, not a failure of the benchmark run
            self._call(log)
        except KeyError as err:
            raise NotImplementedError(f"{name}: no mpmath twin ({err})") from None
        self.log = log

    def time_features_reference(self, case: str) -> None:
        self._call(self.log)

    def _call(self, log: bool) -> None:
        self.features_reference(
            self.entry, self.x, self.p, self.config, log=log, positions=self.positions
        )
