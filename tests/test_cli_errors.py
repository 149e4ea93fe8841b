"""The command line never shows a traceback for a user's mistake: one line on stderr, exit
status 2, the valid choices where there are choices (issue 13)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from kernel_verify import __version__
from kernel_verify.cli import main

CASES = [
    # (argv, words the one-line message must contain)
    (["check", "x:targets", "--profile", "bogus"], ["--profile", "'bogus'", "dev, ci, nightly"]),
    (["check", "x:targets", "--jobs", "0"], ["--jobs", ">= 1"]),
    (["report", "--maps", "nonexistent"], ["--maps", "'nonexistent'", "softmax_positive[iid]"]),
    (["list", "--d", "-3"], ["--d", ">= 1", "-3"]),
    (["list", "--d", "abc"], ["--d", "integer", "'abc'"]),
    (["list", "--family", "bogus"], ["family", "'bogus'", "softmax", "rff"]),
    (["calibrate", "--seeds", "0"], ["--seeds", ">= 20"]),
    (["calibrate", "--seeds", "5"], ["--seeds", ">= 20"]),
    (["calibrate", "--jobs", "0"], ["--jobs", ">= 1"]),
    (["calibrate", "--part", "nope"], ["--part", "matrices"]),
    (["mutants", "--only", "nope"], ["--only", "'nope'", "causal_flag_ignored"]),
    (["mutants", "--jobs", "0"], ["--jobs", ">= 1"]),
    (["bogus"], ["invalid choice", "list", "calibrate"]),
    # output paths, checked before anything runs (issue #30: a --json under a file ran the whole
    # suite, then printed a 22-line FileExistsError with exit 1)
    (["check", "x:targets", "--json", f"{__file__}/out.json"],
     ["--json", "is a file, so", "cannot be created"]),
    (["check", "x:targets", "--json", str(Path(__file__).parent)], ["--json", "is a folder"]),
    (["mutants", "--json", f"{__file__}/m.json"], ["--json", "is a file"]),
    (["report", "--out", __file__], ["--out", "is a file, not a folder"]),
    (["conformance", "--out", __file__], ["--out", "is a file, not a folder"]),
    (["conformance", "--profile", "nonsense"], ["--profile", "'nonsense'", "dev, ci"]),
    # empty selections are errors, never "everything" (issue #45: `calibrate --part` with no
    # name ran every part for hours and rewrote the committed report)
    (["report", "--maps"], ["--maps", "without a name", "leave --maps out"]),
    (["report", "--maps", ""], ["--maps", "empty name"]),
    (["report", "--maps", "softmax_positive[iid]", " "], ["--maps", "empty name (1 of 2)"]),
    (["mutants", "--only"], ["--only", "without a name"]),
    (["mutants", "--only", ""], ["--only", "empty name"]),
    (["calibrate", "--part"], ["--part", "without a name"]),
    (["calibrate", "--part", ""], ["--part", "invalid choice"]),
    (["conformance", ""], ["LIBRARY", "empty name"]),
    (["conformance", "nosuch"], ["unknown library 'nosuch'", "sklearn"]),
    # --reuse with nothing saved says so instead of running every library
    (["conformance", "sklearn", "--reuse", "--out", str(Path(__file__).parent / "kv_no_runs")],
     ["--reuse", "nothing saved", "sklearn.json", "without --reuse"]),
    # zero budgets and rounds are errors, not the default
    (["check", "x:targets", "--max-examples", "0"], ["--max-examples", ">= 1"]),
    (["check", "x:targets", "--shrink-seconds", "-1"], ["--shrink-seconds", ">= 0"]),
]


def _run(argv: list[str], capsys) -> tuple[int, str, str]:
    try:
        code = main(argv)
    except SystemExit as exc:  # argparse's own errors
        code = exc.code
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize(("argv", "words"), CASES, ids=[" ".join(a) for a, _ in CASES])
def test_user_mistake_is_one_line_and_exit_2(argv, words, capsys) -> None:
    code, out, err = _run(argv, capsys)
    assert code == 2
    assert out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert "Traceback" not in err
    for word in words:
        assert word in lines[0], (word, lines[0])


def test_version(capsys) -> None:
    code, out, _ = _run(["--version"], capsys)
    assert code == 0
    assert out.strip() == f"kernel-verify {__version__}"


def test_version_line_of_the_installed_command() -> None:
    """The console script prints the program name once: ``kernel-verify 0.1.0``."""
    import shutil

    exe = shutil.which("kernel-verify", path=str(Path(sys.executable).parent))
    if exe is None:
        pytest.skip("the kernel-verify console script is not installed beside this Python")
    proc = subprocess.run([exe, "--version"], capture_output=True, text=True, timeout=60,
                          check=False)
    assert proc.returncode == 0 and proc.stderr == ""
    assert proc.stdout == f"kernel-verify {__version__}\n"
    assert proc.stdout.count("kernel-verify") == 1


def test_list_family_filters(capsys) -> None:
    code, out, _ = _run(["list", "--family", "taylor"], capsys)
    assert code == 0 and "taylor2" in out and "rff_pairs" not in out


def test_target_module_with_syntax_error(tmp_path: Path) -> None:
    """A real subprocess of the installed command: one line naming the module and the line."""
    (tmp_path / "broken_adapter.py").write_text("targets = [\n    def f(:\n")
    exe = Path(sys.executable).with_name("kernel-verify")
    proc = subprocess.run([str(exe), "check", "broken_adapter:targets"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert "broken_adapter" in lines[0] and "SyntaxError" in lines[0] and "line" in lines[0]


@pytest.mark.parametrize(
    ("source", "words"),
    [("raise RuntimeError('boom')\n", ["RuntimeError", "boom"]),
     ("targets = 42\n", ["int", "FeatureMapTarget"]),
     ("x = 1\n", ["no attribute", "'targets'"])],
    ids=["raises", "not-a-target", "missing-attribute"],
)
def test_broken_adapters_are_one_line(tmp_path: Path, monkeypatch, capsys, source, words) -> None:
    name = f"adapter_{abs(hash(source)) % 10**8}"
    (tmp_path / f"{name}.py").write_text(source)
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    code, _, err = _run(["check", f"{name}:targets"], capsys)
    assert code == 2
    assert len(err.strip().splitlines()) == 1, err
    for word in words:
        assert word in err



def test_unwritable_output_path(monkeypatch, capsys) -> None:
    """An output path that cannot be written (``--json``, ``--out``): one line naming it, exit 2
    (the subcommand is replaced by one that fails as a write to a read-only path does)."""
    import kernel_verify.cli as cli

    def fails(args):
        raise PermissionError(13, "Permission denied", "/read-only/out.json")

    monkeypatch.setattr(cli, "_cmd_check", fails)
    code, _, err = _run(["check", "x:targets", "--json", "/read-only/out.json"], capsys)
    assert code == 2
    assert err.strip() == ("kernel-verify check: error: cannot write '/read-only/out.json': "
                           "Permission denied")
