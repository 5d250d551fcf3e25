"""`coocflow fit-rate` (the rate judge on a user's own sweep) and `coocflow power`: the JSON a
script reads, the text a person reads, and a one-line error for every bad table."""

import json
import math

import numpy as np
import pyarrow.csv as pa_csv
import pyarrow.parquet as pq
import pytest

from conftest import coocflow_here as coocflow


def write_sweep(path, exponent, widths=(1e3, 3e3, 1e4, 3e4, 1e5, 3e5), seeds=8, noise=0.05, seed=0):
    rng = np.random.default_rng(seed)
    rows = ["m,seed,value"]
    for m in widths:
        for s in range(seeds):
            rows.append(f"{m:g},{s},{m ** exponent * math.exp(noise * rng.standard_normal()):.12g}")
    path.write_text("\n".join(rows) + "\n")
    return path


def test_json_for_a_true_and_a_wrong_exponent(tmp_path):
    table = write_sweep(tmp_path / "sweep.csv", -1.0)
    done = coocflow("fit-rate", str(table), "--exponent", "-1", "--kind", "order", "--json")
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["verdict"] == "pass"
    low, high = result["ci"]
    assert low < result["exponent"] < high and abs(result["exponent"] + 1.0) < 0.02
    assert result["band"] == [pytest.approx(-1.1), pytest.approx(-0.9)]
    wrong = coocflow("fit-rate", str(table), "--exponent", "-0.8", "--json")
    assert json.loads(wrong.stdout)["verdict"] == "fail" and wrong.returncode == 1, "a script gates on the exit code"


def test_the_exit_code_says_the_verdict(tmp_path):
    """0 pass, 1 fail, 3 inconclusive, 4 vacuous; 2 is bad input, as for every command."""
    noisy = write_sweep(tmp_path / "noisy.csv", -1.0, widths=(1e3, 2e3, 4e3), seeds=3, noise=1.0)
    done = coocflow("fit-rate", str(noisy), "--exponent", "-1")
    assert done.returncode == 3 and "verdict: inconclusive" in done.stdout, done.stdout
    steep = write_sweep(tmp_path / "steep.csv", -3.0, noise=0.01)
    done = coocflow("fit-rate", str(steep), "--exponent", "-1", "--kind", "upper")
    assert done.returncode == 4 and "verdict: vacuous" in done.stdout, done.stdout


def test_upper_lower_tolerance_and_log_power(tmp_path):
    table = write_sweep(tmp_path / "sweep.csv", -1.05, noise=0.01)
    assert json.loads(coocflow("fit-rate", str(table), "--exponent", "-1", "--kind", "upper", "--json").stdout)[
        "verdict"] == "pass"
    assert json.loads(coocflow("fit-rate", str(table), "--exponent", "-0.5", "--kind", "lower", "--json").stdout)[
        "verdict"] == "fail"
    strict = json.loads(coocflow("fit-rate", str(table), "--exponent", "-1", "--tol", "0", "--json").stdout)
    assert strict["verdict"] == "fail" and strict["band"] == [-1.0, -1.0]
    logs = json.loads(coocflow("fit-rate", str(table), "--exponent", "-1", "--tol", "0", "--log-power", "1",
                               "--json").stdout)
    assert logs["band"][0] < -1.05 < logs["band"][1]


def test_text_output_and_parquet(tmp_path):
    csv = write_sweep(tmp_path / "sweep.csv", 0.5)
    pq.write_table(pa_csv.read_csv(csv), tmp_path / "sweep.parquet")
    done = coocflow("fit-rate", str(tmp_path / "sweep.parquet"), "--exponent", "0.5")
    assert done.returncode == 0, done.stderr
    assert "6 widths" in done.stdout and "exponent +0.5" in done.stdout and "largest 3 widths" in done.stdout
    assert done.stdout.strip().endswith("verdict: pass")


@pytest.mark.parametrize(
    "content,args,expected",
    [
        ("m,value\n1,2\n", [], "missing column seed"),
        ("m,seed,value\n10,0,1\n20,0,2\n", [], "2 width(s) with values; a rate needs at least 3"),
        ("m,seed,value\n10,0,1\n20,0,-2\n40,0,3\n", [], "value = -2 is not positive"),
        ("m,seed,value\n10,0,1\n-20,0,2\n40,0,3\n", [], "m = -20.0 must be a positive width"),
        ("m,seed,value\n10,0,1\n10,0,2\n40,0,3\n80,0,1\n", [], "appears twice"),
        ("m,seed,value\nx,0,1\n", [], "columns m and value must be numbers"),
        ("m,seed,value\n10,0,1\n20,0,2\n40,0,3\n", ["--kind", "theta"], "--kind theta: choose order, upper, lower or decays"),
        ("m,seed,value\n10,0,1\n20,0,2\n40,0,3\n", ["--kind", "decays"], "--kind decays tests exponent < 0"),
        ("m,seed,value\n10,0,1\n20,0,2\n40,0,3\n", ["--tol", "-1"], "--tol -1.0: give a non-negative"),
    ],
)
def test_bad_tables_are_one_line(tmp_path, content, args, expected):
    table = tmp_path / "bad.csv"
    table.write_text(content)
    done = coocflow("fit-rate", str(table), "--exponent", "1", *args)
    assert done.returncode == 2
    assert expected in done.stderr and "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr


def test_missing_file_is_one_line(tmp_path):
    done = coocflow("fit-rate", str(tmp_path / "none.csv"), "--exponent", "1")
    assert done.returncode == 2 and "no such file" in done.stderr and "Traceback" not in done.stderr


def test_power_writes_its_page(tmp_path):
    out = tmp_path / "power.md"
    done = coocflow("power", "--trials", "4", "--out", str(out))
    assert done.returncode == 0, done.stderr
    text = out.read_text()
    assert "coocflow power --trials 4" in text and "| exponent error |" in text
    assert text.count("\n| 0.") >= 5 and "noise 0.5" in text


def test_a_seed_column_pairs_seeds_across_widths(tmp_path):
    """Each seed's values share an offset of sd 1 (log) at every width: paired (the default when a
    seed id repeats across widths) the interval is narrow and the true exponent passes; --unpaired
    treats every row as its own draw and cannot decide."""
    rng = np.random.default_rng(4)
    offsets = rng.standard_normal(8)
    rows = ["m,seed,value"] + [f"{m:g},{s},{m ** -1.0 * math.exp(offsets[s] + 0.05 * rng.standard_normal()):.12g}"
                               for m in (1e3, 3e3, 1e4, 3e4, 1e5, 3e5) for s in range(8)]
    table = tmp_path / "paired.csv"
    table.write_text("\n".join(rows) + "\n")
    paired = json.loads(coocflow("fit-rate", str(table), "--exponent", "-1", "--json").stdout)
    unpaired = json.loads(coocflow("fit-rate", str(table), "--exponent", "-1", "--json", "--unpaired").stdout)
    assert paired["fit"]["paired"] is True and paired["verdict"] == "pass"
    assert unpaired["fit"]["paired"] is False and unpaired["verdict"] == "inconclusive"
    assert (unpaired["ci"][1] - unpaired["ci"][0]) > 5 * (paired["ci"][1] - paired["ci"][0])
