"""One spelling of a map's name (issue #18): the registry name everywhere a user sees it, and
one identifier-safe form (:mod:`kernel_verify.impls.names`) where Python or a file stem needs
one."""

from __future__ import annotations

import pytest

from kernel_verify.impls.names import from_identifier, identifier, split_name
from kernel_verify.impls.registry import all_maps


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
