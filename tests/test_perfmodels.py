"""The perf models: fit/predict on trials, failures learned, shapes transferred, Triton's
``prune_configs_by`` callable, and the store as the training source."""

from __future__ import annotations

import math
import pickle

import numpy as np
import pytest
import torch
from scipy.stats import spearmanr
from sklearn.linear_model import Ridge

import tunekit
from tunekit.config import config_from_dict
from tunekit.keys import TuningKey
from tunekit.kernels import shipped
from tunekit.perfmodels import PerfModel, RandomForest, trials_from_rows
from tunekit.perfmodels.base import alignment_columns, alignment_features
from tunekit.testing.strategies import toy_space, toy_time, toy_trial
from tunekit.trial import Status, Timing, Trial


def key(m: int) -> dict:
    return {"args": {"M": m}, "dtypes": ["torch.float16"]}


def shaped_trial(config, m: int) -> Trial:
    """toy_time, scaled by the shape: a model that ignores the key cannot fit it."""
    t = toy_time(config) * m / 64
    return Trial(config, Status.OK, Timing(t, t, t), key=TuningKey.from_dict(key(m)))


def test_forest_ranks_unseen_configs_of_a_smooth_space():
    configs = toy_space().configs()
    rng = np.random.default_rng(0)
    train = [configs[i] for i in rng.permutation(len(configs))[:30]]
    held_out = [c for c in configs if c not in train and toy_trial(c).ok]
    model = RandomForest(toy_space()).fit([toy_trial(c) for c in train], key(64))
    rho = spearmanr(model.predict_log(held_out, key(64)), [toy_time(c) for c in held_out]).statistic
    assert rho > 0.7


def test_failures_teach_the_model_which_configs_fail():
    configs = toy_space().configs()
    model = RandomForest(toy_space()).fit([toy_trial(c) for c in configs[::2]], key(64))
    predicted = model.predict(configs[1::2], key(64))
    for config, time_ms in zip(configs[1::2], predicted):
        assert math.isinf(time_ms) == (not toy_trial(config).ok), config


def test_shape_features_carry_a_trend_across_keys():
    """Trained on M = 16, 64, 256, the model predicts M = 1024 slower than M = 16 for the same config."""
    configs = toy_space().configs()
    trials = [shaped_trial(c, m) for m in (16, 64, 256) for c in configs if toy_trial(c).ok]
    model = RandomForest(toy_space()).fit(trials)
    config = configs[0]
    assert model.predict([config], key(256))[0] > 3 * model.predict([config], key(16))[0]


def test_any_scikit_learn_regressor_can_be_wrapped_and_is_not_fit_in_place():
    ridge = Ridge()
    model = PerfModel(toy_space(), regressor=ridge)
    model.fit([toy_trial(c) for c in toy_space().configs() if toy_trial(c).ok], key(64))
    assert not hasattr(ridge, "coef_") and hasattr(model.regressor_, "coef_")
    with pytest.raises(ValueError, match="at least one successful trial"):
        PerfModel(toy_space()).fit([toy_trial(c) for c in toy_space().configs() if not toy_trial(c).ok])


def test_held_out_shape_of_a_shipped_h200_space_is_ranked():
    """Fit on attention at 16k tokens, predict the causal 4k shape it never saw."""
    long, prefill = shipped.load("attention", "long_16k"), shipped.load("attention", "prefill_4k")
    model = RandomForest(prefill.space()).fit(long.trials())
    ok = [r for r in prefill.records if r.ok]
    predicted = model.predict_log([prefill.config(r) for r in ok], prefill.key())
    assert spearmanr(predicted, [r.time_ms for r in ok]).statistic > 0.8


def test_as_perf_model_prunes_a_real_kernel_with_stock_triton(tmp_path):
    """The callable takes Triton's perf_model(**named_args, **kwargs, **config.all_kwargs()) call,
    trained from the store, and stock ``triton.autotune`` benchmarks only its top_k."""
    import triton

    from tunekit.kernels import vector_add

    store_path = tmp_path / "store.db"
    tuned = tunekit.autotune(space=vector_add.space(), key=["n"], store=store_path, strategy="exhaustive",
                             do_bench=lambda fn, **_: (fn(), 1.0)[1])(vector_add.add_kernel)
    x, y, out = vector_add.inputs(4096)
    vector_add.launch(tuned, x, y, out)  # every config into the store (times from a fake do_bench)
    store = tunekit.ResultsStore(store_path)
    model = RandomForest.from_store(store, "add_kernel", vector_add.space())
    assert model.n_trials_ == len(vector_add.space())
    timed = []

    def do_bench(fn, quantiles=None, **_):
        timed.append(fn)
        fn()
        return [1.0, 1.0, 1.0] if quantiles else 1.0

    stock = triton.autotune(vector_add.space().configs(), key=["n"], do_bench=do_bench,
                            prune_configs_by={"perf_model": model.as_perf_model(["n"]), "top_k": 3})(
        triton.jit(vector_add.add_kernel.fn))
    out.zero_()
    vector_add.launch(stock, x, y, out)
    torch.testing.assert_close(out, x + y)
    assert len(timed) == 3


def test_trials_from_rows_skip_retimed_rows_and_keep_keys():
    rows = [{"source": "measured", "status": "ok", "median_ms": 1.0, "p20_ms": 0.9, "p80_ms": 1.1,
             "config": '{"BLOCK_M": 16, "BLOCK_N": 16, "num_warps": 1}', "key": '{"args": {"M": 1}}'},
            {"source": "retimed", "status": "ok", "median_ms": 2.0, "config": '{"BLOCK_M": 16}', "key": "{}"}]
    (trial,) = trials_from_rows(rows)
    assert trial.ok and trial.key == TuningKey(("M",), (1,), ())
    assert trial.config.kwargs == config_from_dict({"BLOCK_M": 16, "BLOCK_N": 16, "num_warps": 1}).kwargs


def test_keys_of_other_shapes_are_aligned_by_name_and_never_crash():
    """History on keys with other argument names and fewer dtypes (an optional pointer passed as
    None, a ``key=`` changed since): the model fits on all of it and predicts at any key; a key
    field it never saw is not a feature, one it saw and the key lacks is filled in."""
    configs = [c for c in toy_space().configs() if toy_trial(c).ok]
    mixed = {"args": {"N": 256}, "dtypes": ["torch.float16"]}
    trials = [shaped_trial(c, m) for m in (16, 64) for c in configs]
    trials += [Trial(c, Status.OK, Timing(2.0, 2.0, 2.0), key=TuningKey.from_dict(mixed)) for c in configs]
    trials += [Trial(c, Status.OK, Timing(3.0, 3.0, 3.0), key=TuningKey.from_dict({"args": {"M": 64}, "dtypes": []}))
               for c in configs]
    model = RandomForest(toy_space()).fit(trials, key(16))
    assert model.key_feature_names_ == ("M", "N", "dtype 0")
    for other in (key(16), mixed, {"args": {}, "dtypes": []}, {"args": {"K": 8}, "dtypes": ["a", "b"]}, None):
        assert np.isfinite(model.predict(configs[:3], other)).all()
    assert model.predict(configs[:1], key(64))[0] > model.predict(configs[:1], key(16))[0]  # the trend is kept
    np.testing.assert_array_equal(model.features(configs[:1], {"args": {"M": 16, "K": 8}, "dtypes": []})[0, -3:],
                                  [4.0, -1.0, -1.0])


def test_a_prior_must_be_fitted_and_of_the_same_space():
    """``fit(prior=...)`` takes a fitted model of the same Space; anything else is refused with a
    message that says which."""
    from tunekit.perfmodels import RandomForest
    from tunekit.testing.strategies import toy_space, toy_trial

    space = toy_space()
    trials = [toy_trial(c) for c in space.configs()[:12]]
    with pytest.raises(ValueError, match="needs a fitted model"):
        RandomForest(space).fit(trials, prior=RandomForest(space))
    other = tunekit.Space(BLOCK_M=[16, 32], BLOCK_N=[16], num_warps=[1])
    with pytest.raises(ValueError, match="the prior was fit on another Space"):
        RandomForest(space).fit(trials, prior=RandomForest(other).fit([toy_trial(c) for c in other.configs()]))
    with_prior = RandomForest(space).fit(trials, prior=RandomForest(space).fit(trials))
    assert with_prior.predict(space.configs()[:3], None).shape == (3,)


def test_per_tree_predictions_match_each_trees_own_checked_predict():
    """``per_tree_log`` skips scikit-learn's per-tree input checks (it validates once); its
    predictions must equal each tree's checked ``predict``, also from float64 non-contiguous rows,
    at other keys and with a key argument missing, their mean the forest's own prediction, and an
    infinite feature is refused as the forest refuses it."""
    configs = toy_space().configs()
    model = RandomForest(toy_space(), n_estimators=8, max_features=0.5).fit([toy_trial(c) for c in configs[::3]],
                                                                             key(64))
    other_arguments = {"args": {"N": 3}, "dtypes": ["torch.float16"]}  # M missing: its feature is MISSING
    features = np.asfortranarray(np.vstack([model.features(configs, key(64)), model.features(configs, key(5)),
                                            model.features(configs[:4], other_arguments)]))
    per_tree = model.per_tree_log(features)
    checked = np.stack([tree.predict(features) for tree in model.regressor_.estimators_])
    assert per_tree.shape == (8, len(features))
    np.testing.assert_array_equal(per_tree, checked)
    np.testing.assert_allclose(per_tree.mean(axis=0), model.regressor_.predict(features), rtol=1e-12)
    features[0, 0] = np.inf  # the forest's own checks refuse it; so must the unchecked path
    with pytest.raises(ValueError, match="infinite"):
        model.per_tree_log(features)


def test_a_refreshed_forest_replaces_its_oldest_trees_and_refits_failures_in_full():
    configs = toy_space().configs()
    first = [toy_trial(c) for c in configs[::4]]
    assert any(not t.ok for t in first)
    model = RandomForest(toy_space(), n_estimators=16, random_state=1).fit(first, key(64))
    more = first + [toy_trial(c) for c in configs[1::4]]
    refreshed = model.refreshed(more, key(64), trees=4, random_state=2)
    old, new = model.regressor_.estimators_, refreshed.regressor_.estimators_
    assert len(new) == 16 and new[:12] == old[4:]  # the 12 newest kept, the 4 oldest replaced
    assert all(tree not in old for tree in new[12:])
    assert refreshed.n_estimators == 16 and len(refreshed.classifier_.estimators_) == 8  # as a full fit's
    unseen = configs[2::4]
    predicted = refreshed.predict(unseen, key(64))
    wrong = sum(math.isinf(t) != (not toy_trial(c).ok) for t, c in zip(predicted, unseen))
    assert wrong <= len(unseen) // 10


def test_a_forest_refreshed_on_a_key_of_other_arguments_is_refit_in_full():
    configs = toy_space().configs()
    model = RandomForest(toy_space(), n_estimators=8, random_state=1).fit([shaped_trial(c, 64) for c in configs[:20]])
    other = [Trial(c, Status.OK, Timing(1.0, 1.0, 1.0), key=TuningKey.from_dict({"args": {"N": 8}, "dtypes": []}))
             for c in configs[:20]]
    refreshed = model.refreshed(other, trees=2, random_state=2)
    assert not set(map(id, refreshed.regressor_.estimators_)) & set(map(id, model.regressor_.estimators_))
    assert len(refreshed.regressor_.estimators_) == 8


def test_forests_make_the_same_trees_as_scikit_learns_own():
    """The forests make their trees without ``clone`` and without a new ``RandomState`` at each
    use of a tree's seed (for speed): their predictions, every tree's seed, and the failure
    forest's probabilities equal scikit-learn's forests' with the same parameters, and the
    shortcut is in use (a scikit-learn that stopped calling it would make the forests slower, not
    different). A tree's random state draws as a new ``RandomState`` of its seed at every draw,
    after a pickle's round trip too. Fitted with sample weights (whose bootstrap draws with
    ``choice`` too), the forests' trees and predictions are scikit-learn's, twice in a row."""
    from sklearn.ensemble import RandomForestClassifier, RandomForestRegressor

    from tunekit.perfmodels import forest

    rng = np.random.default_rng(0)
    x, y = rng.random((60, 5)), rng.random(60)
    failed = (x[:, 0] > 0.7).astype(int)
    model = RandomForest(toy_space(), n_estimators=12, max_features=0.5, random_state=3)
    for ours, theirs, target in ((model._default_regressor(), RandomForestRegressor, y),
                                 (model._default_classifier(), RandomForestClassifier, failed)):
        plain = theirs(**ours.get_params()).fit(x, target)
        calls = []
        made = ours._make_estimator
        ours._make_estimator = lambda *args, **kwargs: calls.append(1) or made(*args, **kwargs)
        ours.fit(x, target)
        assert len(calls) == ours.n_estimators
        assert [t.random_state.seed_value for t in ours.estimators_] == [t.random_state for t in plain.estimators_]
        assert ([{**t.get_params(), "random_state": None} for t in ours.estimators_]
                == [{**t.get_params(), "random_state": None} for t in plain.estimators_])
        if theirs is RandomForestRegressor:
            assert np.array_equal(ours.predict(x[:20] + 0.01), plain.predict(x[:20] + 0.01))
        else:
            assert np.array_equal(ours.predict_proba(x[:20] + 0.01), plain.predict_proba(x[:20] + 0.01))
    assert isinstance(model._default_regressor(), forest._TreesMadeDirectly)
    state = pickle.loads(pickle.dumps(ours.estimators_[0].random_state))
    fresh = np.random.RandomState(state.seed_value).randint(0, 1000, 5)
    assert [state.randint(0, 1000, 5).tolist() for _ in range(2)] == [fresh.tolist()] * 2
    weights = rng.random(60) + 0.5
    for ours, theirs in ((model._default_regressor(), RandomForestRegressor),
                         (model._default_classifier(), RandomForestClassifier)):
        plain = theirs(**ours.get_params()).fit(x, failed, sample_weight=weights)
        for _ in range(2):
            ours.fit(x, failed, sample_weight=weights)
            assert [t.random_state for t in ours.estimators_] == [t.random_state for t in plain.estimators_]
            assert np.array_equal(ours.predict(x + 0.01), plain.predict(x + 0.01))


def test_alignment_describes_integer_sizes_that_are_not_all_powers_of_two():
    """Multiples of 16 and tiles of 1 to 4 get a column each; powers of two (log2 already says
    it), Triton's compile options (a pipeline depth has no alignment), domains holding 0 (a
    choice among variants), all-odd domains (one divisor), categories and booleans none. The
    feature is the exponent of the largest power of two dividing the value; -1 where the value
    is missing or not of the domain."""
    space = tunekit.Space(block_size_x=list(range(16, 257, 16)), tile=[1, 2, 3, 4], warps=[1, 2, 4, 8],
                          num_stages=[1, 2, 3, 4], maxnreg=[None, 96, 128], method=[0, 1, 2], odd=[3, 5, 7],
                          layout=["row", "col"], flag=[True, False], size=[None, 24, 2**61 + 1])
    assert alignment_columns(space) == [0, 1, 9]
    assert alignment_columns(space, compile_options=True) == [0, 1, 3, 4, 9]  # num_stages and maxnreg too
    common = {"warps": 8, "num_stages": 3, "maxnreg": None, "method": 0, "odd": 3, "layout": "row", "flag": True}
    rows = space.encode([{**common, "block_size_x": 48, "tile": 4, "size": None},
                         {**common, "block_size_x": 128, "tile": 3, "size": 2**61 + 1},
                         {**common, "block_size_x": 40, "tile": 2, "size": 24}])
    assert alignment_features(space, rows).tolist() == [[4.0, 2.0, -1.0], [7.0, 0.0, 0.0], [-1.0, 1.0, 3.0]]


def test_alignment_lets_a_forest_single_out_unseen_aligned_sizes():
    """Time halves at multiples of 64 among multiples of 16. Fit on every size but 192 and 448, a
    forest told the alignment predicts both near fast; one splitting on the size alone, whose
    neighbours (176, 208, 432, 464) are all slow, predicts them slow."""
    space = tunekit.Space(block_size_x=list(range(16, 513, 16)))
    def trial(size: int) -> Trial:
        t = 1.0 if size % 64 == 0 else 2.0
        return Trial(config_from_dict({"block_size_x": size}), Status.OK, Timing(t, t, t))
    train = [trial(size) for size in range(16, 513, 16) if size not in (192, 448)]
    unseen = [config_from_dict({"block_size_x": size}) for size in (192, 448)]
    aligned = RandomForest(space, alignment=True).fit(train, key(64))
    aligned = aligned.predict(unseen, key(64))
    plain = RandomForest(space).fit(train, key(64)).predict(unseen, key(64))
    assert all(t < 1.25 for t in aligned)  # bootstrap samples that lack an aligned size blur it a little
    assert all(t > 1.5 for t in plain)


def test_relative_to_fastest_divides_each_keys_times_by_its_own_fastest():
    """Times at two keys of a 100x different scale become slowdowns over each key's fastest
    successful trial (its 20/80 % quantiles too, a missing one staying missing); a failed trial,
    which is faster than nothing, is left as it is and sets no key's fastest. A trial without a
    key was measured at the key given, as ``fit`` takes it: one group with that key's trials."""
    from tunekit.perfmodels import relative_to_fastest

    small, large = (TuningKey(("M",), (m,), ()) for m in (2, 64))
    configs = [config_from_dict({"BLOCK": b}) for b in (16, 32, 64)]
    trials = [Trial(configs[0], Status.OK, Timing(2.0, 1.5, None), key=small),
              Trial(configs[1], Status.OK, Timing(3.0, 2.5, 3.5), key=small),
              Trial(configs[0], Status.OK, Timing(500.0, 400.0, 600.0), key=large),
              Trial(configs[1], Status.OK, Timing(200.0, 150.0, 250.0), key=large),
              Trial(configs[2], Status.OUT_OF_RESOURCES, error="injected", key=large)]
    relative = relative_to_fastest(trials)
    assert [t.timing for t in relative] == [Timing(1.0, 0.75, None), Timing(1.5, 2.5 / 2, 3.5 / 2),
                                            Timing(2.5, 2.0, 3.0), Timing(1.0, 0.75, 1.25), None]
    assert [(t.config, t.key, t.status) for t in relative] == [(t.config, t.key, t.status) for t in trials]
    keyless = Trial(configs[2], Status.OK, Timing(100.0, 100.0, 100.0))
    assert [t.time_ms for t in relative_to_fastest([*trials, keyless], key=large)] == \
        [1.0, 1.5, 5.0, 2.0, math.inf, 1.0]  # 100 ms at M=64 is its fastest now
