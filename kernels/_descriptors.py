"""What a kernel that builds TMA tensor descriptors on the device needs before it launches."""

from __future__ import annotations

import torch

from tunekit.workers import ensure_triton_allocator


def check_tensors(kernel_name: str, **tensors: torch.Tensor) -> None:
    """Refuse, by name, a tensor a tensor descriptor cannot take: not contiguous, not 16-byte
    aligned, rows that are not a multiple of 16 bytes, not floating point, or of another dtype
    than the first."""
    dtype = next(iter(tensors.values())).dtype
    for name, tensor in tensors.items():
        if not tensor.dtype.is_floating_point or tensor.dtype != dtype:
            raise ValueError(f"{kernel_name} needs {', '.join(tensors)} of one floating-point dtype; {name} is "
                             f"{tensor.dtype}, {next(iter(tensors))} {dtype}")
        row_bytes = tensor.shape[-1] * tensor.element_size() if tensor.dim() else 0
        if not tensor.is_contiguous() or row_bytes % 16 or tensor.data_ptr() % 16:
            raise ValueError(f"{kernel_name} needs {name} contiguous, 16-byte aligned, with rows of a multiple of 16 "
                             f"bytes (tensor descriptors); got shape {tuple(tensor.shape)}, strides {tensor.stride()}, "
                             f"address {tensor.data_ptr()} (mod 16: {tensor.data_ptr() % 16})")


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
