"""Atomic file writes: every file the suite writes goes through here.

A file is written to a temporary file in the *same folder* (so the rename stays on one file
system), flushed and fsynced, then moved over the destination with :func:`os.replace`, which is
atomic on POSIX and Windows. A reader, or a second writer running at the same time, therefore
sees either the old complete file or one new complete file, never a mixture or a truncated one.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

__all__ = ["save_figure", "write_bytes", "write_text"]


def _umask() -> int:
    """The process' umask (read from ``/proc`` where it can be, so that no other thread sees it
    changed; else set and restored at once)."""
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def write_bytes(path: str | os.PathLike[str], data: bytes) -> Path:
    """Write ``data`` to ``path`` atomically (parent folders are created); return the path."""
    if not isinstance(data, bytes | bytearray | memoryview):
        raise TypeError(f"data must be bytes, got {type(data).__name__}")
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    try:
        # mkstemp makes the file 0600 (private to its writer): the written file gets the mode
        # an ordinary open() would give it, the user's default (0666 less the umask)
        os.chmod(tmp, 0o666 & ~_umask())
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, target)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    return target


def write_text(path: str | os.PathLike[str], text: str, encoding: str = "utf-8") -> Path:
    """Write ``text`` to ``path`` atomically (see :func:`write_bytes`); return the path."""
    if not isinstance(text, str):
        raise TypeError(f"text must be a str, got {type(text).__name__}")
    return write_bytes(path, text.encode(encoding))


def save_figure(fig: object, path: str | os.PathLike[str], **savefig_kwargs: object) -> Path:
    """Save a matplotlib figure atomically (rendered in memory, then :func:`write_bytes`)."""
    import io

    buffer = io.BytesIO()
    fmt = savefig_kwargs.pop("format", None) or Path(path).suffix.lstrip(".") or "png"
    fig.savefig(buffer, format=fmt, **savefig_kwargs)  # type: ignore[attr-defined]
    return write_bytes(path, buffer.getvalue())
