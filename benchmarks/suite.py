"""The suite's own cost: wall time of the CI profile of each property family (one pytest file).

``track_`` (not ``time_``): one run of ``pytest properties/<family>.py`` in a subprocess with
``CI=true`` (the CI Hypothesis profile) and one BLAS/OpenMP thread, as ``make test`` runs it, so
the dashboard shows which family makes CI slow. Seconds, one sample (each run takes 10 s–minutes).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import ClassVar

from benchmarks._common import smoke

PROPERTIES = Path(__file__).resolve().parent.parent / "properties"
FAMILIES: list[str] = smoke(sorted(p.stem for p in PROPERTIES.glob("test_*.py")))
if os.environ.get("KV_BENCH_SMOKE", "") not in ("", "0"):
    FAMILIES = ["test_taylor"]  # the quickest family: the smoke run checks the machinery


class PropertySuite:
    """Seconds for ``CI=true pytest properties/<family>.py``."""

    params: ClassVar[list[list[str]]] = [FAMILIES]
    param_names: ClassVar[list[str]] = ["family"]
    unit = "seconds"
    timeout = 1800.0
    number = 1
    repeat = 1
    rounds = 1

    def track_ci_profile_seconds(self, family: str) -> float:
        env = {**os.environ, "CI": "true", "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1",
               "MKL_NUM_THREADS": "1"}
        start = time.perf_counter()
        subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
             str(PROPERTIES / f"{family}.py")],
            cwd=PROPERTIES.parent, env=env, check=True, capture_output=True,
        )
        return time.perf_counter() - start
