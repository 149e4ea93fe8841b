"""The ``kernel-verify`` command line.

Subcommands (each has ``--help``):

* ``list``: every registered feature map with its target kernel and claims (``--json``).
* ``report``: the main job: verification of every registered map and the variance reports.
* ``check TARGET``: run the property suite against a third-party implementation
  (``module:attribute``; see README "Verify your own implementation").
* ``mutants``: run the suite against every mutant and print the kill matrix.
* ``calibrate``: measure the false-alarm rate of the statistical properties.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence

from kernel_verify.impls.registry import all_maps


def _cmd_list(args: argparse.Namespace) -> int:
    maps = all_maps(family=args.family) if args.family else all_maps()
    if args.json:
        json.dump([m.describe(args.d) for m in maps], sys.stdout, indent=2, ensure_ascii=False)
        sys.stdout.write("\n")
        return 0
    rows = [(m.name, m.family, m.kernel, ", ".join(sorted(m.claims))) for m in maps]
    header = ("name", "family", "kernel", "claims")
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(3)]
    line = f"{{:<{widths[0]}}}  {{:<{widths[1]}}}  {{:<{widths[2]}}}  {{}}"
    print(line.format(*header))
    print(line.format(*("-" * w for w in widths), "-" * 6))
    for row in rows:
        print(line.format(*row))
    print(f"\n{len(rows)} feature maps")
    return 0


def _lazy(module: str, function: str) -> Callable[[argparse.Namespace], int]:
    """Import heavy subcommands only when they run (``list`` stays fast)."""

    def run(args: argparse.Namespace) -> int:
        import importlib

        return importlib.import_module(module).__getattribute__(function)(args)

    return run


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="kernel-verify",
        description="Verify kernel feature maps (random features, linear attention) against "
        "high-precision references.",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser("list", help="list every registered feature map")
    p.add_argument("--json", action="store_true", help="print JSON (one object per map)")
    p.add_argument("--family", help="only maps of this family (rff, softmax, …)")
    p.add_argument("--d", type=int, default=4, help="input dimension used to describe sizes")
    p.set_defaults(run=_cmd_list)

    p = sub.add_parser("report", help="verify every map and write the variance reports")
    p.add_argument("--out", default="reports", help="output folder (default: reports/)")
    p.add_argument("--quick", action="store_true", help="fewer points and samples")
    p.add_argument("--maps", nargs="*", help="only these map names (default: all)")
    p.add_argument("--no-plots", action="store_true", help="skip the PNG plots")
    p.set_defaults(run=_lazy("kernel_verify.verify.report.main", "run_report"))

    p = sub.add_parser("check", help="run the property suite against a third-party target")
    p.add_argument("target", help="module:attribute naming an adapter (see README)")
    p.add_argument("--profile", default=None, help="Hypothesis profile: dev, ci or nightly")
    p.add_argument("-k", dest="keyword", default=None, help="pytest -k expression")
    p.add_argument("--json", dest="json_out", default=None, help="write the verdict as JSON here")
    p.set_defaults(run=_lazy("kernel_verify.verify.thirdparty.cli", "run_check"))

    p = sub.add_parser("mutants", help="run the suite against every mutant; print the kill matrix")
    p.add_argument("--only", nargs="*", help="only these mutant names")
    p.add_argument("--jobs", type=int, default=2, help="parallel pytest workers (default 2)")
    p.add_argument("--json", dest="json_out", default=None, help="write the matrix as JSON here")
    p.add_argument("--blackbox", action="store_true",
                   help="also run every feature-map mutant wrapped black-box (sample_fn only), "
                   "with and without its declared family, and correct maps as controls")
    p.set_defaults(run=_lazy("kernel_verify.verify.mutants.runner", "run_mutants"))

    p = sub.add_parser("calibrate", help="false-alarm rate of the statistical properties")
    p.add_argument("--seeds", type=int, default=200, help="fresh seeds per statistical check")
    p.add_argument("--alpha", type=float, default=0.05, help="loose per-check α to calibrate at")
    p.add_argument("--part", dest="parts", nargs="*", default=None,
                   choices=["matrices", "convergence", "blackbox"],
                   help="only these groups of checks (default: all)")
    p.set_defaults(run=_lazy("kernel_verify.verify.calibration", "run_calibration"))
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.run(args) or 0)
    except BrokenPipeError:  # e.g. `kernel-verify list | head`
        sys.stderr.close()
        return 0


if __name__ == "__main__":
    sys.exit(main())
