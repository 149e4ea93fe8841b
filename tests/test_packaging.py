"""The distribution as a user gets it: build the wheel, install it into a fresh virtualenv with
no checkout on the path, and run the shipped suite from another directory.

* ``import kernel_verify`` works; ``import impls`` / ``import verify`` / ``import properties``
  do not (one namespace, nothing else in site-packages);
* ``kernel-verify check`` passes the README's example adapter and fails a deliberately wrong one
  (``tests/data/wrong_favor.py``) with evidence;
* ``pytest --kv-target`` (the ``pytest11`` plugin) collects the installed suite with no path.

The virtualenv is built once per run: torch and its own dependencies are linked from the
environment running the tests, the rest come from the local wheel cache. Every package folder
must be listed in ``pyproject.toml``'s ``packages``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PACKAGE_DIRS = {"kernel_verify": "kernel_verify", "kernel_verify.impls": "impls",
                "kernel_verify.verify": "verify", "kernel_verify.properties": "properties",
                "kernel_verify.examples": "examples"}
#: Folders shipped as data only (no __init__.py): the documentation the suite cites.
DATA_PACKAGES = {"kernel_verify.docs": "docs"}
# A short, fixed slice of the suite: enough to tell right from wrong, quick on 2 cores.
KEYWORD = "test_unbiased_on_grid or test_partition_of_unity"
# The example's run adds the NaN-input property, which its attention does not claim to pass
# (``validates_input``): ``not credited``, both in ``check`` and in the pytest plugin.
EXAMPLE_KEYWORD = f"{KEYWORD} or test_non_finite_input_is_rejected"


def _clean_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PYTHON", "KV_", "PYTEST_", "VIRTUAL_ENV"))}
    env["HYPOTHESIS_PROFILE"] = "ci"
    return env


def test_every_package_folder_is_listed_in_pyproject():
    listed = set(tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]
                 ["packages"])
    found = set()
    for pkg, folder in PACKAGE_DIRS.items():
        for init in (REPO / folder).rglob("__init__.py"):
            rel = init.parent.relative_to(REPO / folder)
            found.add(".".join([pkg, *rel.parts]))
    assert found <= listed, f"package folders missing from pyproject.toml: {sorted(found - listed)}"
    assert listed - set(DATA_PACKAGES) <= found, (
        f"listed packages with no folder: {sorted(listed - found)}")
    for pkg, folder in DATA_PACKAGES.items():
        assert pkg in listed and (REPO / folder).is_dir(), pkg


def _shared_torch(folder: Path, roots: tuple[str, ...] = ("torch",)) -> Path:
    """``folder`` filled with symbolic links to torch (and the other ``roots``) and to every
    distribution they require (transitively, extras left out), taken from this interpreter's
    environment: the fresh virtualenv sees them through one ``.pth`` line instead of a ~1 GB copy
    of the CPU wheel and its dependencies. Only these distributions are linked (no
    ``kernel_verify``, nothing of the checkout): the rest of the wheel's dependencies are
    installed the usual way."""
    from importlib.metadata import PackageNotFoundError, distribution

    from packaging.requirements import Requirement

    folder.mkdir(parents=True)
    seen: set[str] = set()
    todo = list(roots)
    while todo:
        try:
            dist = distribution(todo.pop())
        except PackageNotFoundError:  # an optional root (ipykernel) absent here
            continue
        name = dist.metadata["Name"].lower().replace("_", "-")
        if name in seen:
            continue
        seen.add(name)
        assert not name.startswith("kernel-verify"), name
        for top in {Path(f).parts[0] for f in dist.files or ()} - {"..", "__pycache__"}:
            if not (folder / top).exists():
                (folder / top).symlink_to(Path(dist.locate_file(top)))
        for line in dist.requires or ():
            req = Requirement(line)
            if req.marker is None or req.marker.evaluate({"extra": ""}):
                todo.append(req.name)
    return folder


def build_installed(root: Path) -> Path:
    """A fresh virtualenv under ``root`` with the built wheel (and its dependencies) and nothing
    else. torch and its own dependencies are this environment's, linked in
    (:func:`_shared_torch`): pip finds them satisfied and installs the rest from the local wheel
    cache. ipykernel (and what it needs) is linked too where this environment has it (the
    ``notebook`` extra): tests/test_notebook.py runs a notebook kernel in this virtualenv."""
    dist, venv = root / "dist", root / "venv"
    run = dict(capture_output=True, text=True, check=False, env=_clean_env())
    build = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps",
                            "--no-build-isolation", "-w", str(dist), str(REPO)], **run)
    assert build.returncode == 0, build.stdout[-3000:] + build.stderr[-3000:]
    wheel = next(dist.glob("kernel_verify-*.whl"))
    # No pip of its own: this environment's pip installs into it (``--python``).
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    py = str(venv / "bin" / "python")
    site = subprocess.run([py, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                          capture_output=True, text=True, check=True).stdout.strip()
    # The folder's name ends in site-packages: Hypothesis takes a module whose path has no
    # "/site-packages/" for the user's own code and reads constants from its source (torch's
    # thousands of modules: measured +6 s of CPU per pytest process).
    linked = _shared_torch(root / "linked" / "site-packages", ("torch", "ipykernel"))
    (Path(site) / "kv_linked_torch.pth").write_text(f"{linked}\n")
    # --no-compile: pip would byte-compile every module of every dependency, most never imported
    # here; each import writes the bytecode of what is used.
    pip = [sys.executable, "-m", "pip", "--python", py, "install", "--quiet", "--no-compile"]
    # The CPU wheel of torch (a bare `torch` requirement could pull a CUDA build): satisfied by
    # the linked one, whose version is pinned here.
    torch_version = __import__("torch").__version__.split("+")[0]
    inst = subprocess.run([*pip, f"torch=={torch_version}", str(wheel)], **run)
    assert inst.returncode == 0, inst.stdout[-3000:] + inst.stderr[-3000:]
    return venv


def shared_installed(tmp_path_factory) -> Path:
    """The wheel's virtualenv, built once per test run even under pytest-xdist: the first worker
    to ask builds it in the run's shared temporary folder (under a file lock), the others wait
    and reuse it (tests/test_packaging.py and tests/test_notebook.py share it)."""
    import fcntl

    if shutil.which("git") is None:
        pytest.skip("git is needed to build from a clean copy of the sources")
    base = tmp_path_factory.getbasetemp()
    shared = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    root = shared / "kv-wheel"
    with open(shared / "kv-wheel.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        ready = root / "ready"
        if not ready.exists():
            shutil.rmtree(root, ignore_errors=True)
            root.mkdir()
            build_installed(root)
            ready.write_text("ok")
    return root / "venv"


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    """A fresh virtualenv with the built wheel (:func:`build_installed`), one per test run."""
    return shared_installed(tmp_path_factory)


def _work_dir(tmp_path: Path) -> Path:
    work = tmp_path / "elsewhere"
    work.mkdir()
    shutil.copy(REPO / "examples" / "my_favor.py", work / "my_favor.py")
    shutil.copy(REPO / "tests" / "data" / "wrong_favor.py", work / "wrong_favor.py")
    return work


def _run(venv: Path, work: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([*args], cwd=work, env=_clean_env(), capture_output=True, text=True,
                          check=False)


def test_one_namespace_is_installed(installed, tmp_path):
    work = _work_dir(tmp_path)
    py = str(installed / "bin" / "python")
    assert _run(installed, work, py, "-c", "import kernel_verify").returncode == 0
    for name in ("impls", "verify", "properties", "tests", "examples", "benchmarks"):
        proc = _run(installed, work, py, "-c", f"import {name}")
        assert proc.returncode != 0 and "ModuleNotFoundError" in proc.stderr, (name, proc.stderr)
    site = subprocess.run([py, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                          capture_output=True, text=True, check=True).stdout.strip()
    ours = {p.name for p in Path(site).iterdir() if p.name.startswith("kernel_verify")}
    assert {n for n in ours if not n.endswith(".dist-info")} == {"kernel_verify"}, ours
    # The package is the wheel's copy, and no folder of the checkout is on the path (torch and
    # its dependencies are linked from this environment, whose editable kernel_verify must not
    # leak in).
    where = _run(installed, work, py, "-c",
                 "import sys, kernel_verify; print(kernel_verify.__file__, *sys.path, sep='\\n')")
    assert where.returncode == 0, where.stderr
    package, *path = where.stdout.splitlines()
    assert Path(package).parent == Path(site) / "kernel_verify", package
    assert not [p for p in path if p and Path(p).resolve().is_relative_to(REPO)], path


def test_the_main_job_and_the_python_api_import_from_the_wheel(installed, tmp_path):
    """`kernel-verify report` needs matplotlib (a core dependency now): the report's entry
    module imports in the wheel's environment, and the public API is there."""
    work = _work_dir(tmp_path)
    py = str(installed / "bin" / "python")
    # One process: the imports, then `kernel-verify report --help` through the console script's
    # entry point (the script itself runs in the `check` tests below).
    proc = _run(installed, work, py, "-c", "import kernel_verify.report.main, matplotlib; "
                "from kernel_verify import check, AttentionTarget, FeatureMapTarget, "
                "RandomMatrixTarget, KernelApproxTarget, CheckResult; "
                "from kernel_verify.cli import main; main(['report', '--help'])")
    assert proc.returncode == 0 and "--quick" in proc.stdout, proc.stderr[-4000:]


@pytest.fixture(scope="module")
def example_check(installed, tmp_path_factory) -> tuple[subprocess.CompletedProcess, dict]:
    """``kernel-verify check`` of the README's example adapter, shipped in the wheel (no copy of
    it in the directory), as a user runs it (two pytest workers, the default), with its JSON
    record: one run, read by the two tests below."""
    import json

    where = tmp_path_factory.mktemp("example_check")
    out = where / "check.json"
    proc = _run(installed, where, str(installed / "bin" / "kernel-verify"), "check",
                "kernel_verify.examples.my_favor:targets", "-k", EXAMPLE_KEYWORD,
                "--json", str(out))
    return proc, (json.loads(out.read_text()) if out.exists() else {})


def test_check_passes_the_example_and_fails_a_wrong_adapter(installed, example_check, tmp_path):
    work = _work_dir(tmp_path)
    cli = str(installed / "bin" / "kernel-verify")
    good, _ = example_check
    assert good.returncode == 0, good.stdout[-4000:] + good.stderr[-4000:]
    assert " 0 failed" in good.stdout and "PASS" in good.stdout, good.stdout
    assert "(2 workers)" in good.stderr, good.stderr[-2000:]
    # The default run (two pytest workers) above; one pytest process here, half the start-up.
    bad = _run(installed, work, cli, "check", "wrong_favor:targets", "-k", KEYWORD, "--jobs", "1")
    assert bad.returncode == 1, bad.stdout[-4000:] + bad.stderr[-4000:]
    assert "FAIL" in bad.stdout and "wrong_favor" in bad.stdout, bad.stdout
    assert "| " in bad.stdout, f"no evidence printed under the failure:\n{bad.stdout}"


def test_the_docs_that_skip_reasons_cite_are_shipped(installed, tmp_path):
    """Skip reasons and ``list`` cite ``docs/math.md §N``: the wheel carries docs/ as
    ``kernel_verify/docs``, every section cited by the suite's own text included."""
    import re

    py = str(installed / "bin" / "python")
    proc = _run(installed, tmp_path, py, "-c", "import kernel_verify.docs as d, pathlib; "
                "print(pathlib.Path(list(d.__path__)[0]))")
    assert proc.returncode == 0, proc.stderr[-3000:]
    docs = Path(proc.stdout.strip())
    assert docs.parent.name == "kernel_verify", docs
    shipped = {p.name for p in docs.glob("*.md")}
    assert shipped == {p.name for p in (REPO / "docs").glob("*.md")}, shipped
    math = (docs / "math.md").read_text(encoding="utf-8")
    cited = set(re.findall(r"docs/math\.md §(\d+)",
                           "".join(p.read_text(encoding="utf-8")
                                   for p in (REPO / "properties").glob("*.py"))))
    for section in cited:
        assert re.search(rf"^#+ §{section}[ .]", math, flags=re.M), section


def test_pytest_plugin_runs_the_installed_suite(installed, example_check, tmp_path):
    """``pytest --kv-target`` collects the installed suite and counts as ``check`` does: the
    example's attention does not claim ``validates_input``, so its NaN-input property is ``not
    credited`` in both (pytest's counts line too), never a pass."""
    work = _work_dir(tmp_path)
    py = str(installed / "bin" / "python")
    proc = _run(installed, work, py, "-m", "pytest", "--kv-target", "my_favor:targets", "-v",
                "-p", "no:cacheprovider", "-k", EXAMPLE_KEYWORD)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    # The working directory holds no tests: what ran is the suite inside the installed package.
    assert "test_attention_identities.py::test_partition_of_unity" in proc.stdout, proc.stdout
    last = proc.stdout.splitlines()[-1]
    assert "2 passed" in last and "not credited" in last, proc.stdout
    assert "site-packages/kernel_verify/properties (target my_favor:targets)" in proc.stdout, (
        proc.stdout)
    [plugin] = [ln for ln in proc.stdout.splitlines() if "as `kernel-verify check` counts" in ln]
    # The same properties of the same module, run by `check` (the example's shipped copy).
    check, record = example_check
    assert check.returncode == 0, check.stdout[-4000:] + check.stderr[-4000:]
    counts = record["counts"]
    assert counts["pass"] == 2 and counts["not credited"] == 1, counts
    words = (("pass", "passed"), ("fail", "failed"), ("not credited", "not credited"),
             ("skip", "skipped"))
    assert plugin.startswith(", ".join(f"{counts[k]} {w}" for k, w in words) + " — "), (
        plugin, counts)


def test_the_readme_shows_the_forms_example_as_shipped():
    """The README's worked example of the forms protocol is examples/linear_forms.py, the
    module the wheel ships as ``kernel_verify.examples.linear_forms`` (verdicts: README)."""
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    body = (REPO / "examples" / "linear_forms.py").read_text(encoding="utf-8")
    body = body.split('"""', 2)[2].strip()
    assert f"```python\n{body}\n```" in readme
    assert readme.startswith("# kernel-verify") and "pip install kernel-verify" in \
        readme.split("## Set up and run")[0]
