"""The README's delta-rule example (section "The delta rule and its relatives") runs as printed:
its target is built, and its chunked form and its step meet the exact recurrence
(:func:`kernel_verify.verify.references.recurrence.recurrence_mp`) on a short sequence."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np

from kernel_verify.verify.gated_bounds import smallest_normal
from kernel_verify.verify.recurrence_bounds import recurrence_error_bound
from kernel_verify.verify.references.recurrence import recurrence_mp

README = Path(__file__).resolve().parents[1] / "README.md"


def _example() -> str:
    text = README.read_text(encoding="utf-8")
    section = text[text.index("### The delta rule and its relatives"):]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


def test_the_readme_delta_example_runs_and_meets_the_exact_recurrence():
    scope: dict = {}
    exec(compile(_example(), "README.md", "exec"), scope)
    target = scope["target"]
    assert target.transition == "gated_delta" and target.offers("chunked")
    rng = np.random.default_rng(7)
    q, k = rng.standard_normal((2, 1, 2, 5, 3))
    v = rng.standard_normal((1, 2, 5, 2))
    g, beta = -rng.exponential(1.0, (1, 2, 5)), rng.uniform(0, 1, (1, 2, 5))
    ref, s_ref = recurrence_mp(target.features(q, "q"), target.features(k, "k"), v,
                               transition="gated_delta", g=g, beta=beta)
    # the derived float64 bound (docs/math.md §23), the features within 6 ulps each
    bound, s_bound = recurrence_error_bound(
        target.features(q, "q"), target.features(k, "k"), v, transition="gated_delta", g=g,
        beta=beta, u=2.0**-53, exp_ulps=1, tiny=smallest_normal("float64"), chunk_sizes=(1, 2),
        extra_ulps=12)
    out, (s,) = target.chunked(q, k, v, g, beta=beta, chunk_size=2)
    assert (np.abs(out - ref) <= bound).all() and (np.abs(s - s_ref) <= s_bound).all()
    state, steps = None, []
    for t in range(5):
        state, o = target.step(state, q[:, :, t], k[:, :, t], v[:, :, t], g[:, :, t],
                               beta=beta[:, :, t])
        steps.append(o)
    assert (np.abs(np.stack(steps, axis=2) - ref) <= bound).all()
