"""One spelling of a map's name (issue #18): the registry name everywhere a user sees it, and
one identifier-safe form (:mod:`kernel_verify.impls.names`) where Python or a file stem needs
one. The kernel and formula ids a descriptor may name (:data:`kernel_verify.impls.names.KERNELS`,
:data:`~kernel_verify.impls.names.FORMULAS`) are the truth's, in both directions, and a
descriptor checks them when it is constructed, with nothing above ``impls`` imported."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from kernel_verify.impls.names import (
    DECLARED_KERNELS,
    FORMULAS,
    KERNELS,
    from_identifier,
    identifier,
    split_name,
)
from kernel_verify.impls.registry import all_maps
from kernel_verify.verify.references.features import MP_FEATURES
from kernel_verify.verify.references.kernels import MP_KERNELS


def test_identifier_is_a_bijection_on_registered_names():
    names = [e.name for e in all_maps()]
    idents = [identifier(n) for n in names]
    assert all(i.isidentifier() for i in idents)
    assert len(set(idents)) == len(names)
    assert [from_identifier(i) for i in idents] == names
    assert identifier("softmax_positive[iid]") == "softmax_positive__iid"
    assert identifier("taylor2") == "taylor2"
    assert split_name("softmax_positive[iid]") == ("softmax_positive", "iid")
    assert split_name("taylor2") == ("taylor2", None)
    for e in all_maps():  # the variant is the declared frequency matrix where there is one
        if e.matrix is not None:
            assert split_name(e.name) == (e.name.split("[")[0], e.matrix)


@pytest.mark.parametrize("bad", ["a__b[iid]", "a[iid", "a]b", "a[b-c]"])
def test_names_the_inverse_could_not_read_back_are_refused(bad):
    with pytest.raises(ValueError):
        identifier(bad)


def test_blackbox_controls_resolve_from_the_identifier_form():
    from kernel_verify.mutants import blackbox

    for name in blackbox.CONTROLS:
        (target,) = getattr(blackbox, f"control_{identifier(name)}")
        assert target.name == f"control:{name}@blackbox"
    with pytest.raises(AttributeError):
        blackbox.control_not_a_map__iid  # noqa: B018


def test_descriptor_ids_are_the_truths_in_both_directions():
    """Every kernel id impls accepts has its mpmath reference and every reference is accepted;
    likewise every formula id and its mpmath twin; and each id is used by a registered map,
    except the kernels only a user's map declares (``DECLARED_KERNELS``: each is exercised by
    tests/test_stationary_kernels.py, which checks that it covers every one of them)."""
    assert set(KERNELS) == set(MP_KERNELS)
    assert set(FORMULAS) == set(MP_FEATURES)
    maps = all_maps()
    used = {e.kernel for e in maps} | {e.mean_kernel for e in maps if e.mean_kernel}
    assert used == KERNELS - DECLARED_KERNELS
    assert DECLARED_KERNELS <= KERNELS
    assert {e.formula for e in maps} == FORMULAS


FRESH = textwrap.dedent("""
    import sys
    import numpy as np
    from kernel_verify.impls.descriptor import FeatureMapTarget
    base = dict(claims=frozenset({"unbiased"}), draw=lambda rng, d, m, c: {},
                numpy_fn=lambda x, p, c: x)
    def error(**kw):
        try:
            FeatureMapTarget("user_map", **{**base, **kw})
        except (ValueError, TypeError) as err:
            return f"{type(err).__name__}: {err}"
        return "accepted"
    print(error(kernel="softmax", formula="softmax_postive"))
    print(error(kernel="sofmax"))
    print(error(kernel="softmax", mean_kernel="gausian"))
    print(error(kernel="softmax", formula="softmax_positive"))
    print(sorted({m.split(".")[1] for m in sys.modules
                  if m.startswith("kernel_verify.") and m.count(".") >= 1}))
""")


def test_descriptor_checks_its_names_in_a_fresh_interpreter():
    """Constructed in a fresh interpreter that imported only ``kernel_verify.impls``, a feature
    map with an unknown formula, kernel or mean kernel fails at once, naming the argument and
    the known ids; a known formula is accepted; nothing above ``impls`` was imported."""
    out = subprocess.run([sys.executable, "-c", FRESH], capture_output=True, text=True,
                         check=True, timeout=300).stdout.splitlines()
    formula, kernel, mean_kernel, known, layers = out
    assert formula.startswith("ValueError: target 'user_map': formula 'softmax_postive' is "
                              "unknown; choose one of "), formula
    assert "softmax_positive" in formula
    assert kernel.startswith("ValueError: target 'user_map': kernel 'sofmax' is unknown"), kernel
    assert mean_kernel.startswith("ValueError: target 'user_map': mean_kernel 'gausian' is "
                                  "unknown"), mean_kernel
    assert known == "accepted"
    assert layers == "['impls']", layers
