import json

import numpy as np
import pytest

import tunekit
from tunekit import Config, Space
from tunekit.config import config_to_dict
from tunekit.kernels import matmul


def test_size_enumeration_and_constraints():
    space = Space(BLOCK=[64, 128, 256], num_warps=[2, 4], constraints=[lambda c: c["BLOCK"] // c["num_warps"] >= 32])
    flats = [config_to_dict(c) for c in space]
    assert len(space) == 5 and len(flats) == 5
    assert all(f["BLOCK"] // f["num_warps"] >= 32 for f in flats)
    assert {"BLOCK": 64, "num_warps": 4} not in [{k: f[k] for k in ("BLOCK", "num_warps")} for f in flats]
    assert space.configs()[0].num_warps == 2 and space.configs()[0].kwargs == {"BLOCK": 64}


def test_design_gemm_space_has_the_size_design_md_states():
    # design.md: 1,152 configs, of which the shared-memory constraint removes 168 (138 failing + 30 running)
    space = matmul.space()
    assert space.cartesian_size == 1152
    assert len(space) == 1152 - 168


def test_compile_options_become_config_fields():
    config = Space(BLOCK=[64], num_warps=[8], num_stages=[2], num_ctas=[1], maxnreg=[128]).configs()[0]
    assert (config.num_warps, config.num_stages, config.num_ctas, config.maxnreg) == (8, 2, 1, 128)
    assert config.kwargs == {"BLOCK": 64}


def test_from_configs_keeps_order_and_pre_hooks():
    hook = lambda nargs: None  # noqa: E731
    configs = [Config({"BLOCK": 128}, num_warps=4, pre_hook=hook), Config({"BLOCK": 64}, num_warps=2)]
    space = Space.from_configs(configs)
    assert space.configs() == configs
    assert space.canonical({"BLOCK": 128, "num_warps": 4}).pre_hook is hook
    assert space.domains["BLOCK"] == (128, 64)


def test_canonical_positions_send_every_copy_of_a_repeated_config_to_one_position():
    """A list with its first two configs repeated at its end: each copy maps to the position
    ``index`` gives (the last), every other config to itself; without repeats, the identity."""
    configs = [Config({"BLOCK": block}, num_warps=4) for block in (16, 32, 64, 128)]
    repeated = Space.from_configs(configs + configs[:2])
    assert repeated.canonical_positions().tolist() == [4, 5, 2, 3, 4, 5]
    assert [repeated.index(c) for c in configs[:2]] == [4, 5]
    assert Space.from_configs(configs).canonical_positions().tolist() == [0, 1, 2, 3]


def test_config_json_is_the_stores_canonical_text():
    """The store keys trials by this text: sorted keys, JSON's own spelling of booleans, None, NaN
    and non-ASCII, and ``str`` of what JSON cannot hold (a dtype), as ``json.dumps(sort_keys=True,
    default=str)`` writes them."""
    import torch

    from tunekit.config import config_json

    config = Config({"BLOCK": 64, "DTYPE": torch.float16, "EVEN": True, "SCALE": 0.5, "NAME": "\u00e9"},
                    num_warps=4, num_stages=2)
    assert config_json(config) == ('{"BLOCK": 64, "DTYPE": "torch.float16", "EVEN": true, "NAME": "\\u00e9", '
                                   '"SCALE": 0.5, "num_ctas": 1, "num_stages": 2, "num_warps": 4}')
    assert config_json({"b": None, "a": float("nan")}) == '{"a": NaN, "b": null}'


def test_sampling_is_without_replacement_and_reproducible():
    space = Space(A=list(range(10)), B=[1, 2, 3])
    first = space.sample(30, np.random.default_rng(7))
    again = space.sample(30, np.random.default_rng(7))
    assert [config_to_dict(c) for c in first] == [config_to_dict(c) for c in again]
    assert len({tunekit.config.config_json(c) for c in first}) == 30
    excluded = {tunekit.config.config_json(c) for c in first[:29]}
    assert space.sample(5, np.random.default_rng(0), exclude=excluded) == [first[29]]


def test_neighbours_change_one_parameter():
    space = Space(A=[1, 2, 4, 8], B=[0, 1], constraints=[lambda c: not (c["A"] == 8 and c["B"] == 1)])
    adjacent = [config_to_dict(c) for c in space.neighbours({"A": 4, "B": 1})]
    assert {"A": 2, "B": 1} in [{k: n[k] for k in "AB"} for n in adjacent]
    assert all(n["A"] != 8 or n["B"] != 1 for n in adjacent)  # constraint respected
    assert len(adjacent) == 2  # A=2 and B=0; A=8,B=1 is invalid
    assert len(space.neighbours({"A": 1, "B": 0}, method="hamming")) == 4


def test_a_step_moves_to_the_next_value_by_size_in_whatever_order_the_configs_came():
    """A config list in any order (``num_warps`` 2, 1, 4, 8 from the first configs' values) gives
    the same neighbours as its values in order: a step from 1 warp goes to 2, not to 4."""
    listed = [Config({"BLOCK": block}, num_warps=warps, num_stages=stages, maxnreg=maxnreg)
              for warps in (2, 1, 4, 8) for block in (256, 64, 128) for stages in (3, 2)
              for maxnreg in (128, None)]
    space = Space.from_configs(listed)
    assert space.domains["num_warps"] == (2, 1, 4, 8)  # the order given is kept
    assert space.ordered_domains["num_warps"] == (1, 2, 4, 8)
    assert Space(maxnreg=[256, None, 128]).ordered_domains["maxnreg"] == (None, 128, 256)  # None where encode puts it
    ordered = Space.from_configs(sorted(listed, key=lambda c: (c.num_warps, c.kwargs["BLOCK"], c.num_stages,
                                                               c.maxnreg or 0)))

    def around(in_space, params):
        return sorted(json.dumps(config_to_dict(c), sort_keys=True, default=str)
                      for c in in_space.neighbours(Config(params, num_warps=1, num_stages=3)))

    assert around(space, {"BLOCK": 64}) == around(ordered, {"BLOCK": 64})
    assert {config_to_dict(c)["num_warps"] for c in space.neighbours(Config({"BLOCK": 64}, num_warps=1))} == {1, 2}
    assert Space(mode=["b", "a", "c"]).ordered_domains["mode"] == ("b", "a", "c")  # not numbers: as given


def test_value_positions_are_list_index_in_either_order_of_the_domains():
    """Each config's values as their positions in ``ordered_domains`` (or ``domains`` as given):
    what ``list.index`` finds, with -1 where a config lacks a parameter (a compile option) whose
    domain has no None, and None's position where it has."""
    listed = [Config({"BLOCK": block, "mode": mode}, num_warps=warps, maxnreg=maxnreg)
              for warps in (2, 1, 4) for block in (256, 64) for mode in ("b", "a") for maxnreg in (128, None)]
    space = Space.from_configs(listed)
    flat = [config_to_dict(c) for c in space.configs()]
    for ordered, domains in ((True, space.ordered_domains), (False, space.domains)):
        expected = [[list(d).index(f[n]) if f.get(n) in d else -1 for n, d in domains.items()] for f in flat]
        assert space.value_positions(ordered).tolist() == expected
    assert space.value_positions(True).tolist() != space.value_positions(False).tolist()  # 2, 1, 4 warps
    assert not space.value_positions().flags.writeable
    lacking = Space.from_configs([Config({"BLOCK": 64}, maxnreg=128), Config({"BLOCK": 64, "GROUP": 8})])
    names = list(lacking.domains)
    # the first config has no GROUP, the second no maxnreg (None, in no domain here)
    assert lacking.value_positions()[:, [names.index("GROUP"), names.index("maxnreg")]].tolist() == [[-1, 0],
                                                                                                      [0, -1]]
    # a domain that lists None: a config without the value (config_to_dict leaves it out) is at
    # None's position
    listed = Space(BLOCK=[16, 32], maxnreg=[128, None])
    assert listed.ordered_domains["maxnreg"] == (None, 128)
    assert [(config_to_dict(c)["BLOCK"], config_to_dict(c).get("maxnreg")) for c in listed.configs()] == [
        (16, 128), (16, None), (32, 128), (32, None)]
    assert listed.value_positions().tolist() == [[0, 1], [0, 0], [1, 1], [1, 0]]
    assert listed.value_positions(ordered=False).tolist() == [[0, 0], [0, 1], [1, 0], [1, 1]]
    assert listed.value_positions() is listed.value_positions()  # made once


def test_encoding_uses_log2_for_powers_of_two():
    space = Space(BLOCK=[16, 32, 64], GROUP=[1, 3], layout=["row", "col"])
    row = space.encode({"BLOCK": 64, "GROUP": 3, "layout": "col"})
    assert row.tolist() == [6.0, 3.0, 1.0]
    assert space.feature_names == ["log2_BLOCK", "GROUP", "layout"]
    assert space.encode(space.configs()).shape == (len(space), 3)


def test_the_whole_spaces_encoding_is_made_once_and_cannot_be_changed():
    """Searches share ``Space.encoded()``: one that wrote into it would change every later search's."""
    space = Space(BLOCK=[16, 32, 64], GROUP=[1, 3], layout=["row", "col"],
                  constraints=[lambda c: c["BLOCK"] > 16 or c["GROUP"] == 1])
    encoded = space.encoded()
    assert encoded is space.encoded()
    assert np.array_equal(encoded, space.encode(space.configs())) and len(encoded) == len(space) == 10
    with pytest.raises(ValueError, match="read-only"):
        encoded[0, 0] = 99.0


def test_the_whole_spaces_encoding_is_each_configs_own():
    """``encoded()`` looks each config's row up from its domains' encoded values: it must be what
    ``encode`` makes of the config itself, on domains of powers of two listed out of order, other
    numbers, categories, a domain listing None, and configs that lack a parameter."""
    listed = [Config({"BLOCK": block, "mode": mode, "SPLIT": split}, num_warps=warps, maxnreg=maxnreg)
              for warps in (2, 1, 4) for block in (256, 48, 64) for mode in ("b", "a")
              for split in (3, 1.5) for maxnreg in (128, None)]
    listed.append(Config({"BLOCK": 64}, num_warps=8))  # no mode, no SPLIT
    spaces = [Space.from_configs(listed), Space(BLOCK=[64, 16, 32], GROUP=[3, 1], layout=["row", "col"],
                                                maxnreg=[None, 255])]
    for space in spaces:
        assert np.array_equal(space.encoded(), space.encode(space.configs()))
        assert (space.encoded() == -1.0).any()  # a missing value or None was encoded, as -1
    assert spaces[0].encoded()[-1].tolist() == spaces[0].encode(listed[-1]).tolist()


def test_errors_name_the_problem():
    with pytest.raises(ValueError, match="domain of parameter 'BLOCK' is empty"):
        Space(BLOCK=[])
    with pytest.raises(ValueError, match="reject every one of its 2 configs"):
        len(Space(BLOCK=[1, 2], constraints=[lambda c: False]))
    with pytest.raises(ValueError, match="Constraint .* raised KeyError"):
        len(Space(BLOCK=[1, 2], constraints=[lambda c: c["NOPE"] > 0]))
    with pytest.raises(ValueError, match="does not take as an argument"):
        Space(BLOCK=[1], OTHER=[2]).check_kernel(["x_ptr", "BLOCK"], "k")
    with pytest.raises(ValueError, match="at least one parameter"):
        Space()


def test_a_domain_holding_a_list_is_refused_in_one_line():
    with pytest.raises(ValueError, match=r"^The domain of parameter 'BLOCK' must be a list of single values "
                                         r"\(numbers, strings, booleans or None\)\. "
                                         r"Got \[\[128\], 256\] instead\.$"):
        Space(BLOCK=[[128], 256])


@pytest.mark.parametrize("constraints", [lambda c: True, "BLOCK > 64", 3])
def test_constraints_other_than_a_list_are_refused_in_one_line(constraints):
    expected = r"^constraints must be a list of callables on a config dict\. Got .* instead\.$"
    with pytest.raises(ValueError, match=expected):
        Space(BLOCK=[128, 256], constraints=constraints)


def test_numpy_values_are_numbers_of_the_space():
    """A domain written with numpy (``np.arange``, an array) is one of Python numbers: encoded by
    value and log2, stepped by size and passed to the kernel as ints, as the same list written
    out is (numpy integers were encoded by their position in the domain)."""
    written_out = tunekit.Space(BLOCK=[48, 16, 32, 64], num_warps=[8, 4])
    with_numpy = tunekit.Space(BLOCK=np.array([48, 16, 32, 64]), num_warps=[np.int64(8), np.int64(4)])
    assert with_numpy.domains == written_out.domains
    assert with_numpy.ordered_domains == written_out.ordered_domains
    assert np.array_equal(with_numpy.encoded(), written_out.encoded())
    assert all(type(value) is int for config in with_numpy.configs() for value in config.all_kwargs().values())
