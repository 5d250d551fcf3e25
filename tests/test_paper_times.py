"""The paper's times: T1 = C_T1 / U0 declared in the configuration, the first
all-correct time kept as its own observable, T* = first loss <= m^-k with k declared, and
verdicts that do not depend on how densely the flow is observed."""

import numpy as np
import pytest

from coocflow.api import resolve_config, run_and_write
from coocflow.config import Config
from coocflow.errors import ConfigError
from coocflow.verify.paper.scaling import QUANTITIES, t_star
from coocflow.verify.paper.reading import seed_data
from coocflow.verify.paper.theorem import verify_run
from coocflow.storage import load_run

SMALL = ["data.n=24", "data.d=40", "model.m=32768", "model.m1=64", "optimizer.lr=3e-7", "train.t_end=1.7e6"]
"""The theory experiment made small: 24 samples, m = 2^15 (P1 holds with m1 = 64), the flow to past T*."""


def _run(tmp_path_factory, points: int):
    """In chunks of 80 observations (1 chunk sparse, 2 dense): one chunk length, so the dense run
    reuses the sparse run's compiled flow and locator."""
    config = resolve_config("theory", [*SMALL, f"observe.points={points}", f"observe.chunks={points // 80}"], n_seeds=2)
    folder, _ = run_and_write(config, tmp_path_factory.mktemp(f"times{points}") / "run", figures=False)
    return load_run(folder)


@pytest.fixture(scope="module")
def sparse(tmp_path_factory):
    return _run(tmp_path_factory, 80)


@pytest.fixture(scope="module")
def dense(tmp_path_factory):
    return _run(tmp_path_factory, 160)


def test_t1_is_the_declared_time_and_its_state_is_kept(sparse):
    config = Config().replace({"init.scheme": "theory", "init.c1": 1.0, "model.m": 32768, "verify.c_t1": 20.0})
    assert config.paper_t1 == pytest.approx(20.0 / 32768)
    for seed, data in seed_data(sparse):
        assert data.bounds["T1"] == pytest.approx(20.0 / 32768, rel=1e-12)
        assert data.bounds["all_correct"] is not None and data.bounds["all_correct"] < data.bounds["T1"]
        state = data.states["T1"]
        assert state is not None and state.t == pytest.approx(20.0 / 32768, rel=1e-12)
        assert state.tokens.ndim == 2 and state.scores.shape == (40, 40)
        at = int(np.searchsorted(data.t, data.bounds["T1"]))
        assert data.t[at] == pytest.approx(data.bounds["T1"], rel=1e-12)


def test_t_star_uses_the_declared_loss_exponent(sparse):
    for _, data in seed_data(sparse):
        assert data.loss_exponent == 2.0
        found = t_star(data)
        assert found is not None
        at = int(np.searchsorted(data.t, found))
        assert data.series["loss"][at] <= 32768.0**-2 < data.series["loss"][at - 1]
        grid = data.bounds["all_correct"]  # the first observation with every sample correct
        k = int(np.searchsorted(data.t, grid))
        located = QUANTITIES["all_correct_time"].fn(data)  # located between observations
        assert data.t[k - 1] < located < grid and data.events["all_correct"] == located


def test_doubling_the_observed_points_changes_no_verdict(sparse, dense):
    """Every check's verdict, seed by seed, and every premise's, at 80 and at 160 observed times."""
    one, two = verify_run(sparse), verify_run(dense)
    assert [p.met for p in one.premises] == [p.met for p in two.premises]
    for seed_one, seed_two in zip(one.per_seed, two.per_seed):
        verdicts_one = {r.name: r.passed for r in seed_one}
        verdicts_two = {r.name: r.passed for r in seed_two}
        changed = {name: (verdicts_one[name], verdicts_two[name]) for name in verdicts_one
                   if verdicts_one[name] != verdicts_two[name]}
        assert not changed, changed
    assert [row["verdict"] for row in one.claims()] == [row["verdict"] for row in two.claims()]


def test_c_t1_is_validated():
    with pytest.raises(ConfigError, match="verify.c_t1: U0 = c1\\^2 m is the theory init's scale"):
        Config().replace({"verify.c_t1": 10.0})
    with pytest.raises(ConfigError, match="verify.loss_exponent"):
        Config().replace({"verify.loss_exponent": 0.0})


def test_t0_5_is_where_lemma_4_3s_declared_sandwich_sets_in(sparse):
    from coocflow.verify.paper.checks import CHECKS, SeedData

    for _, data in seed_data(sparse):
        assert data.sandwich_c == 0.1
        t_half, t1 = data.bounds["T0.5"], data.bounds["T1"]
        assert t_half is not None and 0 < t_half < t1
        window = (data.t >= t_half) & (data.t <= t1)
        g1, g2, g3 = (data.series[f"d_G_mu{k}_dt"][window] for k in (1, 2, 3))
        assert np.all((1.1 * np.maximum(g1, g2) <= -g3) & (-g3 <= 0.9 * (g1 + g2)))
        before = int(np.searchsorted(data.t, t_half)) - 1
        g1, g2, g3 = (data.series[f"d_G_mu{k}_dt"][before] for k in (1, 2, 3))
        assert not (1.1 * max(g1, g2) <= -g3 <= 0.9 * (g1 + g2))
        assert CHECKS["lemma4.3_sandwich"](data).passed is True
        broken = dict(data.series)
        at_t1 = int(np.searchsorted(data.t, t1))
        broken["d_G_mu3_dt"] = broken["d_G_mu3_dt"].copy()
        broken["d_G_mu3_dt"][at_t1] = -1.05 * (broken["d_G_mu1_dt"][at_t1] + broken["d_G_mu2_dt"][at_t1])
        edited = SeedData(broken, data.m, n=data.n, L=data.L, states=data.states, scales=data.scales,
                          t1_declared=data.t1_declared, sandwich_c=0.1)
        assert edited.bounds["T0.5"] is None
        assert CHECKS["lemma4.3_sandwich"](edited).passed is False


def test_correct_by_the_declared_t1_is_a_real_test(sparse):
    """With T1 = C_T1/U0 declared, 'every sample is correct by T1' can fail: a margin series whose
    last negative value sits after T1 (the state changed, not the yardstick)."""
    from coocflow.verify.paper.checks import CHECKS, SeedData

    for _, data in seed_data(sparse):
        assert CHECKS["thm3.1_correct_by_T1"](data).passed is True
        late = dict(data.series)
        after = int(np.searchsorted(data.t, 1.2 * data.bounds["T1"]))
        late["min_margin"] = late["min_margin"].copy()
        late["min_margin"][:after] = np.minimum(late["min_margin"][:after], -0.01)
        edited = SeedData(late, data.m, n=data.n, L=data.L, states=data.states, scales=data.scales,
                          t1_declared=data.t1_declared, sandwich_c=data.sandwich_c)
        result = CHECKS["thm3.1_correct_by_T1"](edited)
        assert result.passed is False and result.measured["all_correct_time"] > data.bounds["T1"]
        operational = SeedData(data.series, data.m, n=data.n, L=data.L, states=data.states, scales=data.scales)
        assert CHECKS["thm3.1_correct_by_T1"](operational).passed is None
