"""Where the drivers write: ``$KV_REPORTS`` if set, else ``reports/`` under the working
directory (in a checkout, the repository's ``reports/``; for an installed copy, wherever the
command is run)."""

from __future__ import annotations

import os
from pathlib import Path

ENV = "KV_REPORTS"


def reports_dir() -> Path:
    """The folder reports are written to (created on demand by the writer)."""
    return Path(os.environ.get(ENV) or Path.cwd() / "reports")
