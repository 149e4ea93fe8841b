"""pytest configuration: Hypothesis profiles and the backend header.

Profiles (``HYPOTHESIS_PROFILE`` selects one; under ``CI=true`` the default is ``ci``):

* ``dev``: quick local runs (few examples).
* ``ci``: derandomized (the same examples on every run), no deadline, a fixed example budget.
* ``nightly``: fresh random seeds and many more examples.
"""

from __future__ import annotations

import os

import torch
from hypothesis import HealthCheck, settings

from properties.backends import header_lines

settings.register_profile(
    "dev", max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.register_profile(
    "ci",
    max_examples=25,
    derandomize=True,
    deadline=None,
    database=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile(
    "nightly",
    max_examples=300,
    deadline=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow],
)
_default = "ci" if os.environ.get("CI", "").lower() in ("1", "true", "yes") else "dev"
PROFILE = os.environ.get("HYPOTHESIS_PROFILE", _default)
settings.load_profile(PROFILE)

# Accuracy checks never run in TF32 on CUDA (recorded in the header).
torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False


def pytest_report_header(config) -> list[str]:
    return [
        f"kernel-verify: Hypothesis profile {PROFILE!r}; torch {torch.__version__}; "
        "TF32 disabled for accuracy checks",
        "backends:",
        *header_lines(),
    ]
