"""asv for kernel-verify: record, publish (offline dashboard), compare, check (docs/benchmarks.md).

    python tools/asv_dashboard.py machine            # write the machine file, print its name
    python tools/asv_dashboard.py run [--quick] [-b REGEX] [--commit REV]
    python tools/asv_dashboard.py publish [--branch B]  # reports/asv/html, works without network
    python tools/asv_dashboard.py compare BASE HEAD [--factor 1.5]   # exit 1 on a regression
    python tools/asv_dashboard.py check              # asv check + a dry smoke run (CI)

Stable identity: asv's machine file is written inside the project (``.asv/home/.asv-machine.json``;
asv reads ``~/.asv-machine.json``, so asv runs with ``HOME`` pointing there: nothing is written
outside the project, and no questionnaire is printed). The machine name is built from the CPU
model, the core count and the GPU model (``…-nogpu`` without one); the fields are the stable ones
(OS name without the kernel release, RAM rounded to GiB). asv names an existing environment after
its interpreter's path; after every run the result files are renamed to ``existing-py<X.Y>``
(and their ``python`` label set to ``X.Y``), merged with earlier results of the same commit, so a
series does not depend on where the checkout lies.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import subprocess
import sys
import tarfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CONF = ROOT / "asv.conf.json"
HOME = ROOT / ".asv" / "home"
VENDOR_CACHE = ROOT / ".asv" / "vendor"
PY = f"{sys.version_info[0]}.{sys.version_info[1]}"
ENV_NAME = f"existing-py{PY}"

#: npm packages that provide what asv's index.html loads from CDNs: (package@version, files,
#: the CDN address prefix each file replaces).
VENDORED = [
    ("jquery@3.3.1", ["dist/jquery.min.js"], ["https://code.jquery.com/jquery-3.3.1.min.js"]),
    ("flot@0.8.3",
     ["jquery.flot.js", "jquery.flot.time.js", "jquery.flot.selection.js",
      "jquery.flot.categories.js"],
     ["https://cdnjs.cloudflare.com/ajax/libs/flot/0.8.3/jquery.flot.min.js",
      "https://cdnjs.cloudflare.com/ajax/libs/flot/0.8.3/jquery.flot.time.min.js",
      "https://cdnjs.cloudflare.com/ajax/libs/flot/0.8.3/jquery.flot.selection.min.js",
      "https://cdnjs.cloudflare.com/ajax/libs/flot/0.8.3/jquery.flot.categories.min.js"]),
    ("flot-orderbars@1.0.0", ["js/jquery.flot.orderBars.js"],
     ["https://cdn.jsdelivr.net/npm/flot-orderbars@1.0.0/js/jquery.flot.orderBars.js"]),
    ("stupid-table-plugin@1.1.3", ["stupidtable.min.js"],
     ["https://cdnjs.cloudflare.com/ajax/libs/stupidtable/1.0.1/stupidtable.min.js"]),
    ("blueimp-md5@2.19.0", ["js/md5.min.js"],
     ["https://cdnjs.cloudflare.com/ajax/libs/blueimp-md5/2.19.0/js/md5.min.js"]),
    ("bootstrap@3.1.1",
     ["dist/js/bootstrap.min.js", "dist/css/bootstrap.min.css",
      "dist/fonts/glyphicons-halflings-regular.woff",
      "dist/fonts/glyphicons-halflings-regular.ttf"],
     ["https://cdn.jsdelivr.net/npm/bootstrap@3.1.1/dist/js/bootstrap.min.js",
      "https://cdn.jsdelivr.net/npm/bootstrap@3.1.1/dist/css/bootstrap.min.css", None, None]),
]


def _slug(text: str) -> str:
    text = re.sub(r"\(R\)|\(TM\)|CPU|Processor|@.*$", "", text)
    return re.sub(r"[^A-Za-z0-9]+", "-", text).strip("-")


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def gpu_model() -> str | None:
    """The first CUDA device's name, asked in a subprocess (this process never touches CUDA)."""
    code = ("import torch; print(torch.cuda.get_device_name(0) "
            "if torch.cuda.is_available() else '')")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    return out.stdout.strip() or None


def machine_info() -> dict[str, str]:
    cpu, gpu = cpu_model(), gpu_model()
    cores = os.cpu_count() or 1
    name = f"{_slug(cpu)}-{cores}c-{_slug(gpu) if gpu else 'nogpu'}"
    ram = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    return {
        "machine": name, "os": platform.system(), "arch": platform.machine(),
        "cpu": cpu + (f" + {gpu}" if gpu else ""), "num_cpu": str(cores),
        "ram": f"{round(ram / 2**30)} GiB",
    }


def write_machine() -> str:
    info = machine_info()
    HOME.mkdir(parents=True, exist_ok=True)
    (HOME / ".asv-machine.json").write_text(
        json.dumps({info["machine"]: info, "version": 1}, indent=4) + "\n")
    return info["machine"]


def asv(*args: str, check: bool = True, env: dict[str, str] | None = None,
        conf: Path = CONF) -> int:
    full_env = {**os.environ, **(env or {}), "HOME": str(HOME)}
    cmd = [sys.executable, "-m", "asv", *args, "--config", str(conf)]
    print("+", " ".join(cmd[2:]), flush=True)
    res = subprocess.run(cmd, cwd=ROOT, env=full_env)
    if check and res.returncode:
        sys.exit(res.returncode)
    return res.returncode


def results_dir() -> Path:
    conf = json.loads(CONF.read_text())
    return ROOT / conf["results_dir"]


def normalise_results(machine: str) -> None:
    """Rename path-named result files of ``machine`` to ``existing-py<X.Y>``, merging."""
    folder = results_dir() / machine
    for path in sorted(folder.glob("*-existing-*.json")):
        data = json.loads(path.read_text())
        if data.get("env_name") == ENV_NAME:
            continue
        data["env_name"], data["python"] = ENV_NAME, PY
        data.setdefault("params", {})["python"] = PY
        target = folder / f"{data['commit_hash'][:8]}-{ENV_NAME}.json"
        if target.exists():
            old = json.loads(target.read_text())
            old["results"].update(data["results"])
            old["durations"].update(data.get("durations", {}))
            old["date"] = data["date"]
            data = old
        target.write_text(json.dumps(data, indent=1) + "\n")
        path.unlink()


def run(args: argparse.Namespace) -> None:
    machine = write_machine()
    commit = subprocess.run(["git", "rev-parse", args.commit], cwd=ROOT, check=True,
                            capture_output=True, text=True).stdout.strip()
    cmd = ["run", "--python=same", f"--machine={machine}", f"--set-commit-hash={commit}",
           "--show-stderr"]
    if args.quick:
        cmd.append("--quick")
    if gpu_model() is not None:
        # asv's default forkserver imports the benchmarks once and forks: CUDA cannot be
        # re-initialised in a forked child ("Cannot re-initialize CUDA in forked subprocess"),
        # so every torch:cuda case failed. Spawn gives each benchmark a fresh interpreter.
        cmd.append("--launch-method=spawn")
    for regex in args.bench or []:
        cmd += ["-b", regex]
    code = asv(*cmd, check=False)
    normalise_results(machine)
    sys.exit(code)


def _npm_file(spec: str, member: str) -> bytes:
    VENDOR_CACHE.mkdir(parents=True, exist_ok=True)
    name, version = spec.rsplit("@", 1)
    tgz = VENDOR_CACHE / f"{name}-{version}.tgz"
    if not tgz.exists():
        subprocess.run(["npm", "pack", spec, "--silent"], cwd=VENDOR_CACHE, check=True,
                       capture_output=True)
    with tarfile.open(tgz) as tar:
        return tar.extractfile(f"package/{member}").read()


def publish(args: argparse.Namespace) -> None:
    """``asv publish``, then the CDN scripts and styles vendored from npm into ``vendor/``.

    ``--branch B`` (repeatable) publishes the history of branch ``B`` instead of the configured
    ``branches`` (e.g. a feature branch before it is merged), through a temporary config copy.
    """
    # A listing written on a CPU machine names no torch:cuda case: widen it with the cases the
    # results hold (the GPU run's), or asv draws no CUDA series (tools/gpu/asv_results.py).
    if str(ROOT) not in sys.path:  # run as a script: tools/ is on the path, not the root
        sys.path.insert(0, str(ROOT))
    from tools.gpu.asv_results import widen_listing

    widen_listing(results_dir())
    if args.branch:
        conf = json.loads(CONF.read_text())
        conf["branches"] = args.branch
        tmp = ROOT / ".asv-publish.conf.json"
        tmp.write_text(json.dumps(conf))
        try:
            asv("publish", conf=tmp)
        finally:
            tmp.unlink()
    else:
        asv("publish")
    html = ROOT / json.loads(CONF.read_text())["html_dir"]
    index = (html / "index.html").read_text()
    for spec, members, urls in VENDORED:
        for member, url in zip(members, urls, strict=True):
            local = Path("vendor") / spec.split("@")[0] / member
            (html / local).parent.mkdir(parents=True, exist_ok=True)
            (html / local).write_bytes(_npm_file(spec, member))
            if url is None:
                continue
            pattern = re.compile(r'(src|href)="' + re.escape(url) + r'"[^>]*?(/?>)')
            index, count = pattern.subn(lambda m, loc=local: f'{m[1]}="{loc}"{m[2]}', index)
            if count != 1:
                sys.exit(f"publish: {url} not found once in index.html (asv changed?)")
    if re.search(r'<(script|link)[^>]*(src|href)="https?://', index):
        sys.exit("publish: index.html still loads something from the network")
    (html / "index.html").write_text(index)
    print(f"published {html / 'index.html'} (offline: every script and style is local)")


def compare(args: argparse.Namespace) -> None:
    """Exit 1 if a benchmark of ``head`` is slower than ``base`` by more than ``factor``."""
    from asv.commands.compare import Compare
    from asv.config import Config

    os.environ["HOME"] = str(HOME)
    conf = Config.load(str(CONF))
    machine = args.machine or write_machine()
    revs = []
    for rev in (args.base, args.head):
        out = subprocess.run(["git", "rev-parse", rev], cwd=ROOT, capture_output=True, text=True)
        revs.append(out.stdout.strip() if out.returncode == 0 else rev)
    worsened, _ = Compare.print_table(
        conf, revs[0], revs[1], factor=args.factor, split=True, use_stats=True,
        only_changed=False, sort="ratio", machine=machine, env_names=None,
        commit_names={revs[0]: args.base, revs[1]: args.head},
    )
    if worsened:
        print(f"REGRESSION: {args.head} is slower than {args.base} by more than "
              f"{args.factor}x in some benchmark (rows marked '+' above)")
        sys.exit(1)
    print(f"no regression beyond {args.factor}x")


def check(args: argparse.Namespace) -> None:
    """``asv check`` and one dry, quick run of every benchmark with one parameter combination."""
    machine = write_machine()
    listing = results_dir() / "benchmarks.json"  # asv rewrites it with the smoke parameters
    saved = listing.read_bytes() if listing.exists() else None
    try:
        asv("check", "--python=same", env={"KV_BENCH_SMOKE": "1"})
        asv("run", "--python=same", f"--machine={machine}", "--quick", "--dry-run",
            "--show-stderr", env={"KV_BENCH_SMOKE": "1"})
    finally:
        if saved is not None:
            listing.write_bytes(saved)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    sub.add_parser("machine").set_defaults(fn=lambda a: print(write_machine()))
    p = sub.add_parser("run")
    p.add_argument("--quick", action="store_true")
    p.add_argument("-b", "--bench", action="append")
    p.add_argument("--commit", default="HEAD")
    p.set_defaults(fn=run)
    p = sub.add_parser("publish")
    p.add_argument("--branch", action="append")
    p.set_defaults(fn=publish)
    p = sub.add_parser("compare")
    p.add_argument("base")
    p.add_argument("head")
    p.add_argument("--factor", type=float, default=1.5)
    p.add_argument("--machine")
    p.set_defaults(fn=compare)
    sub.add_parser("check").set_defaults(fn=check)
    args = ap.parse_args()
    args.fn(args)


if __name__ == "__main__":
    main()
