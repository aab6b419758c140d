"""``tunekit.patch_triton()``: a library's own subclasses of Triton's ``Autotuner``, defined while
the block runs (as its import defines them), tune with tunekit; a config such a subclass puts in
``self.cache`` is launched as stock's ``run`` launches it; Triton's names are restored after."""

from __future__ import annotations

import pytest
import torch
import triton
import triton.runtime
import triton.runtime.autotuner

import tunekit
from tunekit.kernels import vector_add
from tunekit.store import ResultsStore

N = 1000
CONFIGS = [triton.Config({"BLOCK": 128}, num_warps=1), triton.Config({"BLOCK": 256}, num_warps=2)]
PINNED = triton.Config({"BLOCK": 512}, num_warps=4)


def triton_names() -> list:
    return [triton.autotune, triton.runtime.autotune, triton.runtime.Autotuner, triton.runtime.autotuner.autotune,
            triton.runtime.autotuner.Autotuner]


def library_module(store_path):
    """What a library's module does at import: subclass ``Autotuner`` as it finds it in Triton
    (flash-linear-attention's ``CachedAutotuner`` puts a config from its files in ``self.cache``
    before calling the base ``run``), and decorate kernels with it and with ``triton.autotune``."""
    from triton.runtime.autotuner import Autotuner

    class CachedAutotuner(Autotuner):
        pinned: dict = {}

        def run(self, *args, **kwargs):
            key = (args[3], *[str(a.dtype) for a in args if hasattr(a, "dtype")])  # Triton's key for key=["n"]
            if key in self.pinned:
                self.cache[key] = self.pinned[key]
            return super().run(*args, **kwargs)

    def cached_autotune(configs, key):
        return lambda fn: CachedAutotuner(fn, fn.arg_names, configs, key, None, None,
                                          store=str(store_path.with_name("cached.db")))

    plain = triton.autotune(CONFIGS, key=["n"], store=str(store_path))(triton.jit(vector_add.add_kernel.fn))
    cached = cached_autotune(CONFIGS, key=["n"])(triton.jit(vector_add.add_kernel.fn))
    return CachedAutotuner, plain, cached


def launch(kernel, n: int = N) -> bool:
    x, y, out = torch.randn(n), torch.randn(n), torch.empty(n)
    kernel[lambda meta: (triton.cdiv(n, meta["BLOCK"]),)](x, y, out, n)
    return torch.equal(out, x + y)


def test_a_subclass_defined_in_the_block_tunes_with_tunekit_and_names_are_restored(store_path):
    before = triton_names()
    with tunekit.patch_triton():
        assert triton_names() == [tunekit.autotune, tunekit.autotune, tunekit.Autotuner, tunekit.autotune,
                                  tunekit.Autotuner]
        subclass, plain, cached = library_module(store_path)
    assert triton_names() == before
    assert issubclass(subclass, tunekit.Autotuner) and isinstance(plain, tunekit.Autotuner)
    assert launch(plain) and launch(cached)
    assert len(cached.trials) == len(CONFIGS) and {t.config for t in cached.trials} == set(CONFIGS)
    assert len(plain.trials) == len(CONFIGS)


def test_a_config_the_subclass_puts_in_its_cache_is_launched_untuned(store_path):
    """As stock's ``run``: a config in ``self.cache`` under the call's key is launched without
    tuning and nothing is measured or stored; another key still tunes."""
    with tunekit.patch_triton():
        subclass, _, cached = library_module(store_path)
    subclass.pinned = {(N, *["torch.float32"] * 3): PINNED}
    assert launch(cached)
    assert cached.best_config is PINNED and cached.trials == []
    with ResultsStore(str(store_path.with_name("cached.db"))) as store:
        assert store.winner_rows() == []
    assert launch(cached, 2 * N)
    assert cached.best_config in CONFIGS and len(cached.trials) == len(CONFIGS)


def test_names_are_restored_when_the_block_raises():
    before = triton_names()
    with pytest.raises(ImportError), tunekit.patch_triton():
        raise ImportError("the library failed to import")
    assert triton_names() == before


def test_code_importing_triton_s_class_after_the_block_recognises_stock_autotuners():
    """Code that imports Triton's ``Autotuner`` when it checks a kernel (PyTorch's Dynamo does)
    must find Triton's class after the block, of which a stock autotuner is an instance (it is
    not one of tunekit's, which the import would give if the block had not restored it)."""
    stock = triton.autotune(CONFIGS, key=["n"])(triton.jit(vector_add.add_kernel.fn))
    with tunekit.patch_triton():
        pass
    from triton.runtime.autotuner import Autotuner
    assert isinstance(stock, Autotuner)


def test_a_name_the_block_sets_itself_stays_and_nested_blocks_restore_in_turn():
    """A library that sets ``triton.autotune`` to its own decorator in the block (fla's
    ``configure_fla_cache_autotune`` does) keeps it; the other names are Triton's again. An
    inner block leaves the outer one's names as they were when it ended."""
    before = triton_names()

    def own_autotune(*args, **kwargs):
        raise AssertionError("not called")

    with tunekit.patch_triton():
        with tunekit.patch_triton():
            pass
        assert triton_names() == [tunekit.autotune, tunekit.autotune, tunekit.Autotuner, tunekit.autotune,
                                  tunekit.Autotuner]
        triton.autotune = own_autotune
    try:
        assert triton.autotune is own_autotune and triton_names()[1:] == before[1:]
    finally:
        triton.autotune = before[0]


def test_subclasses_defined_before_the_block_are_named_in_a_warning(caplog):
    """A library imported before the block keeps Triton's base class: the block says which."""
    from triton.runtime.autotuner import Autotuner

    class EarlyAutotuner(Autotuner):
        pass

    with caplog.at_level("WARNING", logger="tunekit"), tunekit.patch_triton():
        pass
    assert "EarlyAutotuner" in caplog.text and "defined before the block" in caplog.text


def test_a_subclass_with_its_own_run_keeps_the_attributes_it_sets():
    """Injected: a subclass shaped as FlagGems' ``LibTuner``: it passes Triton's arguments by
    position, reads the config list in its ``__init__`` (``LibTuner`` hashes it) and at every call,
    sets ``self.strategy``, ``self.keys`` and ``self.cache`` (names tunekit's class also has,
    ``strategy`` a read-only property) and replaces ``run`` with its own loop over
    ``prune_configs`` and Triton's ``_bench``. Survives: built in the block on tunekit's class, it
    keeps its own values (before, its ``__init__`` raised there on the property without a setter),
    sees the whole config list, times both configs with its ``do_bench`` (passed here to the base
    so that the test times without a GPU; ``LibTuner`` leaves Triton's), caches the faster and
    launches it correctly. The names it did not set still read tunekit's options, and on
    tunekit's own class they stay read-only."""
    timed = iter([2.0, 1.0])  # the second config timed faster

    def do_bench(kernel_call, quantiles=None):
        kernel_call()
        t = next(timed)
        return [t, t, t]

    with tunekit.patch_triton():
        class LibTunerLike(triton.runtime.Autotuner):
            def __init__(self, fn, arg_names, configs, key, reset_to_zero, restore_value, pre_hook=None,
                         post_hook=None, prune_configs_by=None, warmup=None, rep=None, use_cuda_graph=False,
                         do_bench=None, strategy=None):
                super().__init__(fn, arg_names, configs, key, reset_to_zero, restore_value, pre_hook, post_hook,
                                 prune_configs_by, warmup, rep, use_cuda_graph, do_bench)
                self.configs_hash = ",".join(map(str, self.configs))
                self.keys = key
                self.strategy = [strategy] * len(key)
                self.cache = {}

            def run(self, *args, **kwargs):
                self.nargs = dict(zip(self.arg_names, args))
                key = tuple(self.nargs[k] for k in self.keys)
                if len(self.configs) > 1 and key not in self.cache:
                    timings = {config: self._bench(*args, config=config, **kwargs)[0]
                               for config in self.prune_configs(kwargs)}
                    self.cache[key] = min(timings, key=timings.get)
                return self.fn.run(*args, **kwargs, **self.cache[key].all_kwargs())

    kernel = triton.jit(vector_add.add_kernel.fn)
    tuned = LibTunerLike(kernel, kernel.arg_names, CONFIGS, ["n"], None, None, do_bench=do_bench, strategy="log")
    assert isinstance(tuned, tunekit.Autotuner) and tuned.strategy == ["log"]
    assert tuned.configs_hash == ",".join(map(str, CONFIGS))
    assert launch(tuned)
    assert tuned.cache == {(N,): CONFIGS[1]}
    assert tuned.budget is tuned.options.budget
    plain = tunekit.autotune(CONFIGS, key=["n"])(triton.jit(vector_add.add_kernel.fn))
    assert plain.strategy is plain.options.strategy
    with pytest.raises(AttributeError, match="strategy"):
        plain.strategy = "random"
