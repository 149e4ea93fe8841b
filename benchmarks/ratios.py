"""The speed targets of issue 14 as ratios measured in one run (torch, float32).

Usage: ``.venv/bin/python -m benchmarks.ratios [--n 1024 2048 4096 8192] [--repeat 5]``.
Every case runs interleaved with the others (round-robin over ``--repeat`` rounds) and the best
time of each is kept, so background load hits all columns alike; ratios are the figures to read.

Sizes: ``q, k, v`` of shape ``(2, 4, n, 64)`` (batch × heads = 8, d = 64), ``m = 256`` features of
``softmax_positive[iid]`` (FAVOR+), torch CPU float32 unless ``--device cuda``.

Columns:
* ``floor``: the four GEMMs every non-causal positive-feature attention needs — two projections
  ``x Wᵀ`` (queries, keys), ``φ(K)ᵀ[V 1]`` and ``φ(Q)·(that)`` — on preallocated tensors.
* ``plain`` / ``log``: :func:`kernel_verify.impls.attention.feature_map_attention` with
``use_log=False`` / the
  default (log-space, stable) path, non-causal; ``causal``: the default path, causal.
* ``sdpa`` / ``sdpa causal``: ``torch.nn.functional.scaled_dot_product_attention`` (exact).
* ``performer`` / ``performer causal``: performer-pytorch's ``FastAttention`` with the same
  projection matrix (skipped, with the reason, when performer-pytorch is not installed). Its causal
  path without the CUDA extension is timed once per ``n`` (it takes seconds).
* ``mem causal/non-causal``: peak resident memory added by one call, each in a fresh subprocess
  (``--memory``).
* ``causal@REV/log`` (``--baseline REV``): the causal path of ``impls/torch/attention.py`` as it
  was at git revision ``REV`` (loaded with ``git show``; the same features), interleaved with
  the others, so that a change of the causal path is measured before and after in one run.
* ``forms/log`` (``--forms``): the chunk-parallel form of :mod:`kernel_verify.impls.torch.forms`
  (``log_linear_attention_chunked``, chunk 64, no loop over chunks; the same features).
* ``gated/plain``, ``gk/plain`` (``--gated``): the gated chunked form of
  :mod:`kernel_verify.impls.torch.gated_forms` (chunk 64, log-gates ``log σ(x)`` per token and
  head — ``gated`` — or per key dimension — ``gk``, up to n = 4096) against its non-gated twin
  ``linear_attention_chunked`` of :mod:`kernel_verify.impls.torch.forms` on the same arrays
  (``benchmarks/gated.py``, whose asv class tracks the same pair).
* ``delta/recur``, ``delta/plain`` (``--delta``): the chunked (UT transform) form of the gated
  delta rule, :func:`kernel_verify.impls.torch.recurrence.chunked` with
  ``transition="gated_delta"`` (chunk 64; ``q, k`` with unit rows, ``β = σ(x)``, log-gates
  ``log σ(x')`` per token and head), against the same recurrence token by token
  (``recurrent``, ``recur``) and against the plain chunked form ``linear_attention_chunked`` of
  :mod:`kernel_verify.impls.torch.forms` at the same shapes (positive features ``e^q``, ``e^k``
  of the same arrays, as ``--gated`` does) (``benchmarks/delta.py``, whose asv class times the
  chunked and the recurrent form).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import subprocess
import sys
import time
import types
from collections.abc import Callable

import numpy as np
import torch

from kernel_verify.impls.attention import feature_map_attention
from kernel_verify.impls.registry import get

ENTRY = "softmax_positive[iid]"
SHAPE = (2, 4)
D, M = 64, 256


def inputs(n: int, device: str) -> tuple[torch.Tensor, ...]:
    """Seeded ``q, k, v`` (entries ``N(0, 1)``) and the projection ``W`` (float32)."""
    rng = np.random.default_rng([14, n])
    q, k, v = (torch.tensor(rng.standard_normal((*SHAPE, n, D)), dtype=torch.float32,
                            device=device) for _ in range(3))
    entry = get(ENTRY)
    w = torch.tensor(entry.draw(rng, D, M, entry.config)["W"], dtype=torch.float32, device=device)
    return q, k, v, w


def baseline_module(rev: str) -> types.ModuleType:
    """``impls/torch/attention.py`` at git revision ``rev``, as a module (run from the
    repository root)."""
    src = subprocess.run(["git", "show", f"{rev}:impls/torch/attention.py"], capture_output=True,
                         text=True, check=True).stdout
    mod = types.ModuleType(f"attention_at_{rev}")
    exec(compile(src, f"{rev}:impls/torch/attention.py", "exec"), mod.__dict__)
    return mod


def baseline_case(n: int, device: str, rev: str) -> Callable[[], object]:
    """The default (log-space) causal path at ``rev``: the same features as
    :func:`feature_map_attention`, then that revision's ``_log_linear``."""
    from kernel_verify.impls.attention import map_features

    old = baseline_module(rev)
    q, k, v, w = inputs(n, device)
    entry, params, scale = get(ENTRY), {"W": w}, D ** -0.25

    def run() -> object:
        lq = map_features(entry, q * scale, params, log=True)
        lk = map_features(entry, k * scale, params, log=True)
        return old._log_linear(lq, lk, v, causal=True, chunk_size=64)

    return run


def forms_case(n: int, device: str) -> Callable[[], object]:
    """The chunk-parallel log-space form with the same features as the default path."""
    from kernel_verify.impls.attention import map_features
    from kernel_verify.impls.torch.forms import log_linear_attention_chunked

    q, k, v, w = inputs(n, device)
    entry, params, scale = get(ENTRY), {"W": w}, D ** -0.25

    def run() -> object:
        lq = map_features(entry, q * scale, params, log=True)
        lk = map_features(entry, k * scale, params, log=True)
        return log_linear_attention_chunked(lq, lk, v, chunk_size=64)

    return run


def gated_cases(n: int, device: str) -> dict[str, Callable[[], object]]:
    """The gated chunked form (scalar and, up to n = 4096, per-key-dimension gates) and its
    non-gated twin (``benchmarks/gated.py``)."""
    from benchmarks.gated import KEY_DIM_MAX_N
    from benchmarks.gated import inputs as gated_inputs
    from kernel_verify.impls.torch.forms import linear_attention_chunked
    from kernel_verify.impls.torch.gated_forms import gated_attention_chunked
    from kernel_verify.verify.backends import AXIS

    backend = next(b for b in AXIS if b.library == "torch" and b.device == device
                   and b.dtype == "float32")
    out: dict[str, Callable[[], object]] = {}
    for kind, label in (("scalar", "gated"), ("key_dim", "gk")):
        if kind == "key_dim" and n > KEY_DIM_MAX_N:
            continue
        q, k, v, g = gated_inputs(backend, n, kind)
        out[label] = (lambda q=q, k=k, v=v, g=g:
                      gated_attention_chunked(q, k, v, g, chunk_size=64))
        if kind == "scalar":
            fq, fk = q.exp(), (k / 8).exp()
            out["plain chunked"] = (lambda fq=fq, fk=fk, v=v:
                                    linear_attention_chunked(fq, fk, v, chunk_size=64))
    return out


def delta_cases(n: int, device: str) -> dict[str, Callable[[], object]]:
    """The gated delta rule chunked and token by token, and the plain chunked form on positive
    features of the same arrays (``benchmarks/delta.py``)."""
    from benchmarks.delta import inputs as delta_inputs
    from kernel_verify.impls.torch.forms import linear_attention_chunked
    from kernel_verify.impls.torch.recurrence import chunked, recurrent
    from kernel_verify.verify.backends import AXIS

    backend = next(b for b in AXIS if b.library == "torch" and b.device == device
                   and b.dtype == "float32")
    a = delta_inputs(backend, n, "gated_delta")
    fq, fk = a["q"].exp(), a["k"].exp()
    return {
        "delta": lambda: chunked(transition="gated_delta", chunk_size=64, **a),
        "delta recurrent": lambda: recurrent(transition="gated_delta", **a),
        "delta plain": lambda: linear_attention_chunked(fq, fk, a["v"], chunk_size=64),
    }


def cases(n: int, device: str) -> dict[str, Callable[[], object]]:
    q, k, v, w = inputs(n, device)
    entry = get(ENTRY)
    params = {"W": w}
    scale = D ** -0.25
    # floor: preallocated operands of the four GEMMs
    xq, xk = (q * scale).reshape(-1, D), (k * scale).reshape(-1, D)
    fk = torch.rand(*SHAPE, n, M, device=device)
    v1 = torch.cat([v, torch.ones_like(v[..., :1])], dim=-1)
    state = torch.rand(*SHAPE, M, D + 1, device=device)
    wt = w.T.contiguous()

    def floor() -> object:
        xq @ wt
        xk @ wt
        fk.transpose(-1, -2) @ v1
        return fk @ state

    out: dict[str, Callable[[], object]] = {
        "floor": floor,
        "plain": lambda: feature_map_attention(entry, params, q, k, v, use_log=False),
        "log": lambda: feature_map_attention(entry, params, q, k, v),
        "causal": lambda: feature_map_attention(entry, params, q, k, v, causal=True),
        "sdpa": lambda: torch.nn.functional.scaled_dot_product_attention(q, k, v),
        "sdpa causal": lambda: torch.nn.functional.scaled_dot_product_attention(
            q, k, v, is_causal=True),
    }
    if importlib.util.find_spec("performer_pytorch") is not None:
        from performer_pytorch import FastAttention

        for causal in (False, True):
            fast = FastAttention(D, nb_features=M, causal=causal).to(device)
            fast.projection_matrix.copy_(w)
            out["performer causal" if causal else "performer"] = (
                lambda f=fast: f(q, k, v))
    return out


def structured(device: str, repeat: int, rows: int = 8 * 4096) -> None:
    """SORF/Fastfood projections ``x Wᵀ``: fast Walsh–Hadamard transform vs the explicit GEMM,
    ``rows`` inputs, ``m = d`` (one block), interleaved, best of ``repeat``."""
    from kernel_verify.impls.random_matrices import draw_factors, factors_matrix
    from kernel_verify.impls.torch.structured import structured_projections

    print(f"structured: {rows} rows, m = d, float32; time ms (GEMM / FWHT) and GEMM/FWHT")
    for d in (64, 128, 256, 512, 1024, 2048):
        x = torch.randn(rows, d, device=device)
        row = [f"d={d}"]
        for kind in ("sorf", "fastfood"):
            f = draw_factors(kind, np.random.default_rng(d), d, d)
            w = torch.tensor(factors_matrix(f), dtype=torch.float32, device=device)
            fns = {"gemm": lambda x=x, w=w: x @ w.T,
                   "fwht": lambda x=x, f=f: structured_projections(x, f)}
            best = dict.fromkeys(fns, math.inf)
            for _ in range(repeat):
                for name, fn in fns.items():
                    sync(device)
                    t0 = time.perf_counter()
                    fn()
                    sync(device)
                    best[name] = min(best[name], time.perf_counter() - t0)
            row.append(f"{kind} {1e3 * best['gemm']:.1f}/{1e3 * best['fwht']:.1f} = "
                       f"{best['gemm'] / best['fwht']:.2f}")
        print(" | ".join(row), flush=True)


def sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def measure(n: int, device: str, repeat: int, baseline: str | None = None,
            forms: bool = False, gated: bool = False, delta: bool = False
            ) -> dict[str, float]:
    """Best wall time (s) of every case, interleaved round-robin."""
    fns = cases(n, device)
    if forms:
        fns["forms"] = forms_case(n, device)
    if gated:
        fns.update(gated_cases(n, device))
    if delta:
        fns.update(delta_cases(n, device))
    if baseline:
        fns["causal@baseline"] = baseline_case(n, device, baseline)
    best = dict.fromkeys(fns, math.inf)
    with torch.inference_mode():
        for r in range(repeat):
            for name, fn in fns.items():
                if name == "performer causal" and r > 0:
                    continue  # seconds per call: one sample
                sync(device)
                t0 = time.perf_counter()
                fn()
                sync(device)
                best[name] = min(best[name], time.perf_counter() - t0)
    return best


def peak_memory(n: int, causal: bool, threads: int) -> int:
    """Bytes of resident memory one call adds at its peak (CPU, fresh subprocess)."""
    code = (
        "import torch; from benchmarks.ratios import inputs, ENTRY;"
        "from kernel_verify.impls.attention import feature_map_attention as f;"
        "from kernel_verify.impls.registry import get;"
        f"q, k, v, w = inputs({n}, 'cpu'); e = get(ENTRY);"
        "torch.inference_mode().__enter__();"
        "rss = lambda key: int(next(x for x in open('/proc/self/status') if x.startswith(key))"
        ".split()[1]) * 1024;"
        "open('/proc/self/clear_refs', 'w').write('5');"  # resets the peak (VmHWM) to now
        "r0 = rss('VmRSS');"
        f"f(e, {{'W': w}}, q, k, v, causal={causal});"
        "print(rss('VmHWM') - r0)"
    )
    code = f"import torch; torch.set_num_threads({threads});" + code
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return int(res.stdout.strip())


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, nargs="+", default=[1024, 2048, 4096, 8192])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--threads", type=int, default=torch.get_num_threads(),
                    help="torch intra-op threads (1 is steadier on a loaded machine)")
    ap.add_argument("--memory", action="store_true", help="also peak memory (CPU subprocesses)")
    ap.add_argument("--json", help="write the raw times here")
    ap.add_argument("--forms", action="store_true",
                    help="also time the chunk-parallel form (impls/torch/forms.py)")
    ap.add_argument("--gated", action="store_true",
                    help="also time the gated chunked form against its non-gated twin")
    ap.add_argument("--delta", action="store_true",
                    help="also time the gated delta rule, chunked against recurrent and plain")
    ap.add_argument("--baseline", metavar="REV",
                    help="also time the causal path of impls/torch/attention.py at git REV")
    ap.add_argument("--structured", action="store_true",
                    help="only the SORF/Fastfood fast-transform vs explicit-GEMM table")
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    if args.structured:
        structured(args.device, args.repeat)
        return
    if importlib.util.find_spec("performer_pytorch") is None:
        print("performer columns skipped: performer-pytorch is not installed "
              "(pip install --no-deps performer-pytorch einops local-attention==1.9.0)")
    print(f"torch {torch.__version__}, {args.device}, threads {torch.get_num_threads()}, "
          f"shape {(*SHAPE, 'n', D)}, m = {M}, best of {args.repeat}, interleaved")
    raw = {}
    head = ("n | floor ms | log/floor | plain/floor | log/plain | causal/log | "
            "sdpa/log | sdpa-causal/causal | perf/log | perf-causal/causal")
    if args.baseline:
        head += f" | causal@{args.baseline}/log"
    if args.forms:
        head += " | forms/log"
    if args.gated:
        head += " | gated/plain | gk/plain"
    if args.delta:
        head += " | delta/recur | delta/plain"
    if args.memory:
        head += " | mem causal/non-causal"
    print(head)
    for n in args.n:
        t = measure(n, args.device, args.repeat, args.baseline, args.forms, args.gated,
                    args.delta)
        raw[n] = t
        perf = t.get("performer", math.nan)
        perf_c = t.get("performer causal", math.nan)
        row = (f"{n} | {1e3 * t['floor']:.1f} | {t['log'] / t['floor']:.2f} | "
               f"{t['plain'] / t['floor']:.2f} | {t['log'] / t['plain']:.2f} | "
               f"{t['causal'] / t['log']:.2f} | {t['sdpa'] / t['log']:.2f} | "
               f"{t['sdpa causal'] / t['causal']:.2f} | {perf / t['log']:.2f} | "
               f"{perf_c / t['causal']:.1f}")
        if args.baseline:
            row += f" | {t['causal@baseline'] / t['log']:.2f}"
        if args.forms:
            row += f" | {t['forms'] / t['log']:.2f}"
        if args.gated:
            row += (f" | {t['gated'] / t['plain chunked']:.2f} | "
                    f"{t.get('gk', math.nan) / t['plain chunked']:.2f}")
        if args.delta:
            row += (f" | {t['delta'] / t['delta recurrent']:.2f} | "
                    f"{t['delta'] / t['delta plain']:.2f}")
        if args.memory:
            mem_c, mem_n = peak_memory(n, True, args.threads), peak_memory(n, False, args.threads)
            raw[n]["mem"] = [mem_c, mem_n]
            row += f" | {mem_c / 2**20:.0f}/{mem_n / 2**20:.0f} MiB = {mem_c / mem_n:.2f}"
        print(row, flush=True)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as fh:
            json.dump(raw, fh, indent=1)


if __name__ == "__main__":
    main()
