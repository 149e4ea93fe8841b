"""A small file cache for slow, deterministic high-precision results (e.g. quadrature rules).

Values are JSON-serialisable. Exact numbers go through :func:`exact_text` (keys) and
:func:`mpf_to_json` / :func:`mpf_from_json` (stored values): an mpf is written as its full binary
record ``(sign, mantissa, exponent, bitcount)``, so a key or a value read back is the very number
that was written, **sign included**. (mpmath keeps ``mpf.man`` and ``mpf.man_exp`` unsigned: a
key built from them gave ``x − y`` and its mirror images the same entry, and a stored negative
value came back positive; :data:`CACHE_FORMAT` 2 moved every namespace so that no entry written
under those keys is ever read.)

Files live under ``platformdirs.user_cache_dir("kernel-verify")/v<CACHE_FORMAT>`` (override the
root with the environment variable ``KV_CACHE_DIR``; set ``KV_NO_FILE_CACHE=1`` to disable).
Writes are atomic (:mod:`kernel_verify.verify.atomic`: temporary file + ``os.replace``), so
parallel pytest workers can share the cache; an unreadable or corrupt file is treated as a miss
and rewritten.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import mpmath
import numpy as np

from kernel_verify.verify.atomic import write_text

__all__ = [
    "CACHE_FORMAT",
    "cache_dir",
    "exact_text",
    "file_cache_get",
    "file_cache_put",
    "mpf_from_json",
    "mpf_to_json",
    "source_digest",
]

#: Version of the on-disk layout and of the exact key/value encodings. Bumped to 2 when keys and
#: values became signed (module docstring): entries of earlier formats live in other folders and
#: are never read.
CACHE_FORMAT = 2


def cache_dir() -> Path | None:
    """The cache directory of this :data:`CACHE_FORMAT`, or None when the file cache is
    disabled."""
    if os.environ.get("KV_NO_FILE_CACHE"):
        return None
    root = os.environ.get("KV_CACHE_DIR")
    if root is None:
        import platformdirs

        root = platformdirs.user_cache_dir("kernel-verify")
    return Path(root) / f"v{CACHE_FORMAT}"


def source_digest(paths: Iterable[str | Path], *extra: str) -> str:
    """16 hex digits of sha256 over ``extra`` (e.g. a library's version) and, for each of
    ``paths`` in the order given, its file name and bytes: the code a cached value depends on,
    part of its key, so that a stored value is used only if the same code computed it."""
    h = hashlib.sha256()
    for text in extra:
        h.update(text.encode())
    for path in map(Path, paths):
        h.update(path.name.encode())
        h.update(path.read_bytes())
    return h.hexdigest()[:16]


def exact_text(obj: Any) -> str:
    """An exact, signed text of a key made of mpf, float, int, str, None, NumPy arrays (shape and
    values) and (nested) tuples, lists or dicts with sortable keys: ``mpf`` as
    ``m(sign, man, exp, bc)`` (its binary record), ``float`` as ``float.hex``.
    Two keys have the same text only if they hold the same numbers; any other type is refused
    (a ``repr`` may round)."""
    if isinstance(obj, np.ndarray):
        return f"a{obj.shape}{exact_text(obj.ravel().tolist())}"
    if isinstance(obj, dict):
        items = sorted(obj.items())
        return "{" + ",".join(f"{exact_text(k)}:{exact_text(v)}" for k, v in items) + "}"
    if isinstance(obj, tuple | list):
        inner = ",".join(exact_text(v) for v in obj)
        return f"({inner})" if isinstance(obj, tuple) else f"[{inner}]"
    if isinstance(obj, mpmath.mpf):
        return "m" + repr(tuple(int(v) for v in obj._mpf_))
    if isinstance(obj, bool) or obj is None or isinstance(obj, str):
        return repr(obj)
    if isinstance(obj, int | np.integer):
        return str(int(obj))
    if isinstance(obj, float | np.floating):
        return float(obj).hex()
    raise TypeError(f"exact_text: no exact text for {type(obj).__name__}")


def mpf_to_json(value: Any) -> list:
    """An mpf as ``[sign, mantissa (decimal text), exponent, bitcount]``: exact and signed."""
    sign, man, exp, bc = value._mpf_
    return [int(sign), str(int(man)), int(exp), int(bc)]


def mpf_from_json(stored: Any) -> Any:
    """The mpf written by :func:`mpf_to_json`, bit for bit (not rounded to the working
    precision)."""
    sign, man, exp, bc = stored
    return mpmath.mp.make_mpf((int(sign), mpmath.libmp.MPZ(int(man)), int(exp), int(bc)))


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
