"""Calibration part ``convergence``: the binomial threshold of the attention convergence
property."""

from __future__ import annotations

from kernel_verify.calibration.certify import (
    LADDER,
    MIN_SEEDS,
    Row,
    _builtin,
    _seed,
    ladder_row,
    rungs,
    trials_to_certify,
)


def _attention_places(target, available: bool = True) -> list[tuple[object, bool]]:
    """The cells ``test_error_to_softmax_attention_falls_as_m_grows`` runs ``target`` in:
    ``(backend, causal)`` for each backend of the axis it accepts, as the property judges the
    target there (:func:`~kernel_verify.properties.attention_cases.for_target`), in the one mode
    the property runs (``modes(target)[0]``: non-causal when claimed, else causal); the
    backends available here (``available=False``: those that are not, e.g. CUDA on a machine
    without a GPU, which the report lists as not run)."""
    from kernel_verify.properties.attention_cases import for_target, modes
    from kernel_verify.verify.backends import AXIS

    causal = modes(target)[0]
    return [(for_target(target, b), causal) for b in AXIS
            if b.available == available and target.accepts(b.library, b.dtype)]


def convergence_targets() -> list[str]:
    """The built-in attention targets the convergence property judges (``approximates_softmax``)."""
    from kernel_verify.properties.builtin import builtin_targets
    from kernel_verify.properties.protocol import AttentionTarget

    return [t.name for t in builtin_targets()
            if isinstance(t, AttentionTarget) and t.has("approximates_softmax")]


def convergence_rows(name: str, n: int, entropy: int, assumption_trials: int) -> list[Row]:
    """The model assumption of the convergence property, ``P(error at m = 1024 ≥ ½·error at
    m = 16) ≤ P0`` per trial, on one built-in attention in every cell the property runs it in
    here (:func:`_attention_places`: backend, dtype and mode; ``max(3, n // 4)`` blocks of 40
    trials each, 1000 trials at the default 100 seeds — a block costs 0.1–0.7 s, and a rate of a
    few percent then has an upper bound well inside P0; one block in a small test run below
    MIN_SEEDS), through the property's own
    :func:`~kernel_verify.properties.checks.convergence.convergence_failures` with its inputs
    (``d`` in 2…6), its conversion to the backend and its rounding floor
    (:func:`~kernel_verify.properties.attention_cases.rounding_floor`), on fresh seeds; and the
    binomial test's rejections at every rung, all places pooled, where the pooled blocks can
    certify a rung (the test's level follows from P0 by the exact binomial tail)."""
    from kernel_verify.properties.attention_cases import rounding_floor
    from kernel_verify.properties.checks.convergence import (
        CONV_SEEDS,
        P0,
        convergence_failures,
        convergence_threshold,
    )

    target = _builtin(name)
    places = _attention_places(target)
    blocks = max(3, n // 4) if n >= MIN_SEEDS else 1
    rows, pooled, total = [], [], 0
    for b, causal in places:
        failures = 0
        for i in range(blocks):
            seed = _seed(entropy, "convergence", name, b.id, int(causal), i)
            f = convergence_failures(target, seed, 2 + i % 5, causal=causal,
                                     self_attention=target.self_attention_only,
                                     convert=b.from_numpy, floor=rounding_floor(b))
            failures += f
            pooled.append(f)
        total += blocks * CONV_SEEDS
        where = f"{b.library}:{b.device} {b.dtype}, {'causal' if causal else 'non-causal'}"
        rows.append(Row("attention: trial fails to halve the error (model assumption P0)", name,
                        where, blocks * CONV_SEEDS, (P0,), (failures,),
                        f"P0 = {P0:g} per trial (the binomial threshold's parameter)"))
    # The binomial test's level follows from P0 exactly (P(Bin(40, P0) ≥ k*) ≤ α by
    # construction), so the P0 rows above carry the claim; the test's own rejections are listed
    # where the pooled blocks can certify a rung (with fewer, the row could never be ok), or in
    # a small (test) run.
    if len(pooled) >= trials_to_certify(LADDER[0]) or n < MIN_SEEDS:
        levels = rungs(len(pooled))
        counts = {a: sum(f >= convergence_threshold(CONV_SEEDS, a) for f in pooled)
                  for a in levels}
        rows.append(ladder_row(f"attention: convergence test rejects (k*(α) of {CONV_SEEDS})",
                               name, f"{len(places)} places pooled", len(pooled), counts))
    return rows
