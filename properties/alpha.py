"""The run-wide false-alarm budget, split over the statistical assertions actually collected.

A statistical property is marked ``@pytest.mark.statistical(assertions=k)``: each Hypothesis
example of it makes ``k`` statistical assertions. At collection the suite counts
``N = Σ_items k·(examples per item)`` (examples = the profile's ``max_examples`` for Hypothesis
tests, 1 otherwise) and every assertion then runs at ``α = α_total/N`` (Bonferroni, union bound:
no independence needed), so a full run on correct code fails with probability ≤ α_total
(``KV_ALPHA_TOTAL``, default 1e-3). Under pytest-xdist every worker collects every item, so all
workers agree on N.

The count is an upper bound on the assertions that run (Hypothesis may stop early, an example
may be rejected): overcounting only makes each assertion stricter than it needs to be, never
raises the false-alarm rate.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from kernel_verify.verify.stats import AlphaBudget

_state: dict[str, AlphaBudget] = {}


def set_assertion_count(n: int) -> None:
    _state["budget"] = AlphaBudget.from_env(max(1, int(n)))


@contextlib.contextmanager
def preserved() -> Iterator[None]:
    """The budget as it was before the block is restored after it (also after an error, also
    when none was set), whatever the block sets: a run inside a process (a report, another
    pytest run's count) leaves the α of the statistical properties that run later in the
    process alone."""
    saved = _state.get("budget")
    try:
        yield
    finally:
        if saved is None:
            _state.pop("budget", None)
        else:
            _state["budget"] = saved


@contextlib.contextmanager
def assertion_count(n: int) -> Iterator[AlphaBudget]:
    """The budget of ``n`` assertions inside the block (e.g. the α another pytest run used),
    the previous one restored after it (:func:`preserved`)."""
    with preserved():
        set_assertion_count(n)
        yield _state["budget"]


def budget() -> AlphaBudget:
    """The run's budget (a single-assertion budget when nothing was collected, e.g. in scripts)."""
    return _state.get("budget") or AlphaBudget.from_env(1)


def per_assertion() -> float:
    return budget().per_assertion
