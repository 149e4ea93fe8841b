"""Serving-time state on model targets (docs/math.md §15.1): the serving calls of
properties/model_protocol.py are validated with errors naming the field; the declared cut points
are the ones the suite draws around; each serving check passes on the built-in tiny LM and its
planted defect fails (both dtypes, both rollback routes, j = 0 and j = k); each serving mutant of
kernel_verify/mutants/models.py fails its intended check while the twin passes.
The properties themselves run in properties/test_models.py."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from kernel_verify.mutants import models as mm
from kernel_verify.properties import model_checks as mc
from kernel_verify.properties.builtin_models import tiny_lm_calls, tiny_lm_target
from kernel_verify.properties.model_protocol import ModelTarget


def _fields(**kw):
    claims = frozenset({"float64", "left_padding", "right_padding"})
    return {**tiny_lm_calls(), "claims": claims, **kw}


@pytest.mark.parametrize(("kw", "error", "words"), [
    ({"extend": 3}, TypeError, "extend"),
    ({"copy_cache": "copy"}, TypeError, "copy_cache"),
    ({"prefill": None, "step": None}, ValueError, "extend"),
    ({"extend": None}, ValueError, "copy_cache"),
    ({"extend": None, "copy_cache": None}, ValueError, "rollback"),
    ({"chunk_sizes": 4}, TypeError, "chunk_sizes"),
    ({"chunk_sizes": (4, 0)}, ValueError, "chunk_sizes"),
    ({"chunk_sizes": (2.5,)}, TypeError, "chunk_sizes"),
    ({"conv_window": 1}, ValueError, "conv_window"),
    ({"conv_window": "3"}, TypeError, "conv_window"),
])
def test_bad_serving_declarations_name_the_field(kw, error, words):
    with pytest.raises(error, match=words):
        ModelTarget("m", **_fields(**kw))


def test_cut_points_are_the_declared_boundaries_below_max_len():
    """c − 1, c, c + 1, 2c + 1 per chunk size and W − 1, kept in [1, max_len − 2]."""
    t = tiny_lm_target()  # chunk 4, convolution width 3, max_len 12
    assert (t.chunk_sizes, t.conv_window, t.max_len) == ((4,), 3, 12)
    assert t.cut_points() == (2, 3, 4, 5, 9)
    assert tiny_lm_target(max_len=7).cut_points() == (2, 3, 4, 5)
    assert tiny_lm_target(chunk_sizes=(2, 4), conv_window=None).cut_points() == (1, 2, 3, 4,
                                                                                 5, 9)
    assert tiny_lm_target(chunk_sizes=(), conv_window=None).cut_points() == ()
    assert all(tiny_lm_target().offers(c) for c in ("extend", "copy_cache", "rollback",
                                                    "padded_prefill"))


def test_the_control_case_cuts_at_every_declared_point_and_saves_off_a_boundary():
    t = tiny_lm_target()
    case = mc.serving_control_case(t)
    assert case.cuts == t.cut_points()
    assert case.save == 5 and case.save % t.chunk_sizes[0] != 0
    assert 0 < case.accept < case.draft and case.save + case.draft <= case.length - 1
    for row, alt in zip(case.ids, case.alt, strict=True):
        assert alt[case.save] != row[case.save]
        assert alt[case.save + case.accept] != row[case.save + case.accept]


@pytest.mark.parametrize("check", mc.SERVING_CHECKS, ids=lambda f: f.__name__)
def test_each_serving_check_passes_on_the_built_in_lm_and_its_defect_fails(check):
    """The power control in float64 and float32: the planted defect fails at the default init
    and the correct model passes there."""
    t = tiny_lm_target()
    case = mc.serving_control_case(t)
    for dtype in ("float64", "float32"):
        power = mc.power_ladder(t, check, dtype, "planted defect")
        assert power.problem is None and power.scale == 1.0, power
        assert check(t, dtype, 1.0, case, False) is None
        assert check(t, dtype, 1.0, case, True) is not None


@pytest.mark.parametrize("rollback", [True, False], ids=["rollback", "copy-route"])
@pytest.mark.parametrize("accept", ["none", "some", "all"])
def test_speculative_rollback_holds_for_j_0_and_k_by_both_routes(rollback, accept):
    """Accepting none, some or all of the drafts, by the target's rollback or by a copy saved
    before drafting, continues as the full forward; the kept-rejected-draft defect fails
    whatever the drawn j: every case also runs j = 0 and j = k, and j = 0 rejects every draft
    (so the defect is seen even when the drawn j accepts all)."""
    t = tiny_lm_target() if rollback else tiny_lm_target(rollback=None)
    base = mc.serving_control_case(t)
    j = {"none": 0, "some": 1, "all": base.draft}[accept]
    case = mc._serving_case([list(r) for r in base.ids], [list(r) for r in base.alt],
                            t.vocab_size, base.cuts, base.save, base.draft, j, base.pads)
    for dtype in ("float64", "float32"):
        assert mc.speculative(t, dtype, 1.0, case, False) is None
        planted = mc.speculative(t, dtype, 1.0, case, True)
        assert planted is not None and "0 of" in planted if j == base.draft else planted


def test_rollback_refuses_a_count_beyond_the_last_extend():
    t = tiny_lm_target()
    m = t.build(0)
    ids = torch.tensor([[1, 2, 3, 4]])
    _, cache = t.extend(m, None, ids)
    with pytest.raises(ValueError, match="n must be an int in"):
        t.rollback(m, cache, 5)
    with pytest.raises(ValueError, match="n must be an int in"):
        t.rollback(m, cache, -1)
    empty = t.rollback(m, cache, 4)
    want = t.forward(m, ids[:, :1])
    got, _ = t.extend(m, empty, ids[:, :1])
    assert torch.allclose(got, want, atol=1e-6)


def test_copy_cache_is_not_changed_by_continuing_the_original():
    """The built-in copy shares tensors; its calls never write into a cache they are given,
    so the copy still holds the saved state after the original went on."""
    t = tiny_lm_target()
    m = t.build(1, dtype="float64")
    ids = torch.tensor([[5, 6, 7, 8, 9, 10]])
    _, cache = t.extend(m, None, ids[:, :3])
    saved = t.copy_cache(cache)
    before = [x.clone() for st in saved for x in st]
    t.extend(m, cache, ids[:, 3:])
    t.step(m, cache, ids[:, 3])
    assert all(torch.equal(a, x) for a, x in zip(before, (x for st in saved for x in st),
                                                  strict=True))


#: serving mutant → the check that is meant to kill it.
INTENDED = {
    "model_restore_at_chunk_boundary": mc.restore,
    "model_rollback_keeps_rejected_token": mc.speculative,
    "model_padded_prefill_state_leaks": mc.padded_decode,
    "model_extend_updates_cache_in_place": mc.continuations,
    "model_chunk_window_not_carried": mc.chunked_prefill,
    "model_saved_state_in_bfloat16": mc.restore,
    "model_short_chunk_overwrites_window": mc.restore,
}


def test_every_serving_mutant_names_its_intended_property():
    assert set(INTENDED) == set(mm.SERVING_MUTANTS)
    names = {"restore": "restored_state", "speculative": "speculative_rollback",
             "padded_decode": "padded_prefill", "continuations": "continuations_from",
             "chunked_prefill": "chunked_prefill"}
    for name, check in INTENDED.items():
        killers = mm.MODEL_MUTANTS[name][1]
        assert any(names[check.__name__] in k for k in killers), (name, killers)


@pytest.mark.parametrize("name", sorted(INTENDED))
def test_each_serving_mutant_fails_its_check_and_the_twin_passes(name):
    """On the control case at the default init, float64 and float32: the mutant fails its
    intended check, the correct twin passes it."""
    mutant = getattr(mm, f"target_{name}")[0]
    twin = mm.control_model_tiny_lm[0]
    check = INTENDED[name]
    for dtype in ("float64", "float32"):
        case = mc.serving_control_case(mutant)
        assert check(mutant, dtype, 1.0, case, False) is not None, (name, dtype)
        assert check(twin, dtype, 1.0, case, False) is None, (name, dtype)


def test_a_save_on_a_chunk_boundary_hides_the_boundary_mutant():
    """Why the save point is drawn around chunk sizes: the state kept at the last chunk
    boundary is right exactly when the save point is one (b = 4), wrong at b = 5."""
    mutant = mm.target_model_restore_at_chunk_boundary[0]
    base = mc.serving_control_case(mutant)
    for save, fails in ((4, False), (5, True)):
        case = dataclasses.replace(base, save=save)
        assert (mc.restore(mutant, "float64", 1.0, case, False) is not None) == fails


class _HFCache:
    """An HF-style cache object: the tiny LM's block states, updated in place by the model."""

    def __init__(self, states):
        self.states = list(states)


class _HFLike(torch.nn.Module):
    """The tiny LM called the HF way (``model(input_ids=…, past_key_values=…, use_cache=True)``
    returning ``.logits`` and ``.past_key_values``), its cache updated in place as HF caches
    are: a saved state must be a deep copy."""

    def __init__(self):
        super().__init__()
        from kernel_verify.impls.torch.tiny_lm import build_tiny_lm

        self.lm = build_tiny_lm(int(torch.randint(0, 2**31 - 1, ())))

    def forward(self, input_ids, past_key_values=None, use_cache=True, attention_mask=None):
        from types import SimpleNamespace

        if attention_mask is not None:
            logits, states = self.lm.forward_padded(input_ids, attention_mask)
        else:
            logits, states = self.lm(input_ids, None if past_key_values is None
                                     else past_key_values.states)
        cache = past_key_values or _HFCache(states)
        cache.states[:] = states
        return SimpleNamespace(logits=logits, past_key_values=cache)


def _hf_target(**kw):
    from kernel_verify.adapters.hf_models import hf_model_target

    return hf_model_target("hf-like", _HFLike, vocab_size=32, generate=False, float64=True,
                           claims=frozenset({"left_padding"}), chunk_sizes=(4,),
                           conv_window=3, **kw)


def test_hf_adapter_offers_serving_calls_only_when_asked():
    plain = _hf_target()
    assert not any(plain.offers(c) for c in ("extend", "copy_cache", "rollback",
                                             "padded_prefill"))
    t = _hf_target(serving=True, padded_prefill=True)
    assert t.offers("extend") and t.offers("copy_cache") and t.offers("padded_prefill")
    assert not t.offers("rollback") and t.cut_points() == (2, 3, 4, 5, 9)
    with pytest.raises(ValueError, match="left_padding"):
        from kernel_verify.adapters.hf_models import hf_model_target

        hf_model_target("x", _HFLike, vocab_size=32, padded_prefill=True)


@pytest.mark.parametrize("check", mc.SERVING_CHECKS, ids=lambda f: f.__name__)
def test_hf_adapter_serving_calls_pass_and_their_defects_fail(check):
    """Through the HF adapter (caches updated in place, saved by deep copy, rollback by the
    copy route) every serving check passes at the default init and its defect fails."""
    t = _hf_target(serving=True, padded_prefill=True)
    case = mc.serving_control_case(t)
    for dtype in ("float64", "float32"):
        assert check(t, dtype, 1.0, case, False) is None, dtype
        assert check(t, dtype, 1.0, case, True) is not None, dtype


def test_a_shallow_copy_of_an_in_place_cache_is_caught():
    """Why the adapter deep-copies: with the cache object itself as the 'copy', continuing the
    live cache changes the saved state, and the continuation and restore checks fail."""
    t = dataclasses.replace(_hf_target(serving=True), copy_cache=lambda cache: cache)
    case = mc.serving_control_case(t)
    assert mc.continuations(t, "float64", 1.0, case, False) is not None
    assert mc.restore(t, "float64", 1.0, case, False) is not None


def test_a_saved_state_in_a_lower_precision_is_seen_at_the_size_its_dtype_allows():
    """A prefix cache keeping the state in float32 changes nothing for the float32 model and is
    caught on the float64 path (tolerance ~1e-15 there); bfloat16 is caught on both."""
    def rounded(dtype):
        def copy(cache):
            from kernel_verify.properties.builtin_models import ServingCache

            states = [tuple(x.to(dtype).to(x.dtype) for x in st) for st in cache]
            return ServingCache(states, cache.pos, cache.prev, cache.last)
        return tiny_lm_target(copy_cache=copy)

    f32, bf16 = rounded(torch.float32), rounded(torch.bfloat16)
    case = mc.serving_control_case(f32)
    assert mc.restore(f32, "float32", 1.0, case, False) is None
    assert mc.restore(f32, "float64", 1.0, case, False) is not None
    for dtype in ("float32", "float64"):
        assert mc.restore(bf16, dtype, 1.0, case, False) is not None
