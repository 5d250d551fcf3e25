"""Data invariants of docs/definitions.md section 2 for both random-token modes."""

import numpy as np
import pytest

from coocflow.config import DataConfig, random_slots
from coocflow.errors import ConfigError
from coocflow.data import COMMON, FIRST_RANDOM, MU1, MU2, make_test_set, make_train_set

EXPECTED_SPECIAL = {0: {MU1, MU2, COMMON}, 1: {MU1, COMMON}, 2: {MU2, COMMON}, 3: {COMMON}}


@pytest.mark.parametrize("mode,d", [("uniform", 20), ("distinct", 200), ("uniform", 64)])
def test_train_set_invariants(mode, d):
    cfg = DataConfig(n=36, L=6, d=d, random_tokens=mode, n_test=10)
    data = make_train_set(cfg, seed=5)
    tokens, labels, groups = map(np.asarray, (data.tokens, data.labels, data.groups))
    assert tokens.shape == (36, 6)
    np.testing.assert_array_equal(np.bincount(groups, minlength=4), [18, 6, 6, 6])
    np.testing.assert_array_equal(labels, np.where(groups == 0, 1.0, -1.0))
    for row, group in zip(tokens, groups):
        special = [t for t in row if t < FIRST_RANDOM]
        assert len(special) == len(set(special)), "each of mu_1, mu_2, mu_3 appears at most once"
        assert set(special) == EXPECTED_SPECIAL[int(group)]
    random = tokens[tokens >= FIRST_RANDOM]
    assert random.size == random_slots(36, 6)
    assert random.min() >= FIRST_RANDOM and random.max() < d
    if mode == "distinct":
        assert len(np.unique(random)) == random.size, "distinct mode: every random token differs"


def test_uniform_mode_repeats_tokens_when_vocabulary_is_small():
    data = make_train_set(DataConfig(n=60, L=5, d=64, random_tokens="uniform"), seed=0)
    random = np.asarray(data.tokens)[np.asarray(data.tokens) >= FIRST_RANDOM]
    assert len(np.unique(random)) < random.size


def test_positions_are_random():
    data = make_train_set(DataConfig(n=600, L=5, d=64), seed=1)
    positions = np.argmax(np.asarray(data.tokens) == COMMON, axis=1)
    counts = np.bincount(positions, minlength=5)
    assert counts.min() > 80, counts


def test_test_set_is_iid_with_group_probabilities():
    cfg = DataConfig(n=60, L=5, d=64, n_test=6000)
    test = make_test_set(cfg, seed=2)
    fractions = np.bincount(np.asarray(test.groups), minlength=4) / 6000
    np.testing.assert_allclose(fractions, [1 / 2, 1 / 6, 1 / 6, 1 / 6], atol=0.02)
    for row, group in zip(np.asarray(test.tokens)[:200], np.asarray(test.groups)[:200]):
        assert {t for t in row if t < FIRST_RANDOM} == EXPECTED_SPECIAL[int(group)]


def test_distinct_mode_test_tokens_mostly_unseen():
    cfg = DataConfig(n=12, L=4, d=400, random_tokens="distinct", n_test=100)
    seen = set(np.asarray(make_train_set(cfg, 0).tokens).ravel())
    test_random = np.asarray(make_test_set(cfg, 0).tokens)
    test_random = test_random[test_random >= FIRST_RANDOM]
    assert np.mean([t not in seen for t in test_random]) > 0.8


def test_same_seed_same_data_different_seed_different_data():
    cfg = DataConfig()
    a, b, c = make_train_set(cfg, 7), make_train_set(cfg, 7), make_train_set(cfg, 8)
    np.testing.assert_array_equal(a.tokens, b.tokens)
    assert not np.array_equal(a.tokens, c.tokens)
    np.testing.assert_array_equal(make_test_set(cfg, 7).tokens, make_test_set(cfg, 7).tokens)


@pytest.mark.parametrize("mode", ["seen", "unseen"])
def test_test_tokens_seen_or_unseen_in_training(mode):
    cfg = DataConfig(n=12, L=4, d=40, random_tokens="distinct", n_test=50, test_tokens=mode)
    train = make_train_set(cfg, 3)
    train_random = set(np.asarray(train.tokens).ravel()) - {MU1, MU2, COMMON}
    test_random = set(np.asarray(make_test_set(cfg, 3, train).tokens).ravel()) - {MU1, MU2, COMMON}
    assert test_random and all((token in train_random) == (mode == "seen") for token in test_random)


def test_unseen_test_tokens_need_a_token_the_training_set_lacks():
    cfg = DataConfig(n=12, L=4, d=5, random_tokens="uniform", n_test=10, test_tokens="unseen")
    train = make_train_set(cfg, 0)
    assert set(np.asarray(train.tokens).ravel()) == set(range(5))
    with pytest.raises(ConfigError, match="data.test_tokens"):
        make_test_set(cfg, 0, train)


@pytest.mark.parametrize("target, overrides", [
    ("tiny", {}),
    ("theory", {"model.space": "gram", "model.neurons": True, "model.m": 4096, "model.m1": 32}),
    ("theory", {"model.space": "gram", "model.m": 1 << 20, "init.gram_from": "sampled", "data.random_tokens": "uniform"}),
])
def test_an_ensemble_is_its_seeds_built_one_by_one(target, overrides):
    """`run.eq1.build_ensemble` derives the seeds' keys in one vmapped call, draws their states in one
    thread per core and builds their sets on the host: every leaf must equal, bit for bit, what building
    each seed alone and stacking gives (the same integer key arithmetic, the same NumPy draws, the same
    sampler per key)."""
    import jax

    from coocflow.api import resolve_config
    from coocflow.flow.system import stack_seeds
    from coocflow.run.eq1 import build_ensemble
    from coocflow.systems.eq1 import build_model, build_problem

    config = resolve_config(target, overrides, n_seeds=[0, 5, 2**33 + 7])
    alone = (stack_seeds([build_model(config, s) for s in config.seed_list]),
             stack_seeds([build_problem(config, s) for s in config.seed_list]))
    together = build_ensemble(config)
    assert jax.tree.structure(alone) == jax.tree.structure(together)
    for a, b in zip(jax.tree.leaves(alone), jax.tree.leaves(together)):
        assert a.dtype == b.dtype and np.array_equal(np.asarray(a), np.asarray(b))


def test_a_data_set_is_drawn_once_per_process_and_handed_out_read_only(monkeypatch):
    """A sweep's jobs differ in width, not in data: the second job of the same seeds takes their sets
    from the process's store (`cooccurrence._remembered`) with the very bits of a fresh draw, and
    nobody can write into what the next caller is handed. The store forgets the oldest sets past
    `DRAWN_KEPT_BYTES`, and a seen/unseen test set is keyed by the training set it draws from."""
    from coocflow.data import cooccurrence

    cfg = DataConfig(n=36, L=5, d=400, random_tokens="distinct", n_test=50, test_tokens="unseen")
    draws = []
    for name in ("_draw_train", "_draw_test"):
        original = getattr(cooccurrence, name)
        monkeypatch.setattr(cooccurrence, name, lambda *args, _f=original, _n=name: draws.append(_n) or _f(*args))
    monkeypatch.setattr(cooccurrence, "_DRAWN", type(cooccurrence._DRAWN)())
    monkeypatch.setattr(cooccurrence, "_DRAWN_BYTES", [0])

    def sets(seed):
        train = make_train_set(cfg, seed, host=True)
        return train, make_test_set(cfg, seed, train, host=True)

    first = [sets(s) for s in range(3)]
    again = [sets(s) for s in range(3)]
    assert draws == ["_draw_train", "_draw_test"] * 3
    for (train_a, test_a), (train_b, test_b) in zip(first, again):
        for a, b in ((train_a, train_b), (test_a, test_b)):
            for field in ("tokens", "labels", "groups"):
                np.testing.assert_array_equal(getattr(a, field), getattr(b, field))
    fresh_train = cooccurrence._draw_train(cfg, 1)
    np.testing.assert_array_equal(again[1][0].tokens, fresh_train[0])
    with pytest.raises(ValueError, match="read-only"):
        again[0][0].tokens[0, 0] = 0
    other_train = make_train_set(cfg, 7)
    unseen_of_other = make_test_set(cfg, 0, other_train, host=True)
    assert draws[-2:] == ["_draw_train", "_draw_test"], "a test set drawn from another pool is drawn again"
    assert not np.array_equal(unseen_of_other.tokens, again[0][1].tokens)
    monkeypatch.setattr(cooccurrence, "DRAWN_KEPT_BYTES", 1)
    make_train_set(cfg, 11)
    assert list(cooccurrence._DRAWN) == [("train", 36, 5, 400, "distinct", 11)]
    assert cooccurrence._DRAWN_BYTES[0] == sum(t.nbytes + g.nbytes for t, g in cooccurrence._DRAWN.values())
