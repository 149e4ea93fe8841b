"""Prepare the GPU run for a machine without ``.git`` (the lent device gets a copy of the working
tree only): export the previous commit's source folders to ``build/gpu/base`` and write the
current commit to ``build/gpu/HEAD_COMMIT``.  Then carry ``build/gpu`` along and run
``python -m tools.gpu.run --device cuda --base-tree build/gpu/base`` there.

    python -m tools.gpu.prepare [--base HEAD~1]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from tools.gpu import versions

ROOT = Path(__file__).resolve().parents[2]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tools.gpu.prepare", description=__doc__)
    ap.add_argument("--base", default="HEAD~1", help="the previous commit (default HEAD~1)")
    args = ap.parse_args(argv)
    try:
        tree, commit = versions.export_commit(ROOT, args.base, ROOT / "build" / "gpu" / "base")
        head = versions.git("rev-parse", "HEAD", cwd=ROOT)
    except ValueError as exc:
        print(f"gpu-prepare: {exc}", file=sys.stderr)
        return 2
    (ROOT / "build" / "gpu" / "HEAD_COMMIT").write_text(head + "\n")
    print(f"base {commit[:8]} exported to {tree.relative_to(ROOT)}; head {head[:8]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
