"""A small file cache for slow, deterministic high-precision results (e.g. quadrature rules).

Values are JSON-serialisable; mpmath numbers are stored as decimal strings by the caller. Files
live under ``platformdirs.user_cache_dir("kernel-verify")`` (override with the environment
variable ``KV_CACHE_DIR``; set ``KV_NO_FILE_CACHE=1`` to disable). Writes are atomic
(:mod:`kernel_verify.verify.atomic`: temporary file + ``os.replace``), so parallel pytest
workers can share the cache; an unreadable or corrupt file is treated as a miss and rewritten.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

from kernel_verify.verify.atomic import write_text

__all__ = ["cache_dir", "file_cache_get", "file_cache_put"]


def cache_dir() -> Path | None:
    """The cache directory, or None when the file cache is disabled."""
    if os.environ.get("KV_NO_FILE_CACHE"):
        return None
    root = os.environ.get("KV_CACHE_DIR")
    if root is None:
        import platformdirs

        root = platformdirs.user_cache_dir("kernel-verify")
    return Path(root)


def _path(namespace: str, key: str) -> Path | None:
    root = cache_dir()
    if root is None:
        return None
    digest = hashlib.sha256(key.encode()).hexdigest()[:24]
    return root / namespace / f"{digest}.json"


def file_cache_get(namespace: str, key: str) -> Any | None:
    """The value stored under ``key`` (None when absent, disabled or unreadable)."""
    path = _path(namespace, key)
    if path is None or not path.exists():
        return None
    try:
        record = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return record.get("value") if record.get("key") == key else None


def file_cache_put(namespace: str, key: str, value: Any) -> None:
    """Store ``value`` under ``key`` (silently skipped when the directory is not writable)."""
    path = _path(namespace, key)
    if path is None:
        return
    try:
        write_text(path, json.dumps({"key": key, "value": value}))
    except OSError:
        return
