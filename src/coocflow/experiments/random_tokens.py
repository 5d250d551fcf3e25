"""Studies of the random tokens R: unseen test tokens, and the data relaxations."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from coocflow.config import Config, random_slots
from coocflow.experiments.studies import (
    Progress,
    StudyResult,
    _change,
    _comparison_figure,
    _median_or_none,
    _run_variants,
    _table,
)
from coocflow.verify.paper import phase_boundaries


def value_at(t: np.ndarray, values: np.ndarray, when: float | None) -> float | None:
    """The observation at the first observed time >= `when` (None when `when` is None)."""
    if when is None:
        return None
    index = min(int(np.searchsorted(t, when)), len(t) - 1)
    return float(values[index])


def unseen_tokens(base: Config, out: Path, progress: Progress | None = None) -> StudyResult:
    """The reviewer's question: does the model learn not to attend to random tokens it never saw?

    Two runs with the same training set and initialization (`distinct` random tokens); their
    test sets draw the random slots from the tokens the training set holds (`seen`) or lacks
    (`unseen`). Tracked on the test set: the attention a random-token key receives and |G| there.
    """
    results = _run_variants(base, {"seen": {"data.test_tokens": "seen"},
                                   "unseen": {"data.test_tokens": "unseen"}}, out, progress)
    uniform = 1.0 / base.data.L
    figure = _comparison_figure(results, [
        ("test_attn_random", lambda v: v - uniform, {"xlabel": "t", "ylabel": "attention on a random-token key - 1/L (test)",
                                                     "title": "0 is uniform attention"}),
        ("test_G_random_abs", lambda v: v, {"yscale": "log", "xlabel": "t", "ylabel": "mean |G| at random tokens (test)"}),
        ("test_loss", lambda v: v, {"yscale": "log", "xlabel": "t", "ylabel": "test loss"}),
    ], out / "unseen_tokens.png")
    rows = []
    for name, result in results.items():
        for i, seed in enumerate(result.seeds):
            s, t1 = result.seed_series(i), result.t1[i]
            attn, g = s["test_attn_random"], s["test_G_random_abs"]
            attn_at_t1 = value_at(s["t"], attn, t1)
            rows.append({"test_tokens": name, "seed": seed, "T1": t1,
                         "attn_0": float(attn[0] - uniform),
                         "attn_T1": None if attn_at_t1 is None else attn_at_t1 - uniform,
                         "attn_end": float(attn[-1] - uniform),
                         "target_attn_end": float(s["p_q1_k2"][-1] - uniform),
                         "G_0": float(g[0]), "G_T1": value_at(s["t"], g, t1), "G_end": float(g[-1]),
                         "G_mu1_end": float(s["G_mu1"][-1]),
                         "test_acc": float(s["test_acc"][-1]), "test_loss": float(s["test_loss"][-1])})
    medians = {name: {k: _median_or_none([r[k] for r in rows if r["test_tokens"] == name])
                      for k in ("attn_0", "attn_end", "G_0", "G_end", "G_mu1_end", "test_acc", "target_attn_end")}
               for name in results}
    lines = [f"- {name}: a random-token key gets attention 1/L {m['attn_0']:+.2e} at t=0 and 1/L {m['attn_end']:+.2e} "
             f"at the end (the query mu_1 gives the key mu_2 1/L {m['target_attn_end']:+.2e}); "
             f"|G| there goes {m['G_0']:.3g} -> {m['G_end']:.3g} (G(mu_1) ends at {m['G_mu1_end']:.3g}); "
             f"test accuracy {m['test_acc']:.3f}." for name, m in medians.items()]
    c = base.data
    text = (f"# unseen-tokens\n\n{len(base.seed_list)} seeds of `{base.name}`: n={c.n}, L={c.L}, d={c.d}, distinct "
            f"random tokens ({random_slots(c.n, c.L)} in training, {c.d - 3 - random_slots(c.n, c.L)} never seen). "
            f"Both variants share the training set and initialization; only the test set's random tokens differ. "
            f"`attn` is the mean attention a random-token key receives (over the queries of its sample) minus the uniform "
            f"1/L = {uniform:.2f}, `target_attn_end` the same for the query mu_1 and key mu_2 at the end (training set), "
            "`G` the mean |G| at random-token positions, all on the test set, at t=0, at T1 and at the end.\n\n"
            + _table(rows, ["test_tokens", "seed", "T1", "attn_0", "attn_T1", "attn_end", "target_attn_end",
                            "G_0", "G_T1", "G_end", "G_mu1_end", "test_acc", "test_loss"])
            + "\n\nMedians:\n\n" + "\n".join(lines) + "\n")
    return StudyResult(rows, text, [figure])


def relaxed_variants(base: Config) -> dict[str, dict]:
    """`uniform` random tokens at the base d (d >> L, each token reused across samples), and both
    modes at the smallest d `distinct` allows (d ~ nL) and at four times that."""
    slots = random_slots(base.data.n, base.data.L)
    smallest_distinct = slots + 3
    large = 4 * smallest_distinct
    return {
        f"uniform d={base.data.d}": {"data.random_tokens": "uniform", "data.d": base.data.d},
        f"uniform d={smallest_distinct}": {"data.random_tokens": "uniform", "data.d": smallest_distinct},
        f"distinct d={smallest_distinct}": {"data.random_tokens": "distinct", "data.d": smallest_distinct},
        f"uniform d={large}": {"data.random_tokens": "uniform", "data.d": large},
        f"distinct d={large}": {"data.random_tokens": "distinct", "data.d": large},
    }


def relaxed_data(base: Config, out: Path, progress: Progress | None = None) -> StudyResult:
    """`distinct` (Assumption 2.3 (ii)) versus `uniform` random tokens across d, from d >> L to
    d ~ nL and beyond: do the phases, T1 and the final attention pattern stay the same?"""
    results = _run_variants(base, relaxed_variants(base), out, progress)
    figure = _comparison_figure(results, [
        ("loss", lambda v: v, {"yscale": "log", "xlabel": "t", "ylabel": "training loss"}),
        ("A_mu1_mu2", _change, {"xlabel": "t", "ylabel": "A[mu_1,mu_2](t) - A(0)"}),
        ("A_mu3_mu1", _change, {"xlabel": "t", "ylabel": "A[mu_3,mu_1](t) - A(0)"}),
        ("attn_random", lambda v: v, {"xlabel": "t", "ylabel": "attention on a random-token key (train)"}),
    ], out / "relaxed_data.png")
    rows = []
    for name, result in results.items():
        per_seed = []
        for i in range(result.trajectory.n_seeds):
            s = result.seed_series(i)
            phases = phase_boundaries(s)
            per_seed.append({"T1": phases["T1"], "phase2_start": phases["phase2_start"],
                             "final_loss": float(s["loss"][-1]),
                             "dA_12": float(s["A_mu1_mu2"][-1] - s["A_mu1_mu2"][0]),
                             "dA_31": float(s["A_mu3_mu1"][-1] - s["A_mu3_mu1"][0]),
                             "p_q1_k2": float(s["p_q1_k2"][-1]), "p_q1_k3": float(s["p_q1_k3"][-1]),
                             "attn_random": float(s["attn_random"][-1]), "test_acc": float(s["test_acc"][-1])})
        row = {"variant": name, "T1_reached": f"{sum(p['T1'] is not None for p in per_seed)}/{len(per_seed)}"}
        row.update({k: _median_or_none([p[k] for p in per_seed]) for k in per_seed[0]})
        rows.append(row)
    text = (f"# relaxed-data\n\n{len(base.seed_list)} seeds of `{base.name}` (n={base.data.n}, L={base.data.L}) per "
            f"variant, medians over seeds. `distinct` needs d - 3 >= {random_slots(base.data.n, base.data.L)} "
            "(every training slot its own token); `uniform` draws each slot i.i.d. `phase2_start` is when the score "
            "drift per e-fold of time reaches half its peak; the attention columns are final values (uniform is "
            f"1/L = {1 / base.data.L:.2f}).\n\n"
            + _table(rows, ["variant", "T1_reached", "T1", "phase2_start", "final_loss", "dA_12", "dA_31",
                            "p_q1_k2", "p_q1_k3", "attn_random", "test_acc"]) + "\n")
    return StudyResult(rows, text, [figure])
