"""Every bad input is refused with one clear line naming the field."""

import pytest

from coocflow.api import resolve_config
from coocflow.config import Config, config_from_dict, parse_override
from coocflow.errors import ConfigError


@pytest.mark.parametrize(
    "overrides,field",
    [
        ({"data.n": 61}, "data.n"),
        ({"data.n": -6}, "data.n"),
        ({"data.n": 0}, "data.n"),
        ({"data.L": 2}, "data.L"),
        ({"data.d": 3}, "data.d"),
        ({"data.random_tokens": "distinct"}, "data.d"),
        ({"data.random_tokens": "gaussian"}, "data.random_tokens"),
        ({"data.n_test": -1}, "data.n_test"),
        ({"model.m": 0}, "model.m"),
        ({"model.m1": -2}, "model.m1"),
        ({"init.scheme": "xavier"}, "init.scheme"),
        ({"init.c0": 0.0}, "init.c0"),
        ({"train.method": "lbfgs"}, "train.method"),
        ({"optimizer.lr": -0.1}, "optimizer.lr"),
        ({"train.steps": 0}, "train.steps"),
        ({"observe.points": 1}, "observe.points"),
        ({"dtype": "float16"}, "dtype"),
        ({"seed": -1}, "seed"),
        ({"data.n": "sixty"}, "data.n"),
        ({"optimizer.lr": True}, "optimizer.lr"),
        ({"observe.checkpoint_every_s": -1.0}, "observe.checkpoint_every_s"),
        ({"name": "../../outside"}, "name"),
        ({"name": "/etc/passwd"}, "name"),
        ({"name": "runs/../../x"}, "name"),
        ({"name": ".hidden"}, "name"),
        ({"name": "a\\b"}, "name"),
        ({"name": ""}, "name"),
        ({"name": "tab\there"}, "name"),
    ],
)
def test_bad_values_name_their_field(overrides, field):
    with pytest.raises(ConfigError) as err:
        Config().replace(overrides)
    message = str(err.value)
    assert message.startswith(field), message
    assert "\n" not in message


def test_distinct_error_says_how_large_d_must_be():
    with pytest.raises(ConfigError, match=r"data.d=163"):
        Config().replace({"data.random_tokens": "distinct"})
    Config().replace({"data.random_tokens": "distinct", "data.d": 163})


def test_unknown_key_suggests_the_closest():
    with pytest.raises(ConfigError, match="did you mean 'optimizer.lr'"):
        Config().replace({"train.lrr": 0.1})
    with pytest.raises(ConfigError, match="unknown config key 'foo'"):
        config_from_dict({"foo": 1})
    with pytest.raises(ConfigError, match="did you mean 'model.m1'"):
        config_from_dict({"model": {"mm1": 3}})


def test_set_parses_toml_literals():
    assert parse_override("optimizer.lr=0.05") == ("optimizer.lr", 0.05)
    assert parse_override("data.n = 120") == ("data.n", 120)
    assert parse_override("init.scheme=theory") == ("init.scheme", "theory")
    assert parse_override('init.scheme="theory"') == ("init.scheme", "theory")
    with pytest.raises(ConfigError, match="expected key=value"):
        parse_override("optimizer.lr")


def test_whole_numbers_accepted_for_int_fields_and_ints_for_floats():
    config = Config().replace({"train.steps": 1e3, "optimizer.lr": 1})
    assert config.train.steps == 1000 and isinstance(config.train.steps, int)
    assert config.optimizer.lr == 1.0 and isinstance(config.optimizer.lr, float)


def test_toml_file_round_trip_and_syntax_error(tmp_path):
    good = tmp_path / "mine.toml"
    good.write_text('seed = 4\n[data]\nn = 12\nL = 4\nd = 16\n[train]\nlr = 0.1\nsteps = 50\n')
    config = resolve_config(str(good), ["model.m=4"])
    assert (config.name, config.seed, config.data.n, config.model.m) == ("mine", 4, 12, 4)
    bad = tmp_path / "bad.toml"
    bad.write_text("[data]\nn = 12\nL = = 4\n")
    with pytest.raises(ConfigError, match=r"bad.toml: not valid TOML.*line 3"):
        resolve_config(str(bad))
    with pytest.raises(ConfigError, match="missing.toml: does not exist"):
        resolve_config(str(tmp_path / "missing.toml"))
    with pytest.raises(ConfigError, match="unknown experiment 'nope'"):
        resolve_config("nope")


def test_config_dict_round_trip():
    config = Config().replace({"init.scheme": "theory", "data.random_tokens": "distinct", "data.d": 300})
    assert config_from_dict(config.to_dict()) == config


def test_names_that_stay_inside_the_output_folder_are_accepted(tmp_path):
    from coocflow.storage.paths import inside

    for name in ("paper", "my run v2", "sweep/model.m=64_data.L=5", "width+1.5"):
        assert Config().replace({"name": name}).name == name
        assert inside(tmp_path, name, "name").resolve().is_relative_to(tmp_path.resolve())


def test_a_symlink_out_of_the_output_root_is_refused(tmp_path):
    """Even a valid name must not write through a link that leaves the root."""
    from coocflow.storage.paths import inside

    root, elsewhere = tmp_path / "runs", tmp_path / "elsewhere"
    root.mkdir()
    elsewhere.mkdir()
    (root / "link").symlink_to(elsewhere)
    with pytest.raises(ConfigError, match="name: 'link/run' would write outside"):
        inside(root, "link/run", "name")


def test_choices_come_from_the_literal_types_and_a_near_miss_gets_a_suggestion():
    from typing import get_args, get_type_hints

    from coocflow.config import TRAIN_METHODS, TrainConfig

    assert TRAIN_METHODS == get_args(get_type_hints(TrainConfig)["method"])
    with pytest.raises(ConfigError, match=r"^train.method: must be one of gd, sgd, momentum, adam, adamw, flow "
                                          r"\(got 'adm'\); did you mean 'adam'\?$"):
        Config().replace({"train.method": "adm"})
    with pytest.raises(ConfigError, match=r"^solver.name: must be one of tsit5, dopri5, dopri8, kvaerno5 \(got 7\)$"):
        Config().replace({"solver.name": 7})


def test_the_command_line_seeds_win_over_the_file(tmp_path):
    """A .toml's seeds are a default like every other key; --seeds and --seed override
    them, and only seeds listed on the same command line (--set seeds=[...]) conflict."""
    from coocflow.api import resolve_config
    from coocflow.errors import ConfigError

    path = tmp_path / "two.toml"
    path.write_text('name = "two"\nseeds = [0, 1]\n\n[model]\nm = 8\nm1 = 8\n')
    assert resolve_config(path).seed_list == (0, 1)
    assert resolve_config(path, n_seeds=3).seed_list == (0, 1, 2)
    assert resolve_config(path, seed=5).seed_list == (5, 6)
    with pytest.raises(ConfigError, match="--seeds: this command already lists seeds = \\[4\\]"):
        resolve_config(path, ["seeds=[4]"], n_seeds=3)


def test_a_t_end_too_large_to_count_in_steps_is_still_one_clear_error():
    """Found by tests/test_fuzz.py: t_end = 1.8e306 with GD made the suggested train.steps overflow."""
    with pytest.raises(ConfigError, match=r"train.t_end: applies to train.method=flow; .*\(too many to count\)"):
        resolve_config("tiny", ["train.t_end=1.797693134862316e+306", "optimizer.lr=1e-10"])
    with pytest.raises(ConfigError, match=r"set train.steps=300 instead"):
        resolve_config("tiny", ["train.t_end=30"])
