"""What a kernel that builds TMA tensor descriptors on the device needs before it launches."""

from __future__ import annotations

import torch

from tunekit.workers import ensure_triton_allocator


def prepare_launch(kernel_name: str, tensor: torch.Tensor) -> None:
    """On a GPU: refuse one older than Hopper (tensor descriptors need compute capability 9.0),
    and give Triton an allocator for the descriptors' memory unless the caller set one. The
    Triton interpreter (CPU tensors) emulates descriptors and needs neither."""
    if not tensor.is_cuda:
        return
    capability = torch.cuda.get_device_capability(tensor.device)
    if capability < (9, 0):
        name = torch.cuda.get_device_name(tensor.device)
        raise ValueError(f"{kernel_name} needs a Hopper or newer GPU (compute capability 9.0 or more, for tensor "
                         f"descriptors); {name} has {capability[0]}.{capability[1]}")
    ensure_triton_allocator()
