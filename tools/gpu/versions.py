"""Two versions of the project's code in one interpreter, so that a cell can alternate them.

A *tree* is a folder with the project's source folders (``impls``, ``verify``, ``properties``,
``kernel_verify``, ``benchmarks``): the checkout itself, or another commit exported with
``git archive`` (:func:`export_commit`; on the device machine, which has no ``.git``, the base is
exported before the run and carried along).  :func:`load` builds a *shadow* of a tree — a folder
whose ``kernel_verify/`` holds links to the tree's application modules and to its ``impls``,
``verify`` and ``properties`` folders (the mapping of ``pyproject.toml``), beside a link to its
``benchmarks`` — imports the requested modules from it with the shadow first on ``sys.path``,
and takes those modules out of ``sys.modules`` again.  The modules keep their own globals, so two
versions live side by side; :meth:`Version.active` puts one version's modules back into
``sys.modules`` while its code runs, so that imports made lazily inside a function resolve to the
same version.
"""

from __future__ import annotations

import contextlib
import importlib
import shutil
import subprocess
import sys
import tarfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType

#: Source folders of a tree (mapped into the one namespace as pyproject.toml does).
MAPPED = ("impls", "verify", "properties")
TOP = ("kernel_verify", "benchmarks")
ROOTS = (*TOP,)


def _ours(name: str) -> bool:
    return name.split(".", 1)[0] in ROOTS


def _take_ours() -> dict[str, ModuleType]:
    return {k: sys.modules.pop(k) for k in [k for k in sys.modules if _ours(k)]}


def shadow(tree: Path, where: Path) -> Path:
    """A folder importable as the project of ``tree`` (links only; rebuilt each time)."""
    tree = tree.resolve()
    missing = [f for f in (*MAPPED, *TOP) if not (tree / f).is_dir()]
    if missing:
        raise ValueError(f"tree {tree} is not a kernel-verify source tree: no {', '.join(missing)}")
    if where.exists():
        shutil.rmtree(where)
    package = where / "kernel_verify"
    package.mkdir(parents=True)
    for entry in (tree / "kernel_verify").iterdir():
        if entry.name != "__pycache__":
            (package / entry.name).symlink_to(entry)
    for folder in MAPPED:
        (package / folder).symlink_to(tree / folder)
    (where / "benchmarks").symlink_to(tree / "benchmarks")
    return where


@dataclass
class Version:
    """One tree's modules, loaded once; ``label`` names it in reports (``base``/``head``)."""

    label: str
    tree: Path
    commit: str
    modules: dict[str, ModuleType] = field(default_factory=dict)

    @contextlib.contextmanager
    def active(self) -> Iterator[None]:
        """This version's modules in ``sys.modules`` (others' saved and restored)."""
        saved = _take_ours()
        sys.modules.update(self.modules)
        try:
            yield
        finally:
            # modules imported lazily while active belong to this version from now on
            self.modules.update({k: m for k, m in sys.modules.items() if _ours(k)})
            _take_ours()
            sys.modules.update(saved)

    def get(self, dotted: str) -> object:
        """``module.Class`` or ``module.Class.attr`` of this version; KeyError if absent."""
        module, _, rest = dotted.partition(":")
        mod = self.modules.get(module)
        if mod is None:
            raise KeyError(f"{self.label}: module {module} is not loaded")
        obj: object = mod
        for part in rest.split("."):
            if not hasattr(obj, part):
                raise KeyError(f"{self.label}: {module} has no {rest}")
            obj = getattr(obj, part)
        return obj


def load(label: str, tree: Path, commit: str, modules: list[str], work: Path) -> Version:
    """Import ``modules`` (dotted names, e.g. ``benchmarks.attention``) from ``tree``.

    A module missing from this tree (a benchmark added later) is left out; :meth:`Version.get`
    then says so, and the cell is reported as new rather than compared.
    """
    where = shadow(tree, work / f"shadow-{label}")
    saved = _take_ours()
    sys.path.insert(0, str(where))
    importlib.invalidate_caches()
    version = Version(label, tree, commit)
    try:
        for name in modules:
            try:
                importlib.import_module(name)
            except ModuleNotFoundError as exc:
                if exc.name is None or not _ours(exc.name):
                    raise
        version.modules = {k: m for k, m in sys.modules.items() if _ours(k)}
    finally:
        sys.path.remove(str(where))
        _take_ours()
        sys.modules.update(saved)
    for name, mod in version.modules.items():
        origin = getattr(mod, "__file__", None)
        if origin and not Path(origin).resolve().is_relative_to(tree.resolve()):
            raise RuntimeError(f"{label}: {name} was imported from {origin}, outside {tree}")
    return version


def git(*args: str, cwd: Path) -> str:
    out = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True)
    if out.returncode:
        raise ValueError(f"git {' '.join(args)}: {out.stderr.strip()}")
    return out.stdout.strip()


def export_commit(repo: Path, rev: str, dest: Path) -> tuple[Path, str]:
    """The source folders of commit ``rev`` of ``repo`` written to ``dest`` (``git archive``);
    returns the tree and the full commit hash.  ``dest`` is replaced."""
    commit = git("rev-parse", "--verify", f"{rev}^{{commit}}", cwd=repo)
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    archive = dest.with_suffix(".tar")
    with archive.open("wb") as handle:
        done = subprocess.run(["git", "archive", "--format=tar", commit, *MAPPED, *TOP],
                              cwd=repo, stdout=handle, stderr=subprocess.PIPE)
    if done.returncode:
        raise ValueError(f"git archive {commit}: {done.stderr.decode().strip()}")
    with tarfile.open(archive) as tar:
        tar.extractall(dest, filter="data")
    archive.unlink()
    (dest / "COMMIT").write_text(commit + "\n")
    return dest, commit
