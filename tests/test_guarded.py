"""tunekit.guarded: copies of tensor arguments between guard bands, in this process and shipped
to a worker. Real tensors on the CPU; stores into the bands are made by hand here (by kernels in
test_faults.py)."""

from __future__ import annotations

import pickle

import pytest
import torch

from tunekit.guarded import GUARD_BYTE, MAX_GUARD, MIN_GUARD, GuardedTensors, guard_bytes, ship, with_tensors


def views_of_one_buffer() -> dict[str, torch.Tensor]:
    """Arguments as a caller may pass them: views of one buffer (a transposed one, one misaligned
    by 4 bytes, a strided one, one of another dtype), the same tensor twice, and one of its own."""
    base = torch.arange(256, dtype=torch.float32)
    return {"t": base[:64].view(8, 8).t(), "misaligned": base[65:97], "strided": base.view(16, 16)[2:, 1::2],
            "as_int": base[128:160].view(torch.int32), "in_place": base[200:], "out": base[200:],
            "own": torch.arange(10, dtype=torch.int64)}


@pytest.mark.parametrize("how", ["copied here", "shipped and landed"])
def test_copies_keep_layout_alignment_values_and_shared_storage(how):
    """Each copy has its argument's size, strides, dtype, values and address modulo 16; arguments
    that share a buffer in the call share one copy, at the same distances apart; no copy shares
    memory with the caller's tensors."""
    tensors = views_of_one_buffer()
    if how == "copied here":
        copies = GuardedTensors.copy_of(tensors).tensors
    else:
        copies = pickle.loads(pickle.dumps(ship(tensors))).land().tensors
    caller_memory = {t.untyped_storage().data_ptr() for t in tensors.values()}
    for name, tensor in tensors.items():
        copy = copies[name]
        assert (copy.shape, copy.stride(), copy.dtype) == (tensor.shape, tensor.stride(), tensor.dtype), name
        assert copy.data_ptr() % 16 == tensor.data_ptr() % 16, name
        assert torch.equal(copy, tensor), name
        assert copy.untyped_storage().data_ptr() not in caller_memory, name
    shared = [name for name in tensors if name != "own"]
    assert len({copies[name].untyped_storage().data_ptr() for name in shared}) == 1
    for name in shared:
        assert copies[name].data_ptr() - copies["t"].data_ptr() == tensors[name].data_ptr() - tensors["t"].data_ptr()
    copies["in_place"].add_(1)  # one tensor passed twice stays one
    assert torch.equal(copies["out"], tensors["out"] + 1)


def test_a_store_into_either_guard_band_is_reported_with_its_argument_and_reach():
    """Stores made by hand just past out's end and just before x's start: verify names each
    argument, the band, how many bytes and how far; the bands are reset, so the next verify is
    clean; stores inside the tensors are not reported."""
    x, out = torch.zeros(100), torch.zeros(100)
    guarded = GuardedTensors.copy_of({"x_ptr": x, "out_ptr": out})
    assert guarded.verify() is None
    copy_out, copy_x = guarded.tensors["out_ptr"], guarded.tensors["x_ptr"]
    copy_out.fill_(5.0)
    torch.as_strided(copy_out, (24,), (1,), copy_out.storage_offset() + 100).fill_(2.0)
    torch.as_strided(copy_x, (3,), (1,), copy_x.storage_offset() - 8).fill_(2.0)  # 32 to 21 bytes before
    message = guarded.verify()
    assert message is not None and message.startswith("out-of-bounds store: it wrote ")
    assert "96 bytes into the guard band after out_ptr, up to 96 bytes past its end" in message
    assert "12 bytes into the guard band before x_ptr, up to 32 bytes before its start" in message
    assert guarded.verify() is None


def test_guard_bands_are_a_quarter_of_the_span_within_bounds():
    assert guard_bytes(0) == guard_bytes(1000) == MIN_GUARD
    assert guard_bytes(1 << 20) == 1 << 18
    assert guard_bytes(1 << 40) == MAX_GUARD
    assert guard_bytes((1 << 20) + 3) % 16 == 0
    guarded = GuardedTensors.copy_of({"x": torch.zeros(1000)})
    (span,) = guarded._spans
    before, after = span.bands()
    assert before.numel() >= MIN_GUARD and after.numel() >= MIN_GUARD
    assert bool((before == GUARD_BYTE).all()) and bool((after == GUARD_BYTE).all())


def test_with_tensors_puts_copies_in_place_of_positional_and_keyword_arguments():
    x, y = torch.zeros(2), torch.ones(2)
    args, kwargs = with_tensors(("x", "n", "y"), (x, 2), {"y": y, "grid": (1,)}, {"x": "X", "y": "Y"})
    assert args == ("X", 2) and kwargs == {"y": "Y", "grid": (1,)}
