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
    (region,) = guarded._regions
    before, after = region.bands().values()
    assert before.numel() >= MIN_GUARD and after.numel() >= MIN_GUARD
    assert bool((before == GUARD_BYTE).all()) and bool((after == GUARD_BYTE).all())


@pytest.mark.parametrize("how", ["copied here", "shipped and landed"])
def test_a_padded_view_is_copied_with_its_padding_and_guarded_past_its_allocation(how):
    """``middle`` is elements 24 to 999 of a 1024-element allocation. Its copy holds the caller's
    padding on both sides (a kernel reading it reads the same values). Injected: stores into that
    padding, then 8 floats past either end of the allocation. Survives: the first are reported as
    stores into the caller's allocation (96 bytes each side) and the padding gets the caller's
    values back; the second land in a guard band, reported with their reach from middle's own
    ends (96 + 32 bytes). The caller's allocation is unchanged."""
    padded = torch.arange(1024, dtype=torch.float32)
    tensors = {"middle": padded[24:1000]}
    guarded = copied(tensors, how)
    copy = guarded.tensors["middle"]
    before, after = (torch.as_strided(copy, (24,), (1,), copy.storage_offset() + at) for at in (-24, 976))
    assert torch.equal(before, padded[:24]) and torch.equal(after, padded[1000:])
    for padding in (before, after):  # every byte changed
        padding.view(torch.int32).bitwise_not_()
    assert guarded.verify() == ("out-of-bounds store: it changed 96 bytes of the caller's allocation before the start "
                                "of middle, up to 96 bytes away; changed 96 bytes of the caller's allocation past the end of "
                                "middle, up to 96 bytes away")
    assert torch.equal(before, padded[:24]) and torch.equal(after, padded[1000:])
    assert guarded.verify() is None
    torch.as_strided(copy, (8,), (1,), copy.storage_offset() - 32).fill_(-1.0)
    torch.as_strided(copy, (8,), (1,), copy.storage_offset() + 1000).fill_(-1.0)
    assert guarded.verify() == ("out-of-bounds store: it wrote 32 bytes into the guard band before middle, up to 128 "
                                "bytes before its start; wrote 32 bytes into the guard band after middle, up to 128 bytes "
                                "past its end")
    assert torch.equal(padded, torch.arange(1024, dtype=torch.float32))


@pytest.mark.parametrize("how", ["copied here", "shipped and landed"])
def test_a_kernel_that_writes_padding_says_so_and_its_stores_there_are_not_reported(how):
    padded = torch.arange(1024, dtype=torch.float32)
    guarded = copied({"middle": padded[24:1000]}, how, padding=True)
    copy = guarded.tensors["middle"]
    torch.as_strided(copy, (48,), (1,), copy.storage_offset() - 24).fill_(-1.0)
    assert guarded.verify() is None


@pytest.mark.parametrize("how", ["copied here", "shipped and landed"])
def test_stores_between_the_elements_of_a_strided_view_are_reported(how):
    """``big[:, :40]`` of an (8, 64) allocation: the 24 columns after each row's 40 belong to the
    caller (another view, a cache's other heads). Injected: a store into column 50 of row 3, then
    into column 39. Survives: the first is reported and reset, the second (an element) is not."""
    big = torch.arange(8 * 64, dtype=torch.float32).reshape(8, 64)
    guarded = copied({"view": big[:, :40]}, how)
    copy = guarded.tensors["view"]
    torch.as_strided(copy, (1,), (1,), copy.storage_offset() + 3 * 64 + 50).view(torch.int32).bitwise_not_()
    assert guarded.verify() == ("out-of-bounds store: it changed 4 bytes of the caller's allocation between the "
                                "elements of view")
    assert torch.equal(torch.as_strided(copy, (8, 64), (64, 1), copy.storage_offset()), big)
    copy[3, 39] = -1.0
    assert guarded.verify() is None


@pytest.mark.parametrize("how", ["copied here", "shipped and landed"])
def test_where_the_allocation_goes_on_past_the_margin_there_is_no_band(how):
    """Views of a 4 MiB allocation: ``middle`` (100 floats far from both ends) is copied with a
    64 KiB margin of the caller's bytes on each side and no band; ``head`` (its first 100 floats)
    gets a band before it only. Neither copy holds the whole allocation. A store into the margin
    is a store into the caller's allocation: reported."""
    base = torch.arange(1 << 20, dtype=torch.float32)
    margin = MIN_GUARD // 4  # floats
    for name, tensor, sides in (("middle", base[500_000:500_100], []), ("head", base[:100], ["before"])):
        guarded = copied({name: tensor}, how)
        (region,) = guarded._regions
        assert list(region.bands()) == sides
        assert region.buffer.numel() < len(sides) * MIN_GUARD + 400 + 2 * MIN_GUARD + 16
        copy = guarded.tensors[name]
        after = torch.as_strided(copy, (margin,), (1,), copy.storage_offset() + 100)
        assert torch.equal(after, base[tensor.storage_offset() + 100:][:margin])
        after.view(torch.int32).bitwise_not_()  # every byte changed
        assert guarded.verify() == (f"out-of-bounds store: it changed {MIN_GUARD} bytes of the caller's allocation past "
                                    f"the end of {name}, up to {MIN_GUARD} bytes away"), name


def test_the_originals_are_the_callers_tensors_or_the_landed_bytes():
    """What the check keeps as pristine values, so that it needs no clones: in the caller's process
    the caller's tensors themselves; in a worker the landed bytes, which the copies do not share."""
    tensors = views_of_one_buffer()
    here = GuardedTensors.copy_of(tensors)
    assert all(here.originals[name] is tensor for name, tensor in tensors.items())
    landed = pickle.loads(pickle.dumps(ship(tensors))).land()
    copies_memory = {t.untyped_storage().data_ptr() for t in landed.tensors.values()}
    for name, tensor in tensors.items():
        original = landed.originals[name]
        assert torch.equal(original, tensor) and original.stride() == tensor.stride(), name
        assert original.untyped_storage().data_ptr() not in copies_memory, name


def copied(tensors: dict[str, torch.Tensor], how: str, padding: bool = False) -> GuardedTensors:
    """``tensors`` copied in this process, or shipped (through pickle) and landed."""
    if how == "copied here":
        return GuardedTensors.copy_of(tensors, padding=padding)
    return pickle.loads(pickle.dumps(ship(tensors))).land(padding=padding)


def test_with_tensors_puts_copies_in_place_of_positional_and_keyword_arguments():
    x, y = torch.zeros(2), torch.ones(2)
    args, kwargs = with_tensors(("x", "n", "y"), (x, 2), {"y": y, "grid": (1,)}, {"x": "X", "y": "Y"})
    assert args == ("X", 2) and kwargs == {"y": "Y", "grid": (1,)}
