"""Hypothesis throws random and malformed configs, TOML files and run folders at the loaders:
every outcome is a valid config/run or one of the documented one-line errors."""

import json
import string

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from coocflow.config import Config, all_keys, config_from_dict, load_toml
from coocflow.errors import ConfigError, RunFolderError
from coocflow.storage import load_run
from coocflow.sweep import spec_from_dict

SCALARS = st.one_of(st.none(), st.booleans(), st.integers(-10**6, 10**6), st.floats(allow_nan=True),
                    st.text(max_size=12), st.lists(st.integers(-3, 200), max_size=4))
KEYS = st.one_of(st.sampled_from(all_keys()), st.text(alphabet=string.ascii_lowercase + "._", max_size=14))


def _nested(flat: dict) -> dict:
    tree: dict = {}
    for key, value in flat.items():
        node = tree
        parts = key.split(".")
        for part in parts[:-1]:
            if not isinstance(node.get(part, {}), dict):
                break
            node = node.setdefault(part, {})
        else:
            node[parts[-1]] = value
    return tree


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.dictionaries(KEYS, SCALARS, max_size=6))
def test_random_configs_are_valid_or_one_clear_error(flat):
    try:
        config = config_from_dict(_nested(flat))
    except ConfigError as err:
        text = str(err)
        assert text and "\n" not in text and "Traceback" not in text
    else:
        assert isinstance(config, Config)


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=200))
def test_random_toml_text_is_read_or_refused_with_its_line(tmp_path_factory, text):
    path = tmp_path_factory.mktemp("toml") / "c.toml"
    path.write_text(text)
    try:
        tree = load_toml(path)
    except ConfigError as err:
        assert str(err).startswith(f"{path}: not valid TOML")
        return
    try:
        config_from_dict(tree)
    except ConfigError as err:
        assert "\n" not in str(err)


@settings(max_examples=150, deadline=None)
@given(st.dictionaries(st.sampled_from(["name", "base", "seeds", "set", "grid", "zip", "extra"]), SCALARS, max_size=4))
@example({"base": "\n"})  # found by CI: the unknown base was quoted as typed, its newline breaking the line
@example({"grid": {"a\nb": [1]}})
def test_random_sweep_specs_are_valid_or_one_clear_error(tree):
    try:
        spec_from_dict(tree)
    except ConfigError as err:
        assert str(err) and "\n" not in str(err)


ALL_FILES = {"config.json", "manifest.json", "metrics.parquet", "state_init.npz", "state_final.npz"}


@settings(max_examples=100, deadline=None)
@given(st.sets(st.sampled_from(sorted(ALL_FILES))), st.binary(max_size=64),
       st.sampled_from([None, 0, 1, 2, "1", "junk"]))
@example(ALL_FILES, b"\x80", 1)  # config.json not UTF-8 (found by this test in CI)
@example(ALL_FILES, b"PK\x03\x04junk", 1)  # npz files that look like zips but are not
@example(ALL_FILES, b"[1, 2]", 1)  # config.json valid JSON but not an object
def test_broken_run_folders_are_refused_with_one_line(tmp_path_factory, present, junk, version):
    folder = tmp_path_factory.mktemp("run")
    for name in present:
        if name == "manifest.json" and version == "junk":
            (folder / name).write_bytes(junk)
        elif name == "manifest.json":
            (folder / name).write_text(json.dumps({"format_version": version}))
        else:
            (folder / name).write_bytes(junk)
    try:
        load_run(folder)
    except RunFolderError as err:
        assert str(err).startswith(str(folder)) and "\n" not in str(err)
    else:
        raise AssertionError("a folder of junk loaded")


def test_a_config_file_that_is_not_text_is_refused(tmp_path):
    path = tmp_path / "binary.toml"
    path.write_bytes(b"\x80\x81 not text")
    try:
        load_toml(path)
    except ConfigError as err:
        assert "not UTF-8 text" in str(err)
    else:
        raise AssertionError("binary config loaded")
