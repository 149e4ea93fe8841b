"""The ``kernel-verify`` command line.

Subcommands (each has ``--help``):

* ``list``: every registered system (feature maps, kernel approximations, attention functions,
  random-matrix constructions) with its kind, target kernel, claims and docs/math.md section
  (``--json``, ``--kind``, ``--family``).
* ``report``: the main job: verification of every registered map and the variance reports.
* ``check TARGET``: run the property suite against a third-party implementation
  (``module:attribute``; see README "Verify your own implementation").
* ``mutants``: run the suite against every mutant and print the kill matrix.
* ``calibrate``: measure the false-alarm rate of the statistical properties.
* ``conformance``: conformance pages of the shipped library adapters (``kernel_verify.adapters``).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence
from typing import NoReturn

from kernel_verify.impls.registry import all_maps

#: Exit status for a user's mistake (bad option value, unknown name, broken adapter module).
USAGE_EXIT = 2


class UsageError(ValueError):
    """A mistake in what the user asked for: reported in one line, exit status 2."""


class _Parser(argparse.ArgumentParser):
    """argparse with one-line errors (no usage block): ``kernel-verify list: error: …``."""

    def error(self, message: str) -> NoReturn:
        self.exit(USAGE_EXIT, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def _int_at_least(minimum: int) -> Callable[[str], int]:
    """argparse ``type=``: an integer ``>= minimum``."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be >= {minimum}, got {value}")
        return value

    parse.__name__ = f"integer >= {minimum}"
    return parse


def _profile(text: str) -> str:
    """argparse ``type=``: the name of a Hypothesis profile of the suite."""
    from kernel_verify.properties.profiles import PROFILES

    if text not in PROFILES:
        raise argparse.ArgumentTypeError(
            f"unknown profile {text!r}; choose one of {', '.join(PROFILES)}"
        )
    return text


def _families() -> list[str]:
    from kernel_verify.impls.systems import all_systems

    return sorted({m.family for m in all_maps()} | {s.family for s in all_systems()})


def _check_names(args: argparse.Namespace) -> None:
    """Names the user typed (``--family``, ``report --maps``) must exist: one-line error with the
    valid choices, before any work starts."""
    family = getattr(args, "family", None)
    if family is not None and family not in _families():
        raise UsageError(f"unknown family {family!r}; choose one of {', '.join(_families())}")
    names = getattr(args, "maps", None)
    if args.command == "report" and names:
        known = {m.name for m in all_maps()}
        unknown = [n for n in names if n not in known]
        if unknown:
            raise UsageError(f"unknown map(s) {', '.join(map(repr, unknown))} for --maps; "
                             f"choose from {', '.join(sorted(known))}")
    only = getattr(args, "only", None)
    if args.command == "mutants" and only:
        from kernel_verify.mutants.catalogue import MUTANTS

        known = {m.name for m in MUTANTS}
        unknown = [n for n in only if n not in known]
        if unknown:
            raise UsageError(f"unknown mutant(s) {', '.join(map(repr, unknown))} for --only; "
                             f"choose from {', '.join(sorted(known))}")


#: Options and positional arguments that select a subset (subcommand, attribute, how the user
#: wrote it): given, they must name something. An empty selection (``--maps`` with no names,
#: ``--maps ""``) is an error, never "everything" (for ``calibrate`` that would be hours of work
#: rewriting a committed report).
_SELECTIONS = (("report", "maps", "--maps"), ("mutants", "only", "--only"),
               ("calibrate", "parts", "--part"), ("conformance", "libraries", "LIBRARY"),
               ("reports", "reports", "REPORT"))
#: Positional selections: not given is an empty list, which selects everything.
_POSITIONAL = ("LIBRARY", "REPORT")


def _check_selections(args: argparse.Namespace) -> None:
    """Every selection the user gave names at least one thing, and no name is empty."""
    for command, attr, option in _SELECTIONS:
        if args.command != command:
            continue
        value = getattr(args, attr, None)
        if value is None or (option in _POSITIONAL and not value):  # not given: everything
            continue
        if not value:
            raise UsageError(f"{option} was given without a name: an empty selection selects "
                             f"nothing; name at least one, or leave {option} out for all")
        empty = [v for v in value if not str(v).strip()]
        if empty:
            raise UsageError(f"{option} got an empty name ({len(empty)} of {len(value)}): an "
                             f"empty selection selects nothing; name at least one, or leave "
                             f"{option} out for all")


def _check_keyword(args: argparse.Namespace) -> None:
    """``check -k EXPR``: an empty expression is an error (pytest would select everything)."""
    keyword = getattr(args, "keyword", None)
    if args.command == "check" and keyword is not None and not keyword.strip():
        raise UsageError(f"-k got an empty expression ({keyword!r}): an empty selection selects "
                         "nothing; give a pytest -k expression, or leave -k out for every "
                         "property")


#: Where ``conformance`` writes without ``--out``: the committed pages (relative to the working
#: directory, a checkout's root).
COMMITTED_CONFORMANCE = "reports/conformance"


def _check_committed(args: argparse.Namespace) -> None:
    """A run that would rewrite committed reports with less than they record says so and needs
    an explicit flag: ``conformance --quick`` (smaller independent measurements) writes into
    the committed pages only with an explicit ``--out`` naming them. Sets ``conformance``'s
    default ``--out``."""
    if args.command != "conformance":
        return
    if args.out is None:
        if args.quick:
            raise UsageError(f"--quick without --out would rewrite the committed pages in "
                             f"{COMMITTED_CONFORMANCE} with smaller measurements than they "
                             "record; give --out DIR (e.g. --out build/conformance), or --out "
                             f"{COMMITTED_CONFORMANCE} to rewrite them on purpose")
        args.out = COMMITTED_CONFORMANCE


def _check_libraries(args: argparse.Namespace) -> None:
    """``conformance [LIBRARY …] [--reuse]``: every library named has an adapter; with
    ``--reuse`` (rewrite the pages from the saved runs, ``<out>/<library>.json``) at least one
    selected library has a saved run — else the command says so instead of running them all —
    and a selected library without one is named on stderr (it runs)."""
    if args.command != "conformance":
        return
    from pathlib import Path

    from kernel_verify.adapters.library import records

    known = records()
    keys = list(args.libraries) or list(known)
    unknown = sorted(set(keys) - set(known))
    if unknown:
        raise UsageError(f"unknown {'library' if len(unknown) == 1 else 'libraries'} "
                         f"{', '.join(map(repr, unknown))}; choose from {', '.join(known)}")
    if not args.reuse:
        return
    missing = [k for k in keys if not (Path(args.out) / f"{k}.json").is_file()]
    if len(missing) == len(keys):
        command = " ".join(["kernel-verify conformance", *args.libraries])
        raise UsageError(f"--reuse: nothing saved in {args.out!r} (no "
                         f"{', '.join(f'{k}.json' for k in missing)}); run `{command}` without "
                         "--reuse first")
    if missing:
        print(f"kernel-verify conformance: --reuse: nothing saved for {', '.join(missing)} in "
              f"{args.out!r}: {'it runs' if len(missing) == 1 else 'they run'}",
              file=sys.stderr)


def _output_problem(path: str, *, folder: bool) -> str | None:
    """Why ``path`` (a file, or with ``folder`` a folder) cannot be written, or None: it is a
    folder where a file is due (or the reverse), an ancestor is a file, or the nearest existing
    ancestor is not writable. Checked before a run, so that a long run is not lost at its end."""
    import os
    from pathlib import Path

    target = Path(path)
    if target.exists():
        if folder and not target.is_dir():
            return f"{path!r} is a file, not a folder"
        if not folder and target.is_dir():
            return f"{path!r} is a folder, not a file"
        writable = target if folder else target.parent
        return None if os.access(writable, os.W_OK | os.X_OK) else f"{str(writable)!r} is not " \
            "writable"
    ancestor = target.parent
    while not ancestor.exists() and ancestor != ancestor.parent:
        ancestor = ancestor.parent
    if not ancestor.is_dir():
        return f"{str(ancestor)!r} is a file, so {path!r} cannot be created under it"
    if not os.access(ancestor, os.W_OK | os.X_OK):
        return f"{str(ancestor)!r} is not writable, so {path!r} cannot be created"
    return None


#: Output arguments per subcommand: (attribute, the option's name, a folder rather than a file).
_OUTPUTS = {"check": (("json_out", "--json", False),),
            "mutants": (("json_out", "--json", False),),
            "report": (("out", "--out", True),),
            "conformance": (("out", "--out", True),)}


def _check_outputs(args: argparse.Namespace) -> None:
    """Every output path the user gave can be written: one-line error before any work starts."""
    for attr, option, folder in _OUTPUTS.get(args.command, ()):
        value = getattr(args, attr, None)
        if value is not None and not value.strip():
            raise UsageError(f"{option} got an empty path ({value!r}); name a "
                             f"{'folder' if folder else 'file'}, or leave {option} out")
        if value:
            problem = _output_problem(value, folder=folder)
            if problem:
                raise UsageError(f"{option}: {problem}")


def _list_rows(args: argparse.Namespace) -> list[dict]:
    """JSON-ready descriptions of every registered system that passes the filters: feature maps
    (registry entries, their ``describe`` fields unchanged plus ``kind`` and ``math_section``)
    first, then the other kinds of :mod:`kernel_verify.impls.systems`."""
    from kernel_verify.impls.systems import KINDS, all_systems

    kinds = args.kind or list(KINDS)
    rows: list[dict] = []
    if "feature_map" in kinds:
        maps = all_maps(family=args.family) if args.family else all_maps()
        rows += [m.describe(args.d) for m in maps]
    for kind in kinds:
        if kind != "feature_map":
            rows += [s.describe() for s in all_systems(kind=kind)
                     if args.family is None or s.family == args.family]
    return rows


_KIND_NAMES = {
    "feature_map": "feature maps",
    "kernel_approximation": "kernel approximations",
    "attention": "attention functions",
    "gated_attention": "gated attention functions",
    "random_matrix": "random-matrix constructions",
    "model": "models",
}
#: The singular of each kind's name, for a count of one.
_KIND_NAME = {"feature_map": "feature map", "kernel_approximation": "kernel approximation",
              "attention": "attention function", "gated_attention": "gated attention function",
              "random_matrix": "random-matrix construction", "model": "model"}


def _cmd_list(args: argparse.Namespace) -> int:
    rows = _list_rows(args)
    if args.json:
        json.dump(rows, sys.stdout, indent=2, ensure_ascii=False)
        sys.stdout.write("\n")
        return 0
    header = ("name", "kind", "family", "kernel", "§", "claims")
    table = [(r["name"], r["kind"], r["family"], r["kernel"], r["math_section"],
              ", ".join(r["claims"])) for r in rows]
    widths = [max(len(t[i]) for t in [header, *table]) for i in range(5)]
    line = "  ".join(f"{{:<{w}}}" for w in widths) + "  {}"
    print(line.format(*header))
    print(line.format(*("-" * w for w in widths), "-" * 6))
    for row in table:
        print(line.format(*row))
    counts = {k: sum(r["kind"] == k for r in rows) for k in _KIND_NAMES}
    print("\n" + ", ".join(f"{n} {(_KIND_NAME if n == 1 else _KIND_NAMES)[k]}"
                           for k, n in counts.items() if n)
          + f" ({len(rows)} systems)")
    return 0


# --------------------------------------------------------------------------- the handlers
# Every subcommand's handler: it reads the parsed arguments and calls the library function that
# does the work (imported when the subcommand runs: ``list`` and ``--help`` stay fast).
def _cmd_report(args: argparse.Namespace) -> int:
    from kernel_verify.report.main import run_report

    return run_report(quick=args.quick, out=args.out, maps=args.maps, no_plots=args.no_plots)


def _cmd_check(args: argparse.Namespace) -> int:
    """``kernel-verify check TARGET [--profile P] [-k EXPR] [--json FILE] [--jobs N]``: a thin
    layer on :func:`kernel_verify.api.check`."""
    import os

    from kernel_verify.api import check, save_json
    from kernel_verify.probe import DeclarationError
    from kernel_verify.runner import _validate_target

    try:
        _validate_target(args.target)
    except (ValueError, TypeError) as err:
        print(f"kernel-verify check: {err}", file=sys.stderr)
        return 2
    jobs = int(getattr(args, "jobs", 2) or 2)
    cap = getattr(args, "max_examples", None)
    if cap is not None:
        os.environ["KV_MAX_EXAMPLES"] = str(cap)  # read by the suite's profiles (subprocess)
        print(f"kernel-verify check: at most {cap} Hypothesis examples per property")
    try:
        result = check(args.target, profile=args.profile, keyword=args.keyword, jobs=jobs,
                       shrink_seconds=getattr(args, "shrink_seconds", None),
                       probe=not getattr(args, "no_probe", False))
    except DeclarationError as err:  # before any property ran
        print(f"kernel-verify check: error: {err}", file=sys.stderr)
        return USAGE_EXIT
    except (ValueError, TypeError) as err:  # check()'s own argument and target checks
        raise UsageError(str(err)) from None
    if getattr(args, "verbose", False):  # every row, every target's whole repr
        from kernel_verify.runner import verdict_table

        table = (result.note if result.note and not result.verdicts
                 else verdict_table(result.verdicts, verbose=True))
        print(f"{table}\n\n{result.summary_line()}")
    else:  # quiet: skips summarised by reason, targets by class and name
        print(result)
    if args.json_out:
        save_json(result, args.json_out)
    if result.crashed and result.returncode < 0:  # killed by a signal: native code crashed
        import signal

        try:
            name = signal.Signals(-result.returncode).name
        except ValueError:
            name = f"signal {-result.returncode}"
        print(f"kernel-verify check: the test process died of {name} after "
              f"{len(result.verdicts)} verdict(s): a crash in native code (a segmentation fault, "
              "an out-of-bounds write in a kernel) ends the whole run in one worker; rerun with "
              "--jobs 2 (each crashing test is then a CRASH row naming it) or narrow it with -k"
              f"\n{result.output_tail}", file=sys.stderr)
    elif result.crashed and not result.note:  # (a note: the keyword matched nothing, printed)
        print(f"kernel-verify check: the suite did not run (pytest exit {result.returncode}):\n"
              f"{result.output_tail}", file=sys.stderr)
    return result.exit_code


def _cmd_mutants(args: argparse.Namespace) -> int:
    from kernel_verify.mutants.runner import run_mutants

    return run_mutants(args.only, jobs=args.jobs, json_out=args.json_out,
                       blackbox=args.blackbox)


def _cmd_calibrate(args: argparse.Namespace) -> int:
    from kernel_verify.calibration import calibrate

    parts = args.parts
    if parts and "power" in parts:  # the power of the properties: reports/power.md
        from kernel_verify.calibration.power import run_power

        run_power()
        parts = [p for p in parts if p != "power"]
        if not parts:
            return 0
    return calibrate(args.seeds, parts, args.jobs, allow_fewer_seeds=args.allow_fewer_seeds)


def _cmd_conformance(args: argparse.Namespace) -> int:
    from kernel_verify.adapters.conformance import run_conformance

    return run_conformance(args.libraries, out=args.out, profile=args.profile, quick=args.quick,
                           reuse=args.reuse)


def _cmd_reports(args: argparse.Namespace) -> int:
    """``kernel-verify reports [--stale | --refresh] [REPORT ...]``: where each committed report
    stands against the sources it measures (:mod:`kernel_verify.fingerprints`); ``--refresh``
    runs the command of each stale one (it rewrites committed reports: only on that flag)."""
    from kernel_verify import fingerprints as fp

    try:
        found = fp.statuses()
    except RuntimeError as err:  # an installed wheel: no committed reports
        raise UsageError(str(err)) from None
    if args.reports:
        unknown = sorted(set(args.reports) - set(fp.REPORTS))
        if unknown:
            raise UsageError(f"REPORT {', '.join(map(repr, unknown))} is not a regenerable "
                             f"committed report; choose among {', '.join(sorted(fp.REPORTS))}")
        found = [s for s in found if s.report in args.reports]
    shown = [s for s in found if s.state != "current"] if args.stale or args.refresh else found
    for s in shown:
        print(s.line())
    todo = [s for s in found if s.refreshable]
    current = sum(s.state == "current" for s in found)
    other = len(found) - current - len(todo)
    print(f"{current} current, {len(todo)} stale or unknown (regenerable here), {other} not "
          f"checkable or regenerable here (of {len(found)}; kernel_verify/fingerprints.py)")
    if not args.refresh:
        if todo:
            print("kernel-verify reports --refresh (make reports) regenerates them: it rewrites "
                  "the committed reports above")
        return 0
    return fp.refresh(found)


def _add_reports(sub) -> None:
    """The ``reports`` command."""
    p = sub.add_parser("reports", help="which committed reports are stale; --refresh "
                       "regenerates them (in a git checkout of kernel-verify only: the "
                       "reports are the repository's, not the installed package's)")
    p.add_argument("reports", nargs="*", metavar="REPORT",
                   help="only these reports (paths as listed, e.g. reports/power.md)")
    how = p.add_mutually_exclusive_group()
    how.add_argument("--stale", action="store_true",
                     help="list only the reports that are not current (default: every one)")
    how.add_argument("--refresh", action="store_true",
                     help="run the regenerating command of every stale report (rewrites "
                     "committed reports; may take hours: calibration, mutants)")
    p.set_defaults(run=_cmd_reports)


def _add_list(sub) -> None:
    """The ``list`` command."""
    p = sub.add_parser("list", help="list every registered system and what it claims")
    p.add_argument("--json", action="store_true", help="print JSON (one object per system)")
    p.add_argument("--kind", action="append", choices=list(_KIND_NAMES),
                   help="only systems of this kind (repeatable; default: every kind)")
    p.add_argument("--family", help="only systems of this family (rff, softmax, nystrom, …)")
    p.add_argument("--d", type=_int_at_least(1), default=4,
                   help="input dimension used to describe sizes")
    p.set_defaults(run=_cmd_list)


def _add_report(sub) -> None:
    """The ``report`` command."""
    p = sub.add_parser("report", help="verify every map and write the variance reports")
    p.add_argument("--out", default=None,
                   help="output folder (default: build/report/full, --quick: build/report/quick;"
                   " both untracked)")
    p.add_argument("--quick", action="store_true",
                   help="fewer points and samples (own folder: never overwrites a full report)")
    p.add_argument("--maps", nargs="*", help="only these map names (default: all)")
    p.add_argument("--no-plots", action="store_true",
                   help="numbers only: index and report.json, no pages or figures")
    p.set_defaults(run=_cmd_report)


def _add_check(sub) -> None:
    """The ``check`` command."""
    p = sub.add_parser("check", help="run the property suite against a third-party target")
    p.add_argument("target", help="module:attribute naming an adapter (see README)")
    p.add_argument("--profile", type=_profile, default=None,
                   help="Hypothesis profile: dev, ci, nightly or mutants")
    p.add_argument("-k", dest="keyword", default=None, help="pytest -k expression")
    p.add_argument("--json", dest="json_out", default=None, help="write the verdict as JSON here")
    p.add_argument("--shrink-seconds", type=_int_at_least(0), default=10,
                   help="time Hypothesis may spend shrinking each failing example (default 10; "
                   "0: report the first failing example as found)")
    p.add_argument("--max-examples", type=_int_at_least(1), default=None,
                   help="at most this many Hypothesis examples per property (for targets whose "
                   "every call is slow, e.g. Triton kernels under the interpreter; default: the "
                   "profile's)")
    p.add_argument("--jobs", type=_int_at_least(1), default=2,
                   help="pytest workers (default 2; 1: the suite runs in one pytest process, "
                   "without workers)")
    p.add_argument("-v", "--verbose", action="store_true",
                   help="every verdict row (each skip on its own row, not summarised by reason) "
                   "and each target's whole repr in a failure's falsifying example")
    p.add_argument("--no-probe", action="store_true",
                   help="skip the declaration probe (each declared function called once on a "
                   "tiny input before the suite starts; a contradiction is exit status 2)")
    p.set_defaults(run=_cmd_check)


def _add_mutants(sub) -> None:
    """The ``mutants`` command."""
    p = sub.add_parser("mutants", help="run the suite against every mutant; print the kill matrix")
    p.add_argument("--only", nargs="*", help="only these mutant names")
    p.add_argument("--jobs", type=_int_at_least(1), default=2,
                   help="parallel pytest workers (default 2)")
    p.add_argument("--json", dest="json_out", default=None, help="write the matrix as JSON here")
    p.add_argument("--blackbox", action="store_true",
                   help="also run every feature-map mutant wrapped black-box (sample_fn only), "
                   "with and without its declared family, and correct maps as controls")
    p.set_defaults(run=_cmd_mutants)


def _add_calibrate(sub) -> None:
    """The ``calibrate`` command."""
    p = sub.add_parser("calibrate", help="false-alarm rate of the statistical properties")
    p.add_argument("--seeds", type=_int_at_least(20), default=None,
                   help="fresh seeds per statistical check (>= 20; default: each part at the "
                   "count its committed section of reports/calibration.md was written with, at "
                   "least 100); the checks with a derived threshold run at every level of 0.2, "
                   "0.1, 0.05, 0.02, 0.01 that this many trials can certify")
    p.add_argument("--allow-fewer-seeds", action="store_true",
                   help="let --seeds below a committed section's count replace that section "
                   "(refused without it: a smaller run would replace a larger committed one)")
    p.add_argument("--jobs", type=_int_at_least(1), default=None,
                   help="processes (default: min(2, CPU count))")
    p.add_argument("--part", dest="parts", nargs="*", default=None,
                   choices=["matrices", "estimators", "reference_means", "convergence",
                            "blackbox", "gradients", "gradient_assumptions", "same_precision",
                            "power"],
                   help="only these groups of checks (default: all but power, which writes "
                   "reports/power.md: the smallest defect each attention property detects)")
    p.set_defaults(run=_cmd_calibrate)


def _add_conformance(sub) -> None:
    """The ``conformance`` command."""
    p = sub.add_parser("conformance", help="conformance pages of the shipped library adapters")
    p.add_argument("libraries", nargs="*", metavar="LIBRARY",
                   help="an adapter module of kernel_verify.adapters that holds a LIBRARY "
                   "record, e.g. sklearn, performer, fla, fla_models (default: all)")
    p.add_argument("--out", default=None,
                   help=f"output folder (default: {COMMITTED_CONFORMANCE}, the committed pages; "
                   "--quick needs an explicit one)")
    p.add_argument("--profile", type=_profile, default="dev",
                   help="Hypothesis profile: dev, ci, nightly or mutants (default: dev)")
    p.add_argument("--quick", action="store_true", help="smaller independent measurements")
    p.add_argument("--reuse", action="store_true",
                   help="rewrite the pages from the saved <library>.json without running")
    p.set_defaults(run=_cmd_conformance)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="kernel-verify",
        description="Verify kernel feature maps (random features, linear attention) against "
        "high-precision references.",
    )
    from kernel_verify import __version__

    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for add in (_add_list, _add_report, _add_check, _add_mutants, _add_calibrate, _add_conformance,
                _add_reports):
        add(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; a user's mistake is one line on stderr and exit status 2."""
    parser = build_parser()
    args = parser.parse_args(argv)  # argparse itself exits 2 with a one-line usage error
    try:
        _check_selections(args)
        _check_keyword(args)
        _check_names(args)
        _check_outputs(args)
        _check_committed(args)
        _check_libraries(args)
        return int(args.run(args) or 0)
    except UsageError as err:
        print(f"kernel-verify {args.command}: error: {err}", file=sys.stderr)
        return USAGE_EXIT
    except (FileNotFoundError, FileExistsError, PermissionError, IsADirectoryError,
            NotADirectoryError) as err:
        # an output path the user gave (--out, --json) cannot be written (checked before the
        # run; this is what is left: e.g. the disk filled up, or a folder changed meanwhile)
        print(f"kernel-verify {args.command}: error: cannot write {err.filename!r}: "
              f"{err.strerror}", file=sys.stderr)
        return USAGE_EXIT
    except BrokenPipeError:  # e.g. `kernel-verify list | head`
        sys.stderr.close()
        return 0


if __name__ == "__main__":
    sys.exit(main())
