"""Moving a float64 NumPy parameter draw to torch, and the low-precision compute policy.

Policy: float64 and float32 inputs are computed in their own dtype. float16 and bfloat16 inputs
are computed in float32 (their range and precision make exp, sums and matrix products of feature
maps useless otherwise) and the result is cast back to the input dtype. Parameters are converted
once, from the float64 draw, straight to the compute dtype on the input's device.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import torch

LOW_PRECISION = (torch.float16, torch.bfloat16)


def compute_dtype(dtype: torch.dtype) -> torch.dtype:
    """The dtype the computation runs in for inputs of ``dtype`` (float32 for half types)."""
    return torch.float32 if dtype in LOW_PRECISION else dtype


def checked_input(x: torch.Tensor, name: str = "x") -> torch.Tensor:
    """``x`` validated (finite floating tensor, at least 2-D) and moved to its compute dtype."""
    from kernel_verify.impls.validation import check_array

    check_array(name, x, min_ndim=2, backend="torch")
    return x.to(compute_dtype(x.dtype))


def to_torch(
    params: Mapping[str, np.ndarray | torch.Tensor],
    device: torch.device | str = "cpu",
    dtype: torch.dtype = torch.float64,
) -> dict[str, torch.Tensor]:
    """Every array of ``params`` as a tensor of ``dtype`` on ``device`` (tensors are moved)."""
    out = {}
    for key, value in params.items():
        if isinstance(value, torch.Tensor):
            out[key] = value.to(device=device, dtype=dtype)
        else:
            out[key] = torch.as_tensor(np.asarray(value), dtype=dtype, device=device)
    return out
