"""Controls: correct twins of the mutant code, run through the suite like the mutants; a control
must pass every property (a failure is a false alarm of the suite, or a bug in the mutants'
skeleton that would make their kills meaningless).

Each twin runs the *same code path* as the mutants of its family with every defect switched off:

* attention (:mod:`kernel_verify.mutants.attention`): exact softmax attention (the skeleton
of the
  mask/shift mutants), FAVOR+ through the stable log-space kernel (the skeleton of the FAVOR+
  mutants, float64), Nyströmformer with per-matrix norms;
* random matrices (:mod:`kernel_verify.mutants.matrices`): the built-in i.i.d., orthogonal
and Fastfood
  draws behind the mutants' ``RandomMatrixTarget`` wrapper, claiming what the mutants claim;
* Nyström (:mod:`kernel_verify.mutants.nystrom`): the mutants' skeleton with the
pseudo-inverse and
  its eigenvalue cutoff;
* feature maps (:mod:`kernel_verify.mutants.features`): the registry's own NumPy functions
behind the
  mutants' wrapper (:func:`kernel_verify.mutants.features.feature_mutant`: white-box,
  parameters from the registry draw, attached FAVOR-style attention);
* black-box feature maps (the skeleton of ``blackbox_positive_*``,
  :func:`kernel_verify.mutants.features.blackbox_positive` with no defect);
* gradients (:data:`kernel_verify.mutants.gradients.GRADIENT_CONTROLS`): the hand-written
  backwards with the right formula;
* forms of causal attention: :data:`kernel_verify.mutants.forms.FORMS_CONTROLS`;
* low-rank attentions (:mod:`kernel_verify.mutants.lowrank_batch`): the Linformer and
  Nyströmformer skeletons without a batch coupling, and the built-in low-rank targets.

The black-box pass has its own controls (:data:`kernel_verify.mutants.blackbox.CONTROLS`:
registry maps through ``sample_fn`` only); both are judged by
:func:`kernel_verify.mutants.kills.control_failed`. Loader spec of one control:
``kernel_verify.mutants.controls:target_<name>``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from kernel_verify.mutants import attention as att
from kernel_verify.mutants.base import Mutant
from kernel_verify.mutants.features import _blackbox_of
from kernel_verify.mutants.features import blackbox_positive as _blackbox_positive
from kernel_verify.mutants.gradients import GRADIENT_CONTROL_ROWS, GRADIENT_CONTROLS
from kernel_verify.mutants.hybrid_lm import CONTROLS as HYBRID_LM_CONTROLS
from kernel_verify.mutants.kernel_scale import ARD_TWIN as _ARD_TWIN
from kernel_verify.mutants.kernel_scale import ORF_TWIN as _ORF_TWIN
from kernel_verify.mutants.kernel_scale import SCALE_TWINS as _SCALE_TWINS
from kernel_verify.mutants.kernel_scale import ard_mixture as _ard_mixture
from kernel_verify.mutants.kernel_scale import orf_blocks as _orf_blocks
from kernel_verify.mutants.kernel_scale import scaled_rff_pairs as _scaled_rff_pairs
from kernel_verify.mutants.matrices import _builtin
from kernel_verify.mutants.matrices import target as matrix_target
from kernel_verify.mutants.models import CONTROLS as MODEL_CONTROLS
from kernel_verify.mutants.nystrom import target as nystrom_target
from kernel_verify.mutants.nystrom import truncation_target
from kernel_verify.properties.protocol import Target

LOADER = "kernel_verify.mutants.controls:target_"


def _renamed(targets: list[Target]) -> list[Target]:
    return [dataclasses.replace(t, name=t.name.replace("mutant:", "control:", 1))
            for t in targets]


def _feature_twin(entry_name: str, attention: bool) -> Callable[[], list[Target]]:
    def make() -> list[Target]:
        from kernel_verify.impls.registry import get
        from kernel_verify.mutants.features import feature_mutant

        base = get(entry_name)
        return _renamed(feature_mutant(entry_name, entry_name, base.numpy_fn,
                                       log_fn=base.log_numpy_fn, attention=attention))

    return make


def _registry_fn(entry_name: str):
    from kernel_verify.impls.registry import get

    return get(entry_name).numpy_fn


def _attention_twin(name: str, fn: Callable, claims: frozenset[str],
                    **fixed) -> Callable[[], list[Target]]:
    return lambda: _renamed([att._target(name, fn, claims, **fixed)])


def _forms() -> dict[str, Callable[[], list[Target]]]:
    try:
        from kernel_verify.mutants.forms import FORMS_CONTROLS
    except ImportError:  # pragma: no cover - the forms mutants are optional
        return {}
    return dict(FORMS_CONTROLS)


def _gated() -> dict[str, Callable[[], list[Target]]]:
    from kernel_verify.mutants.gated import GATED_CONTROLS

    return dict(GATED_CONTROLS)


def _delta() -> dict[str, Callable[[], list[Target]]]:
    from kernel_verify.mutants.delta import DELTA_CONTROLS

    return dict(DELTA_CONTROLS)


def _gate_input() -> dict[str, Callable[[], list[Target]]]:
    from kernel_verify.mutants.gate_inputs import GATE_INPUT_CONTROLS

    return dict(GATE_INPUT_CONTROLS)


def _hybrid() -> dict[str, Callable[[], list[Target]]]:
    from kernel_verify.mutants.hybrid import HYBRID_CONTROLS

    return dict(HYBRID_CONTROLS)


def _exact_lowp() -> dict[str, Callable[[], list[Target]]]:
    from kernel_verify.mutants.exact_attention_lowp import EXACT_LOWP_CONTROLS

    return dict(EXACT_LOWP_CONTROLS)


def _lowp_paths() -> dict[str, Callable[[], list[Target]]]:
    from kernel_verify.mutants.lowp_paths import LOWP_PATH_CONTROLS

    return dict(LOWP_PATH_CONTROLS)


def _lowrank_batch() -> dict[str, Callable[[], list[Target]]]:
    from kernel_verify.mutants.lowrank_batch import LOWRANK_BATCH_CONTROLS

    return dict(LOWRANK_BATCH_CONTROLS)


def _gated_torch() -> dict[str, Callable[[], list[Target]]]:
    from kernel_verify.mutants.gated_torch import GATED_TORCH_CONTROLS

    return dict(GATED_TORCH_CONTROLS)


_SPECS: list[tuple[str, str, str, Callable[[], list[Target]]]] = [
    ("exact_softmax", "attention", "exact softmax attention (the mask/shift mutants' skeleton)",
     _attention_twin("exact_softmax", att.exact_softmax, att.EXACT)),
    ("favor_log_space", "attention", "FAVOR+ through the stable log-space kernel, float64",
     _attention_twin("favor_log_space", att.favor, att.ALL, key_shift="log_space")),
    ("nystromformer", "attention", "Nyströmformer with per-matrix Z₀ norms",
     _attention_twin("nystromformer", att.nystromformer, frozenset())),
    ("exact_softmax_slow", "attention",
     "exact softmax attention declaring call_seconds (the blocked-mask mutant's skeleton, "
     "its cost and its reduced random search)",
     _attention_twin("exact_softmax_slow", att.exact_softmax, att.EXACT, call_seconds=att.SLOW)),
    ("fla_chunk_linear_attn_grad_wrapper", "attention",
     "fla's chunk_linear_attn behind the dk-scaling mutant's wrapper with factor 1",
     lambda: att.fla_dk_scaled(1.0, "control:fla_chunk_linear_attn_grad_wrapper")),
    ("matrix_iid", "random_matrix", "i.i.d. Gaussian rows",
     lambda: _renamed([matrix_target("matrix_iid", _builtin("iid"), {"gaussian_rows"})])),
    ("matrix_orthogonal", "random_matrix", "ORF with χ_d norms (sign-corrected QR)",
     lambda: _renamed([matrix_target("matrix_orthogonal", _builtin("orthogonal"),
                                     {"gaussian_rows", "orthogonal"})])),
    ("matrix_simplex", "random_matrix", "SimRFs: Haar-rotated simplex blocks, χ_d norms",
     lambda: _renamed([matrix_target("matrix_simplex", _builtin("simplex"),
                                     {"gaussian_rows", "simplex"})])),
    ("nystrom_pinv", "nystrom", "Nyström K̃ = C·W⁺·Cᵀ with the eigenvalue cutoff",
     lambda: _renamed([nystrom_target("nystrom_pinv", "pinv")])),
    ("nystrom_truncated", "nystrom", "truncated Nyström C·W_r⁺·Cᵀ (6 landmarks, rank 3)",
     lambda: _renamed([nystrom_target("nystrom_truncated", "truncated_largest")])),
    ("truncated_eigh", "nystrom", "rank-r truncation keeping the r largest eigenpairs of eigh",
     lambda: _renamed([truncation_target("truncated_eigh", "largest")])),
    ("softmax_positive", "feature_map", "SM⁺ (registry function), with attention",
     _feature_twin("softmax_positive[iid]", True)),
    ("softmax_hyperbolic", "feature_map", "SM⁺ₕ (registry function), with attention",
     _feature_twin("softmax_hyperbolic[iid]", True)),
    ("gerf", "feature_map", "GERF (registry function), with attention",
     _feature_twin("gerf[iid]", True)),
    ("sderf", "feature_map", "SDERF, FAVOR#'s dense-exponential features (registry function), "
     "with attention", _feature_twin("sderf[iid]", True)),
    ("rebased", "feature_map", "ReBased (registry function, docs/math.md §21)",
     _feature_twin("rebased", False)),
    ("darkformer", "feature_map", "DARKFormer (registry function, docs/math.md §21)",
     _feature_twin("darkformer", False)),
    ("rff_pairs", "feature_map", "RFF pairs (registry function)",
     _feature_twin("rff_pairs[iid]", False)),
    ("rff_phase", "feature_map", "random-phase RFF (registry function)",
     _feature_twin("rff_phase[iid]", False)),
    ("relu_features", "feature_map", "ReLU features (registry function)",
     _feature_twin("relu_features[iid]", False)),
    ("taylor2", "feature_map", "Taylor-2 (registry function)", _feature_twin("taylor2", False)),
    ("blackbox_positive", "feature_map", "black-box SM⁺ drawn from the seed, float64",
     lambda: _renamed(_blackbox_positive("blackbox_positive"))),
    ("blackbox_taylor2", "feature_map", "Taylor-2 (registry function) seen through sample_fn",
     lambda: _renamed(_blackbox_of("blackbox_taylor2", "taylor2", _registry_fn("taylor2")))),
    ("blackbox_nofamily_rff_phase", "feature_map",
     "random-phase RFF (registry function) seen through sample_fn, no family declared",
     lambda: _renamed(_blackbox_of("blackbox_nofamily_rff_phase", "rff_phase[iid]",
                                   _registry_fn("rff_phase[iid]"), family=False))),
    ("rff_pairs_fixed_norm", "feature_map",
     "fixed-norm RFF pairs (registry function; biased, mean kernel gaussian_fixed_norm)",
     _feature_twin("rff_pairs[orthogonal_fixed_norm]", False)),
    ("softmax_positive_fixed_norm", "feature_map",
     "fixed-norm SM⁺ (registry function; biased, mean kernel softmax_fixed_norm: row-law range)",
     _feature_twin("softmax_positive[orthogonal_fixed_norm]", False)),
    ("softmax_positive_simplex", "feature_map", "SM⁺ on simplex rows (registry function)",
     _feature_twin("softmax_positive[simplex]", False)),
    ("rff_pairs_simplex", "feature_map", "RFF pairs on simplex rows (registry function)",
     _feature_twin("rff_pairs[simplex]", False)),
    ("rff_pairs_sorf", "feature_map",
     "SORF RFF pairs (registry function; biased, no mean kernel: reference mean)",
     _feature_twin("rff_pairs[sorf]", False)),
    ("polysketch", "feature_map",
     "PolySketch vec((Sx)(Sx)ᵀ) (registry function; biased, no mean kernel: exact sketch "
     "moments)",
     _feature_twin("polysketch[iid]", False)),
    ("random_maclaurin", "feature_map",
     "random Maclaurin features of exp(xᵀy) (registry function; unbiased, exact variance)",
     _feature_twin("random_maclaurin", False)),
    # the correct twins of the kernel-scale mutants (kernel_verify/mutants/kernel_scale.py)
    *((name, "feature_map", f"black-box RFF pairs of the Gaussian kernel with σ = {sigma:g} "
       f"({'family declared' if fam else 'no family declared'}), right scale",
       lambda name=name, sigma=sigma, fam=fam: _renamed(
           _scaled_rff_pairs(name, sigma, None, family=fam)))
      for name, sigma, fam in _SCALE_TWINS),
    (_ARD_TWIN, "feature_map", "black-box RFF of an anisotropic spectral mixture (lengths 0.1 "
     "and 10, no family declared), right lengths",
     lambda: _renamed(_ard_mixture(_ARD_TWIN, False))),
    (_ORF_TWIN, "feature_map", "black-box orthogonal random features of the Gaussian kernel "
     "(σ = 1, no family declared), frequencies the rows of diag(s)Q",
     lambda: _renamed(_orf_blocks(_ORF_TWIN, False))),
    *((name, row.family, row.description, GRADIENT_CONTROLS[name])
      for name, row in GRADIENT_CONTROL_ROWS.items()),
]

#: Every white-box control (forms controls keep their own loader).
CONTROLS: list[Mutant] = [
    *(Mutant(f"control_{n}", fam, desc, make, loader=LOADER) for n, fam, desc, make in _SPECS),
    *(Mutant(n, "attention", "forms of causal attention with every switch off", make,
             loader="kernel_verify.mutants.forms:control_")
      for n, make in _forms().items()),
    *(Mutant(n, "attention", "gated linear attention with every switch off", make,
             loader="kernel_verify.mutants.gated:control_")
      for n, make in _gated().items()),
    *(Mutant(n, "attention", "the delta rule (gated delta, KDA) with every switch off", make,
             loader="kernel_verify.mutants.delta:control_")
      for n, make in _delta().items()),
    *(Mutant(n, "attention", "Gated DeltaNet computing its gates from a raw input (Mamba's "
             "parametrisation) without a defect", make,
             loader="kernel_verify.mutants.gate_inputs:control_")
      for n, make in _gate_input().items()),
    *(Mutant(n, "attention", "torch gated linear attention (built-in) without a defect", make,
             loader="kernel_verify.mutants.gated_torch:control_")
      for n, make in _gated_torch().items()),
    *(Mutant(n, "attention", "hybrid sliding-window + linear attention without a defect", make,
             loader="kernel_verify.mutants.hybrid:control_")
      for n, make in _hybrid().items()),
    *(Mutant(n, "attention", "Linformer / Nyströmformer without a batch coupling", make,
             loader="kernel_verify.mutants.lowrank_batch:control_")
      for n, make in _lowrank_batch().items()),
    *(Mutant(n, "attention", "float32/half-only exact attention with its hand-written "
             "backward, without a defect", make,
             loader="kernel_verify.mutants.exact_attention_lowp:control_")
      for n, make in _exact_lowp().items()),
    *(Mutant(n, "attention", "float32-only / half-only exact attention and float32 Taylor "
             "forms with varlen, without a defect (the low-precision path mutants' twins)", make,
             loader="kernel_verify.mutants.lowp_paths:control_")
      for n, make in _lowp_paths().items()),
    *MODEL_CONTROLS,  # the tiny causal LM (kernel_verify.mutants.models)
    *HYBRID_LM_CONTROLS,  # its sliding-window hybrid (kernel_verify.mutants.hybrid_lm)
]
_BY_NAME = {c.name: c for c in CONTROLS if c.loader == LOADER}


def __getattr__(attr: str) -> list[Target]:
    """``target_<name>``: the targets of one control (the third-party loader's spec)."""
    if attr.startswith("target_") and attr.removeprefix("target_") in _BY_NAME:
        return _BY_NAME[attr.removeprefix("target_")].targets
    raise AttributeError(f"module {__name__!r} has no attribute {attr!r}")


__all__ = ["CONTROLS"]
