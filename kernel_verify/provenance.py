"""Where a result came from: the commit of the checkout, its uncommitted changes, a fingerprint of
the code, under one rule for every report that stamps them (calibration, mutants, conformance,
the variance report).

**The rule.** The code a result depends on is the project's four layers, :data:`CODE_PATHS`
(``impls``, ``verify``, ``properties``, ``kernel_verify``: the folders of the repository that
install as ``kernel_verify``). A checkout is *dirty* when ``git status --porcelain`` lists a path
under one of them; the stamp names those paths. An installed wheel (no git checkout) is stamped
with its version instead. The fingerprint (:func:`code_fingerprint`) is a hash of the sources
of the suite, the truth and the implementations (plus any further files a result depends on,
e.g. one library's adapter): two runs with the same fingerprint ran the same checks on the same
implementations, committed or not.
"""

from __future__ import annotations

import hashlib
import subprocess
from collections.abc import Iterable
from pathlib import Path

__all__ = ["CODE_PATHS", "code_fingerprint", "code_state", "commit", "dirty_paths"]

#: The folders of the repository whose changes make a checkout dirty (the installed layers).
CODE_PATHS = ("impls", "verify", "properties", "kernel_verify")

_HERE = Path(__file__).resolve().parent


def _git(*args: str) -> subprocess.CompletedProcess | None:
    try:
        return subprocess.run(["git", "-C", str(_HERE), *args], capture_output=True, text=True,
                              check=False, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None


def commit() -> str | None:
    """The 12-digit short hash of the checkout's ``HEAD``; None outside a git checkout (an
    installed wheel) or where git cannot run."""
    out = _git("rev-parse", "--short=12", "HEAD")
    if out is None or out.returncode != 0 or not out.stdout.strip():
        return None
    return out.stdout.strip()


def dirty_paths() -> list[str]:
    """The paths under :data:`CODE_PATHS` that differ from ``HEAD`` (modified, added, deleted,
    untracked and not ignored), relative to the repository root; empty outside a checkout."""
    top = _git("rev-parse", "--show-toplevel")
    if top is None or top.returncode != 0:
        return []
    root = top.stdout.strip()
    out = _git("-C", root, "status", "--porcelain", "--", *CODE_PATHS)
    if out is None or out.returncode != 0:
        return []
    return sorted(line[3:] for line in out.stdout.split("\n") if line.strip())


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("kernel-verify")
    except PackageNotFoundError:
        return "unknown version"


def code_state() -> str:
    """One line for a report's stamp: ``<commit>``, ``<commit> (uncommitted changes: a, b)``, or
    ``kernel-verify <version> (not a git checkout)``."""
    head = commit()
    if head is None:
        return f"kernel-verify {_version()} (not a git checkout)"
    changed = dirty_paths()
    return head + (f" (uncommitted changes: {', '.join(changed)})" if changed else "")


def code_fingerprint(extra: Iterable[Path] = ()) -> str:
    """sha256 (first 12 hex digits) of the sources of ``impls``, ``properties`` and ``verify``
    as installed, and of the ``extra`` files that exist (name and bytes): equal fingerprints, the
    same checks on the same implementations."""
    import kernel_verify.impls
    import kernel_verify.properties
    import kernel_verify.verify

    digest = hashlib.sha256()
    roots = [Path(m.__file__).resolve().parent for m in
             (kernel_verify.impls, kernel_verify.properties, kernel_verify.verify)]
    files = sorted(f for r in roots for f in r.rglob("*.py"))
    files += [Path(f) for f in extra]
    for f in files:
        if f.exists():
            digest.update(f.name.encode())
            digest.update(f.read_bytes())
    return digest.hexdigest()[:12]
