"""Shipped adapters for widely used third-party implementations (issue 12).

One module per library, each exposing ``targets`` (a list of protocol targets,
:mod:`kernel_verify.properties.protocol`) and importing its library lazily: building the
list never imports the library, and a target whose library is missing skips every property with
the reason and the install command (:func:`kernel_verify.adapters._lazy.need`).

========================  =====================  ==========================================
module                    extra                  library (import name)
========================  =====================  ==========================================
``sklearn``               ``sklearn``            scikit-learn (``sklearn``)
``performer``             ``performer``          performer-pytorch (``performer_pytorch``)
``fla``                   ``fla``                fla-core (``fla``)
``nystrom_attention``     ``nystrom``            nystrom-attention (``nystrom_attention``)
``fast_transformers``     ``fast-transformers``  pytorch-fast-transformers (``fast_transformers``)
========================  =====================  ==========================================

Run one: ``kernel-verify check kernel_verify.adapters.sklearn:targets``; all, with a report page
per library under ``reports/conformance/``: ``kernel-verify conformance``.
"""

from kernel_verify.adapters._lazy import LIBRARIES, Library, missing_reason

__all__ = ["LIBRARIES", "Library", "missing_reason"]
