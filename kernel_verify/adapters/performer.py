"""performer-pytorch (lucidrains) as protocol targets, called as its users call it.

FAVOR+ (Choromanski et al. 2021; docs/math.md §2, §9): ``FastAttention(dim_heads, nb_features,
ortho_scaling=0, causal, generalized_attention)`` draws its projection from
``gaussian_orthogonal_random_matrix`` (blocks of ``Qᵀ`` from ``torch.linalg.qr`` of a Gaussian
block, rows rescaled by the norms of independent Gaussian rows (``scaling=0``) or by ``√d``
(``scaling=1``)) and computes

* ``softmax_kernel``: ``φ(x) = m^(−1/2)·(exp(ωᵀx' − ‖x'‖²/2 − c) + ε)``, ``x' = d^(−1/4)x``,
  ``ε = 1e-4``, ``c`` the maximum of ``ωᵀx'`` over the features of each query row, and over all
  features *and all positions* for keys;
* ``generalized_kernel``: ``φ(x) = ReLU(ωᵀx') + 0.001``;
* non-causal ``linear_attention`` (``D⁻¹φ(Q)(φ(K)ᵀV)``) and, for ``causal=True``, the CUDA
  ``CausalDotProduct`` of fast-transformers when it imports, else
  ``causal_linear_attention_noncuda`` (prefix sums; the denominator gets ``+1e-6``).

Targets (all draws seeded through torch's global generator, restored afterwards):

* ``performer.gaussian_orthogonal_random_matrix`` (``scaling=0``): random-matrix target claiming
  Gaussian rows and orthogonal blocks, as the paper's ORF construction does;
* ``performer.gaussian_orthogonal_random_matrix[scaling=1]``: orthogonal blocks, fixed norms;
* ``performer.FastAttention`` and ``…[causal]``: black-box attention at the library's defaults
  (``nb_features = ⌊d·ln d⌋``, at least 1, unless the property asks for ``m``), drawn and
  computed in float64 (``torch.set_default_dtype``; the protocol's precision);
* ``performer.FastAttention[generalized]``: ReLU generalized attention (not softmax).

No forms (docs/math.md §13): causal ``FastAttention`` has no state API — no initial or final
state, no one-token step — so the targets declare none and the forms-and-state properties skip.
"""

from __future__ import annotations

import contextlib
import io
import math

import numpy as np

from kernel_verify.adapters._lazy import need
from kernel_verify.adapters._torchseed import as_torch, torch_seeded
from kernel_verify.properties.protocol import AttentionTarget, RandomMatrixTarget


@contextlib.contextmanager
def float64_default():
    """The library draws with ``torch.randn`` in torch's default dtype: make it float64 (the
    protocol's precision), as a user does with ``torch.set_default_dtype``; restored after."""
    import torch

    old = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        yield
    finally:
        torch.set_default_dtype(old)


def default_nb_features(d: int) -> int:
    """FastAttention's default ``int(d·ln d)``, which is 0 for d = 1 (the library then fails in
    ``torch.cat`` on an empty list; reported on the conformance page): at least 1 here."""
    return max(1, int(d * math.log(d)))


def orthogonal_matrix(scaling: int):
    """``draw(rng, m, d)`` through ``gaussian_orthogonal_random_matrix(m, d, scaling)``."""

    def draw(rng: np.random.Generator, m: int, d: int) -> np.ndarray:
        lib = need("performer", "performer_pytorch")
        with torch_seeded(int(rng.integers(2**62))), float64_default():
            w = lib.gaussian_orthogonal_random_matrix(m, d, scaling=scaling)
        return w.double().numpy()

    return draw


def fast_attention(*, generalized: bool = False):
    """``attention(q, k, v, causal, seed, m=None)`` through ``FastAttention`` in float64."""

    def attention(q, k, v, *, causal: bool, seed: int, m: int | None = None) -> np.ndarray:
        lib = need("performer", "performer_pytorch")
        import torch

        d = q.shape[-1]
        with (torch_seeded(seed), float64_default(),
              contextlib.redirect_stdout(io.StringIO())):
            # the constructor prints a notice when the CUDA causal kernel is unavailable
            module = lib.FastAttention(d, nb_features=m or default_nb_features(d),
                                       causal=causal, generalized_attention=generalized)
        try:
            if isinstance(q, torch.Tensor):  # torch in, torch out: differentiable by autograd
                return module.to(q.device)(q, k, v)
            tq, tk, tv = as_torch(q, k, v)
            with torch.no_grad():
                return module(tq, tk, tv).numpy()
        except RuntimeError as err:  # torch's shape errors: the protocol's ValueError
            raise ValueError(str(err)) from err

    return attention


#: What the library's backward is known to get wrong (docs/math.md §14): ``softmax_kernel``
#: subtracts a *detached* maximum of ``ωᵀx'`` and then adds ``ε = 1e-4``, so the shift no longer
#: cancels and the forward depends on the maximising entry through a path the backward drops.
#: Measured: float64 central differences and autograd differ by about 1 % (gradcheck, fast mode,
#: d = 4, m = 16, causal and non-causal).
GRADIENT_KNOWN = {
    "test_gradcheck_float64_attention": "performer-pytorch's softmax_kernel subtracts a detached "
    "max and then adds eps=1e-4: the backward is not the derivative of the forward (about 1 % "
    "off, measured with central differences)",
}
#: FastAttention takes torch tensors (float64, the protocol's precision) and autograd gives its
#: gradients: the targets take torch tensors only (the library is torch; NumPy input would only
#: be converted), so every property runs once, on torch, and the gradient properties run
#: (properties/test_gradients.py).
GRADIENTS = frozenset({"differentiable", "deterministic_backward"})

targets = [
    RandomMatrixTarget("performer.gaussian_orthogonal_random_matrix", orthogonal_matrix(0),
                       frozenset({"gaussian_rows", "orthogonal"})),
    RandomMatrixTarget("performer.gaussian_orthogonal_random_matrix[scaling=1]",
                       orthogonal_matrix(1), frozenset({"orthogonal"})),
    AttentionTarget("performer.FastAttention", fast_attention(),
                    frozenset({"noncausal", "positive_weights", "approximates_softmax"})
                    | GRADIENTS, backends=("torch",), known_failures=GRADIENT_KNOWN),
    AttentionTarget("performer.FastAttention[causal]", fast_attention(),
                    frozenset({"causal", "positive_weights", "approximates_softmax"}) | GRADIENTS,
                    backends=("torch",), known_failures=GRADIENT_KNOWN),
    AttentionTarget("performer.FastAttention[generalized]", fast_attention(generalized=True),
                    frozenset({"noncausal", "causal", "positive_weights"}) | GRADIENTS,
                    backends=("torch",)),
]
