"""The shapes an attention target accepts (its declared *shape contract*), and how the suite keeps
to it.

A library kernel may accept only some shapes: ``d_v = d`` (``AttentionTarget.dv_equals_d``), a
sequence length that is a multiple of a block (``length_multiple_of``), a minimum length
(``min_length``), or self-attention only (``self_attention_only``, handled where inputs are
drawn). Calling it outside its contract gives a shape error that says nothing about its
correctness, and would bury its real defects under failures.

The suite keeps to the contract where the target is called (``AttentionTarget.__call__`` and
its forms, :mod:`kernel_verify.properties.protocol`): an input the contract refuses is not an
example — inside a Hypothesis property it is rejected (``hypothesis.reject``: Hypothesis draws
another, the example count is of accepted inputs), in a fixed-input test the case is skipped
with the reason. Every case of such a target carries the note of :func:`contract_note` (which
shapes were not drawn), and a case none of whose inputs the contract accepts is a *skip* that
says so (``properties/conftest.py``), never a pass or a failure.
"""

from __future__ import annotations

from typing import Any

__all__ = ["CONTRACT_PREFIX", "contract_note", "keep_to_contract", "refusal"]

#: Prefix of the notes and skip reasons about the shape contract.
CONTRACT_PREFIX = "shape contract: "


def refusal(target: Any, *, t: int | None, d: int | None, dv: int | None) -> str | None:
    """Why ``target``'s contract refuses inputs with ``T = t`` rows, ``d`` query/key columns and
    ``d_v`` value columns (None: not known at this call), or None when it accepts them."""
    if getattr(target, "dv_equals_d", False) and d is not None and dv is not None and dv != d:
        return f"d_v = {dv} ≠ d = {d} (the target declares dv_equals_d)"
    multiple = getattr(target, "length_multiple_of", 1) or 1
    if t is not None and multiple > 1 and t % multiple:
        return f"T = {t} is not a multiple of {multiple} (length_multiple_of)"
    minimum = getattr(target, "min_length", 1) or 1
    if t is not None and minimum > 1 and t < minimum:
        return f"T = {t} < {minimum} (min_length)"
    return None


def contract_note(target: Any) -> str | None:
    """Which shapes the suite does not draw for ``target`` (None: it declares no contract)."""
    parts = []
    if getattr(target, "dv_equals_d", False):
        parts.append("d_v ≠ d")
    multiple = getattr(target, "length_multiple_of", 1) or 1
    if multiple > 1:
        parts.append(f"T not a multiple of {multiple}")
    minimum = getattr(target, "min_length", 1) or 1
    if minimum > 1:
        parts.append(f"T < {minimum}")
    if getattr(target, "self_attention_only", False):
        parts.append("k ≠ q (cross-attention)")
    if not parts:
        return None
    return (f"{CONTRACT_PREFIX}{target.name} declares the shapes it accepts; inputs with "
            f"{', '.join(parts)} were not drawn (properties at those shapes untested)")


def keep_to_contract(target: Any, *, t: int | None, d: int | None, dv: int | None) -> None:
    """Refuse the current input when ``target``'s contract does (module docstring)."""
    why = refusal(target, t=t, d=d, dv=dv)
    if why is None:
        return
    from hypothesis import reject
    from hypothesis.control import currently_in_test_context

    if currently_in_test_context():
        reject()
    import pytest

    pytest.skip(f"{CONTRACT_PREFIX}{target.name} does not accept this input: {why}")
