"""The one place a missing GPU shows: ``torch:cuda`` series exist only where CUDA does.

On a machine without CUDA every other class leaves ``torch:cuda`` out of its parameters (so
nothing is skipped per combination); this benchmark is skipped once with the reason. On a CUDA
machine it records the number of CUDA devices, and every class times ``torch:cuda`` too, with
``torch.cuda.synchronize()`` inside the timed function.
"""

from __future__ import annotations

import torch


class CudaDevice:
    """Presence of CUDA (the CUDA series of every benchmark are recorded iff this is 1)."""

    unit = "devices"

    def setup(self) -> None:
        if not torch.cuda.is_available():
            raise NotImplementedError(
                "torch:cuda: torch.cuda.is_available() is False on this machine; every CUDA "
                "parameter is left out of the benchmarks here (run `make bench` on a GPU machine)"
            )

    def track_cuda_devices(self) -> int:
        return torch.cuda.device_count()
