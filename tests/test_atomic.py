"""Every file the suite writes goes through :mod:`kernel_verify.verify.atomic`; two writers at
once never leave a corrupt or mixed file."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from kernel_verify.verify import atomic

REPO = Path(__file__).resolve().parents[1]

_WRITER = textwrap.dedent(
    """
    import json, sys
    from kernel_verify.verify import atomic, cache
    path, tag, rounds = sys.argv[1], sys.argv[2], int(sys.argv[3])
    for i in range(rounds):
        payload = {"writer": tag, "i": i, "body": tag * 20000}
        atomic.write_text(path, json.dumps(payload))
        cache.file_cache_put("race", "key", {"writer": tag, "body": tag * 20000})
    """
)


def test_write_text_and_bytes_roundtrip(tmp_path: Path) -> None:
    target = tmp_path / "sub" / "report.md"
    atomic.write_text(target, "héllo\n")
    assert target.read_text(encoding="utf-8") == "héllo\n"
    atomic.write_bytes(target, b"\x00\x01")
    assert target.read_bytes() == b"\x00\x01"
    assert [p.name for p in target.parent.iterdir()] == ["report.md"]  # no temp file left


def test_rejects_wrong_payload_types(tmp_path: Path) -> None:
    with pytest.raises(TypeError, match="text must be a str"):
        atomic.write_text(tmp_path / "x", b"bytes")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="data must be bytes"):
        atomic.write_bytes(tmp_path / "x", "text")  # type: ignore[arg-type]


def test_failed_write_leaves_old_file_and_no_temp(tmp_path: Path, monkeypatch) -> None:
    target = tmp_path / "out.json"
    atomic.write_text(target, "old")

    def boom(*_args):
        raise OSError("disk full")

    monkeypatch.setattr(atomic.os, "replace", boom)
    with pytest.raises(OSError, match="disk full"):
        atomic.write_text(target, "new")
    assert target.read_text() == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.json"]


def test_two_processes_writing_at_once_never_corrupt(tmp_path: Path) -> None:
    """Two processes rewrite the same report file and the same cache entry 40 times each; a
    reader polling meanwhile and the final files always parse and come from one writer whole."""
    target = tmp_path / "report.json"
    env = {"KV_CACHE_DIR": str(tmp_path / "cache"), "PATH": "/usr/bin:/bin"}
    procs = [
        subprocess.Popen([sys.executable, "-c", _WRITER, str(target), tag, "40"], env=env,
                         cwd=REPO)
        for tag in ("a", "b")
    ]
    seen = 0
    while any(p.poll() is None for p in procs):
        if target.exists():
            record = json.loads(target.read_text())  # never a partial file
            assert record["body"] == record["writer"] * 20000
            seen += 1
    assert [p.returncode for p in procs] == [0, 0]
    record = json.loads(target.read_text())
    assert record["writer"] in ("a", "b") and record["body"] == record["writer"] * 20000
    from kernel_verify.verify.cache import CACHE_FORMAT

    cached = list((tmp_path / "cache" / f"v{CACHE_FORMAT}" / "race").iterdir())
    assert len(cached) == 1  # one entry, no stray temp files
    value = json.loads(cached[0].read_text())["value"]
    assert value["body"] == value["writer"] * 20000
    assert not list(tmp_path.glob(".*.tmp"))


def test_no_writer_bypasses_the_atomic_helper() -> None:
    """No module of the installed package writes a file except through ``verify.atomic``
    (the per-run results log of ``properties/results.py`` appends whole lines to a file in a
    private temporary folder and is the one exception)."""
    import re

    pattern = re.compile(r"\.write_text\(|\.write_bytes\(|\.savefig\(|open\([^)]*['\"][wa]b?['\"]")
    offenders = []
    for folder in ("impls", "verify", "properties", "kernel_verify"):
        for path in (REPO / folder).rglob("*.py"):
            rel = path.relative_to(REPO).as_posix()
            if rel in ("verify/atomic.py", "properties/results.py") or "/unit/" in rel:
                continue
            for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
                if pattern.search(line) and "atomic." not in line:
                    offenders.append(f"{rel}:{n}: {line.strip()}")
    assert not offenders, "non-atomic writes:\n" + "\n".join(offenders)


def test_written_files_get_the_users_default_mode(tmp_path: Path) -> None:
    """Not mkstemp's 0600: the mode an ordinary open() gives (0666 less the umask); issue #30
    found every report file private to its writer."""
    import os

    mask = os.umask(0o027)
    try:
        path = atomic.write_text(tmp_path / "a.md", "x")
        assert path.stat().st_mode & 0o777 == 0o640
    finally:
        os.umask(mask)
    path = atomic.write_text(tmp_path / "b.md", "x")
    assert path.stat().st_mode & 0o777 == 0o666 & ~mask
