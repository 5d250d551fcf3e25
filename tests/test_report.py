"""report.html for a run and a sweep: content, escaping, and a real headless browser."""

import shutil

import numpy as np
from pathlib import Path

import pytest

from coocflow.api import resolve_config, run_and_write
from coocflow.report import write_report

from conftest import REPO, TINY

ARTIFACTS = REPO / "test-artifacts"


@pytest.fixture(scope="module")
def pages(tmp_path_factory):
    """A tiny 2-seed run with a hostile name, and a tiny sweep, each with its report."""
    from typer.testing import CliRunner

    from coocflow.cli import app

    root = tmp_path_factory.mktemp("report")
    config = resolve_config("tiny", [f"{k}={v}" for k, v in TINY.items()], n_seeds=2)
    config = config.replace({"name": "<script>alert('x')</script>"})
    run_folder, _ = run_and_write(config, root / "run")
    spec = root / "sweep.toml"
    spec.write_text('name = "grid"\nbase = "tiny"\nseeds = 2\n[set]\n"train.steps" = 40\n"observe.points" = 12\n'
                    '"observe.chunks" = 2\n[grid]\n"model.m" = [4, 8]\n')
    done = CliRunner().invoke(app, ["sweep", str(spec), "--out", str(root / "sweep"), "--workers", "1"])
    assert done.exit_code == 0, done.output
    from coocflow.api import run_scaling
    from coocflow.verify.paper.theorem import THEOREM
    from coocflow.verify.paper.width_sweep import width_plan

    scaling = resolve_config("tiny", ["train.steps=60", "observe.points=12", "observe.chunks=1", "init.scheme=theory"],
                             n_seeds=2)
    run_scaling(THEOREM, THEOREM.scaling, width_plan(scaling, "both", [4, 8]), root / "scaling")
    return {"run": write_report(run_folder), "sweep": write_report(root / "sweep"), "scaling": write_report(root / "scaling")}


def test_run_report_is_self_contained_and_escapes_names(pages):
    text = pages["run"].read_text()
    assert "<script>alert" not in text and "&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt;" in text
    assert "https://" not in text.split("<script>", 1)[0] and "src=\"http" not in text
    for title in ("Phase timeline", "Losses", "Attention scores A", "Balancing of gradients", "No verification yet"):
        assert title in text


def test_sweep_report_has_the_aggregate_and_the_jobs(pages):
    text = pages["sweep"].read_text()
    assert "T1 against model.m" in text and "model.m=4" in text and "2 done, 0 failed, 0 pending" in text


def test_scaling_report_has_the_claims_and_the_rates(pages):
    text = pages["scaling"].read_text()
    assert "<h2>Claims</h2>" in text and "T3.3 (Thm 3.3)" in text and "claims: " in text
    assert text.count('<div class="figure" id="rate') >= 40


def test_reports_render_in_headless_chromium(pages):
    """Every page opens in Chromium with no console errors, every figure holds data, and a
    screenshot of each lands in test-artifacts/."""
    chromium, driver_path = shutil.which("chromium"), shutil.which("chromedriver")
    if not (chromium and driver_path):
        pytest.skip("no chromium/chromedriver on this machine and `make browser` could not install them")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.support.ui import WebDriverWait

    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for argument in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                     "--window-size=1200,2400"):
        options.add_argument(argument)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    browser = webdriver.Chrome(service=Service(driver_path), options=options)
    ARTIFACTS.mkdir(exist_ok=True)
    try:
        for name, page in pages.items():
            browser.get(page.resolve().as_uri())
            WebDriverWait(browser, 120).until(lambda b: b.execute_script(
                "const f = document.querySelectorAll('.figure');"
                "return f.length > 0 && Array.from(f).every(e => e.data !== undefined);"))
            counts = browser.execute_script(
                "return Array.from(document.querySelectorAll('.figure')).map("
                "e => (e.data || []).reduce((n, trace) => n + ((trace.x || []).length), 0))")
            assert counts and all(c > 0 for c in counts), f"{name}: figures without data {counts}"
            problems = [entry for entry in browser.get_log("browser") if entry["level"] == "SEVERE"]
            assert not problems, f"{name}: console errors {problems}"
            assert browser.save_screenshot(str(ARTIFACTS / f"report_{name}.png"))
    finally:
        browser.quit()


def _tfrecords(path: Path):
    """The records of a TensorBoard event file (TFRecord framing: length, crc, data, crc)."""
    import struct

    data, records, at = path.read_bytes(), [], 0
    while at < len(data):
        (length,) = struct.unpack("<Q", data[at:at + 8])
        records.append(data[at + 12:at + 12 + length])
        at += 12 + length + 4
    return records


def test_tensorboard_export_holds_every_scalar(pages):
    from tensorboardX.proto import event_pb2

    from coocflow.report.tensorboard import export_tensorboard
    from coocflow.storage import load_run

    folder = pages["run"].parent
    out = export_tensorboard(folder)
    metrics = load_run(folder).metrics
    for seed in (0, 1):
        events = [event_pb2.Event.FromString(r) for f in (out / f"seed_{seed}").iterdir() for r in _tfrecords(f)]
        losses = sorted((e.step, e.wall_time, e.summary.value[0].simple_value) for e in events
                        if e.summary.value and e.summary.value[0].tag == "loss/loss")
        rows = metrics["seed"] == seed
        assert [w for _, w, _ in losses] == sorted(metrics["t"][rows].tolist())
        np.testing.assert_allclose([v for _, _, v in losses], metrics["loss"][rows][np.argsort(metrics["t"][rows])],
                                   rtol=1e-6)
