"""The mutant catalogue: every deliberate defect the property suite must catch.

``MUTANTS`` lists :class:`~kernel_verify.mutants.base.Mutant` records; the targets of one
mutant load through the ordinary third-party mechanism with the spec
``verify.mutants.catalogue:target_<name>`` (``KV_TARGET``, ``--kv-target``,
``kernel-verify check``), or in Python with ``load(name)``.

Families: random-matrix constructions (:mod:`kernel_verify.mutants.matrices`), attention
(:mod:`kernel_verify.mutants.attention`), feature maps
(:mod:`kernel_verify.mutants.features`), Nyström
(:mod:`kernel_verify.mutants.nystrom`), gradients
(:mod:`kernel_verify.mutants.gradients`: forward right, backward wrong), whole models
(:mod:`kernel_verify.mutants.models`: the tiny causal LM with one defect;
:mod:`kernel_verify.mutants.hybrid_lm`: its sliding-window hybrid's ring buffer).
``expected_killers`` records which property family (``properties/test_<family>.py``) is meant
to catch each one; the runner's kill matrix shows which actually did.
"""

from __future__ import annotations

from kernel_verify.mutants.attention import ATTENTION_KILLERS, ATTENTION_MUTANTS
from kernel_verify.mutants.base import Mutant
from kernel_verify.mutants.delta import DELTA_KILLERS, DELTA_MUTANTS, make_delta_target
from kernel_verify.mutants.exact_attention_lowp import EXACT_LOWP_KILLERS, EXACT_LOWP_MUTANTS
from kernel_verify.mutants.features import FEATURE_KILLERS, FEATURE_MUTANTS
from kernel_verify.mutants.forms import FORMS_KILLERS, FORMS_MUTANTS, mutant_targets
from kernel_verify.mutants.gate_inputs import (
    GATE_INPUT_KILLERS,
    GATE_INPUT_MUTANTS,
    make_gate_input_target,
)
from kernel_verify.mutants.gated import GATED_KILLERS, GATED_MUTANTS
from kernel_verify.mutants.gated import make_target as gated_target
from kernel_verify.mutants.gated_torch import GATED_TORCH_KILLERS, GATED_TORCH_MUTANTS
from kernel_verify.mutants.gated_torch import make_target as gated_torch_target
from kernel_verify.mutants.gradients import GRADIENT_MUTANTS
from kernel_verify.mutants.hybrid import HYBRID_KILLERS, HYBRID_MUTANTS
from kernel_verify.mutants.hybrid_lm import MUTANTS as HYBRID_LM_MUTANTS
from kernel_verify.mutants.kernel_scale import SCALE_KILLERS, SCALE_MUTANTS
from kernel_verify.mutants.learned_attention import LEARNED_KILLERS, LEARNED_MUTANTS
from kernel_verify.mutants.lowp_paths import (
    LOWP_MAP_MUTANTS,
    LOWP_PATH_KILLERS,
    LOWP_PATH_MUTANTS,
)
from kernel_verify.mutants.lowrank_batch import LOWRANK_BATCH_KILLERS, LOWRANK_BATCH_MUTANTS
from kernel_verify.mutants.matrices import MATRIX_MUTANTS, target
from kernel_verify.mutants.models import MUTANTS as MODEL_MUTANTS
from kernel_verify.mutants.nystrom import (
    NYSTROM_KILLERS,
    NYSTROM_MUTANTS,
    TRUNCATION_MUTANTS,
    truncation_target,
)
from kernel_verify.mutants.nystrom import target as nystrom_target
from kernel_verify.mutants.torch_forms import TORCH_FORMS_KILLERS, TORCH_FORMS_MUTANTS
from kernel_verify.properties.protocol import Target

# black-box maps whose defect is the kernel's length scale: feature-map mutants of their own
# module (kernel_verify/mutants/kernel_scale.py, which builds them with features.py)
FEATURE_MUTANTS.update(SCALE_MUTANTS)
FEATURE_KILLERS.update(SCALE_KILLERS)

MATRICES_FAMILY = "random_matrices"
ATTENTION_FAMILY = "attention_identities"
#: Property families written for feature maps (properties/test_feature_*.py).
FEATURE_FAMILIES = ("feature_reference", "feature_unbiased", "feature_variance",
                    "psd_properties", "taylor", "blackbox_maps")

#: Feature-map mutants whose defect is a constant factor of every feature: normalised attention
#: cancels it, so only the feature-map properties can see it.
_CANCELS_IN_ATTENTION = {"softmax_positive_missing_inv_sqrt_m", "gerf_wrong_d",
                         "softmax_hyperbolic_missing_negative_half",
                         "softmax_positive_divided_by_m", "softmax_hyperbolic_missing_inv_sqrt2"}


def _matrix(name: str) -> Mutant:
    description, draw, claims = MATRIX_MUTANTS[name]
    return Mutant(name, "random_matrix", description,
                  lambda: [target(name, draw, claims)], (MATRICES_FAMILY,))


def _attention(name: str) -> Mutant:
    description, make = ATTENTION_MUTANTS[name]
    return Mutant(name, "attention", description, lambda: [make(name)],
                  ATTENTION_KILLERS.get(name, (ATTENTION_FAMILY,)))


def _feature(name: str) -> Mutant:
    description, make = FEATURE_MUTANTS[name]
    killers = FEATURE_FAMILIES
    if name not in _CANCELS_IN_ATTENTION and name.startswith(("softmax_positive", "gerf")):
        killers = (*killers, ATTENTION_FAMILY)
    killers = FEATURE_KILLERS.get(name, killers)
    return Mutant(name, "feature_map", description, lambda: make(name), killers)


def _nystrom(name: str) -> Mutant:
    description, inverse = NYSTROM_MUTANTS[name]
    return Mutant(name, "nystrom", description, lambda: [nystrom_target(name, inverse)],
                  NYSTROM_KILLERS.get(name, ("nystrom_properties", "psd_properties")))


def _truncation(name: str) -> Mutant:
    description, keep = TRUNCATION_MUTANTS[name]
    return Mutant(name, "nystrom", description, lambda: [truncation_target(name, keep)],
                  NYSTROM_KILLERS[name])


def _gradient(name: str) -> Mutant:
    row = GRADIENT_MUTANTS[name]
    return Mutant(name, row.family, row.description, lambda: row.make(f"mutant:{name}"),
                  row.killers)


def _forms(name: str) -> Mutant:
    """Forms of causal attention (:mod:`kernel_verify.mutants.forms`; controls: its
    ``FORMS_CONTROLS``)."""
    return Mutant(name, "attention", FORMS_MUTANTS[name][0], lambda: mutant_targets(name),
                  FORMS_KILLERS.get(name, ("attention_forms",)))


def _torch_forms(name: str) -> Mutant:
    """Differentiable torch forms (:mod:`kernel_verify.mutants.torch_forms`; control:
    ``forms_torch_correct``)."""
    description, make = TORCH_FORMS_MUTANTS[name]
    return Mutant(name, "attention", description, make, TORCH_FORMS_KILLERS[name])


def _gated(name: str) -> Mutant:
    """Gated linear attention (:mod:`kernel_verify.mutants.gated`; controls: its
    ``GATED_CONTROLS``)."""
    description, switches = GATED_MUTANTS[name]
    return Mutant(name, "attention", description,
                  lambda: [gated_target(f"mutant:{name}", switches)], GATED_KILLERS[name])


def _delta(name: str) -> Mutant:
    """The delta rule (:mod:`kernel_verify.mutants.delta`; controls: its ``DELTA_CONTROLS``)."""
    description, switches = DELTA_MUTANTS[name]
    return Mutant(name, "attention", description,
                  lambda: [make_delta_target(f"mutant:{name}", switches)], DELTA_KILLERS[name])


def _gate_input(name: str) -> Mutant:
    """Gate parametrisations (:mod:`kernel_verify.mutants.gate_inputs`; control:
    ``gate_input_correct``)."""
    description, defect = GATE_INPUT_MUTANTS[name]
    return Mutant(name, "attention", description,
                  lambda: [make_gate_input_target(f"mutant:{name}", defect)],
                  GATE_INPUT_KILLERS[name])


def _gated_torch(name: str) -> Mutant:
    """Differentiable gated linear attention (:mod:`kernel_verify.mutants.gated_torch`; control:
    ``gated_torch_correct``)."""
    description, defect = GATED_TORCH_MUTANTS[name]
    return Mutant(name, "attention", description,
                  lambda: [gated_torch_target(f"mutant:{name}", **defect)],
                  GATED_TORCH_KILLERS[name])


def _hybrid(name: str) -> Mutant:
    """Hybrid sliding-window + linear attention (:mod:`kernel_verify.mutants.hybrid`; controls:
    its ``HYBRID_CONTROLS``)."""
    description, make = HYBRID_MUTANTS[name]
    return Mutant(name, "attention", description, lambda: [make(f"mutant:{name}")],
                  HYBRID_KILLERS[name])


def _lowrank_batch(name: str) -> Mutant:
    """Linformer and Nyströmformer coupled across the batch
    (:mod:`kernel_verify.mutants.lowrank_batch`; controls: its ``LOWRANK_BATCH_CONTROLS``)."""
    description, make = LOWRANK_BATCH_MUTANTS[name]
    return Mutant(name, "attention", description, lambda: [make(f"mutant:{name}")],
                  LOWRANK_BATCH_KILLERS[name])


def _learned(name: str) -> Mutant:
    """ReBased and DARKFormer maps (:mod:`kernel_verify.mutants.learned_attention`; controls:
    ``control_rebased``, ``control_darkformer``)."""
    description, make = LEARNED_MUTANTS[name]
    return Mutant(name, "feature_map", description, lambda: make(name), LEARNED_KILLERS[name])


def _exact_lowp(name: str) -> Mutant:
    """Exact attention in float32/half only (:mod:`kernel_verify.mutants.exact_attention_lowp`;
    control: ``exact_lowp_correct``)."""
    description, make = EXACT_LOWP_MUTANTS[name]
    return Mutant(name, "attention", description, lambda: make(f"mutant:{name}"),
                  EXACT_LOWP_KILLERS[name])


def _lowp_path(name: str) -> Mutant:
    """Float32-only and half-only targets with one defect each, crediting properties on the
    low-precision paths (:mod:`kernel_verify.mutants.lowp_paths`; controls: its
    ``LOWP_PATH_CONTROLS``)."""
    family = "feature_map" if name in LOWP_MAP_MUTANTS else "attention"
    description, make = {**LOWP_PATH_MUTANTS, **LOWP_MAP_MUTANTS}[name]
    return Mutant(name, family, description, lambda: make(f"mutant:{name}"),
                  LOWP_PATH_KILLERS[name])


MUTANTS: list[Mutant] = [
    *(_matrix(n) for n in MATRIX_MUTANTS),
    *(_attention(n) for n in ATTENTION_MUTANTS),
    *(_feature(n) for n in FEATURE_MUTANTS),
    *(_nystrom(n) for n in NYSTROM_MUTANTS),
    *(_truncation(n) for n in TRUNCATION_MUTANTS),
    *(_forms(n) for n in FORMS_MUTANTS),
    *(_torch_forms(n) for n in TORCH_FORMS_MUTANTS),
    *(_gated(n) for n in GATED_MUTANTS),
    *(_gated_torch(n) for n in GATED_TORCH_MUTANTS),
    *(_delta(n) for n in DELTA_MUTANTS),
    *(_gate_input(n) for n in GATE_INPUT_MUTANTS),
    *(_hybrid(n) for n in HYBRID_MUTANTS),
    *(_learned(n) for n in LEARNED_MUTANTS),
    *(_lowrank_batch(n) for n in LOWRANK_BATCH_MUTANTS),
    *(_gradient(n) for n in GRADIENT_MUTANTS),
    *(_exact_lowp(n) for n in EXACT_LOWP_MUTANTS),
    *(_lowp_path(n) for n in [*LOWP_PATH_MUTANTS, *LOWP_MAP_MUTANTS]),
    *MODEL_MUTANTS,
    *HYBRID_LM_MUTANTS,
]
_BY_NAME = {m.name: m for m in MUTANTS}


def get_mutant(name: str) -> Mutant:
    try:
        return _BY_NAME[name]
    except KeyError:
        raise KeyError(f"no mutant {name!r}; known: {', '.join(sorted(_BY_NAME))}") from None


def load(name: str) -> list[Target]:
    """The targets of mutant ``name``."""
    return get_mutant(name).targets


def __getattr__(attr: str) -> list[Target]:
    """``target_<name>``: the targets of one mutant (the third-party loader's spec)."""
    if attr.startswith("target_") and attr.removeprefix("target_") in _BY_NAME:
        return load(attr.removeprefix("target_"))
    raise AttributeError(f"module {__name__!r} has no attribute {attr!r}")


__all__ = ["MUTANTS", "Mutant", "get_mutant", "load"]
