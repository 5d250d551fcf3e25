"""The system a configuration names (`Config.system`): a built-in one or a user's own class."""

from __future__ import annotations

import dataclasses
import hashlib
import importlib
import importlib.util
import inspect
import sys
from importlib import metadata
from pathlib import Path
from typing import Any, get_type_hints

from coocflow.config import Config, all_keys, suggest_key, type_text
from coocflow.errors import ConfigError
from coocflow.systems.base import AbstractSystem
from coocflow.systems.deep import DeepSystem
from coocflow.systems.eq1 import Eq1System
from coocflow.systems.markov import MarkovSystem

BUILT_IN: dict[str, type[AbstractSystem]] = {"eq1": Eq1System, "deep": DeepSystem, "markov": MarkovSystem}
"""The systems coocflow ships: eq. (1) (whose runs are `coocflow.run.eq1.Eq1TrainedRun`s), deep and markov."""


SOURCE_HASH = "__coocflow_sha256__"
"""The attribute of a module loaded from a user's file holding the SHA-256 of the source it executed."""


def _module_from_file(path: Path):
    """The module of a system file as its source is now, imported once per resolved path and content:
    later loads of an unchanged file reuse it (its classes stay the same objects and compiled programs
    are reused), and a file edited since is executed again as a new module, so that a long-lived
    process (a notebook, `coocflow.cli.invoke`) never runs the old code under the new code's hash. The
    module records the hash of the very source it executed (`SOURCE_HASH`, which `system_code` reports).
    Its folder goes first on `sys.path`, as `python file.py` puts it, so the file may import modules
    beside it (those are Python's ordinary imports, not reloaded)."""
    source = path.read_bytes()
    digest = hashlib.sha256(source).hexdigest()
    name = "coocflow_user_" + "".join(ch if ch.isalnum() else "_" for ch in str(path.resolve())) + "_" + digest[:16]
    if name in sys.modules:
        return sys.modules[name]
    folder = str(path.resolve().parent)
    if folder not in sys.path:
        sys.path.insert(0, folder)
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    setattr(module, SOURCE_HASH, digest)
    sys.modules[name] = module
    try:
        exec(compile(source, str(path), "exec"), module.__dict__)  # the bytes hashed above, not a second read
    except Exception as err:
        del sys.modules[name]
        raise ConfigError(f"system: {path} failed to import ({type(err).__name__}: {err}); fix the file") from None
    return module


def named_object(spec: str, field: str = "system") -> Any:
    """What `path/to/file.py:Name` (relative to the working directory) or `package.module:Name`
    names (None when the module has no such name); `field` names the setting in the errors."""
    where, _, name = spec.partition(":")
    if where.endswith(".py"):
        path = Path(where)
        if not path.is_file():
            raise ConfigError(f"{field}: {where} is not a file (relative to {Path.cwd()}); give its path from the "
                              "working directory, or an absolute one")
        module = _module_from_file(path)
    else:
        try:
            module = importlib.import_module(where)
        except ImportError as err:
            raise ConfigError(f"{field}: cannot import module {where!r} ({err}); is it installed?") from None
    return getattr(module, name, None)


def system_class(spec: str) -> type[AbstractSystem]:
    """The class `spec` names: a built-in name, `path/to/file.py:ClassName` (relative to the
    working directory) or `package.module:ClassName`."""
    if spec in BUILT_IN:
        return BUILT_IN[spec]
    where, _, class_name = spec.partition(":")
    found = named_object(spec)
    if not (isinstance(found, type) and issubclass(found, AbstractSystem)):
        raise ConfigError(f"system: {where} has no AbstractSystem subclass named {class_name!r}; name the class "
                          "that subclasses coocflow.systems.AbstractSystem")
    listable = [key for key in all_keys() if key.split(".")[0] in ("data", "model")]
    for key in found.listed_keys:
        if key not in listable:
            close = suggest_key(key)
            hint = f"did you mean {close}? " if close in listable else ""
            raise ConfigError(f"system: {class_name}.listed_keys names {key!r}, not a data or model key; {hint}"
                              "list the built-in keys it reads (coocflow keys)")
    return found


def system_of(config: Config) -> AbstractSystem:
    """The system `config.system` names, built from `config` (it validates what it reads) and
    checked to support `config.train`."""
    cls = system_class(config.system)
    cls.settings_of(config)
    system = cls.from_config(config)
    system.check_training(config)
    return system


def settings_reference(spec: str) -> list[tuple[str, str, Any, str]]:
    """The System's own settings as (key, type, default, help) rows: what `coocflow keys --system`
    prints (empty for a System that declares none)."""
    settings = system_class(spec).Settings
    if settings is None:
        return []
    types = get_type_hints(settings)
    rows = []
    for f in dataclasses.fields(settings):
        default = (f.default if f.default is not dataclasses.MISSING else
                   f.default_factory() if f.default_factory is not dataclasses.MISSING else "(required)")
        rows.append((f"settings.{f.name}", type_text(types[f.name]), default, f.metadata.get("help", "")))
    return rows


def system_code(spec: str) -> dict:
    """What defines the System `spec` names, to tell when it changed: the file that defines its class
    (a user's file, or the installed module of a built-in or a package's class) and its SHA-256, and
    for a built-in coocflow's version too. A run records it (manifest.json, checkpoint.npz)."""
    return class_code(system_class(spec), built_in=spec in BUILT_IN)


def class_code(cls: type, built_in: bool = False) -> dict:
    """`system_code` of a System's class: for a class from a user's file the hash of the source that
    defined it (`SOURCE_HASH`), which is what a run of it executed even if the file was edited since;
    else the hash of its module's file."""
    path = Path(inspect.getfile(cls)).resolve()
    executed = getattr(sys.modules.get(cls.__module__), SOURCE_HASH, None)
    record = {"file": str(path), "sha256": executed or hashlib.sha256(path.read_bytes()).hexdigest()}
    if built_in:
        record["coocflow"] = metadata.version("coocflow")
    return record


def code_change(recorded: dict | None, now: dict) -> str | None:
    """How the System's code `now` (`system_code`) differs from what a run recorded, in a few words;
    None when it is the same, or when the run recorded none (written before runs recorded it)."""
    if not recorded:
        return None
    changed = [f"{key} {recorded.get(key, '?')[:12]} -> {now[key][:12]}" for key in ("coocflow", "sha256")
               if key in now and recorded.get(key) != now[key]]
    return f"{now['file']}: " + ", ".join(changed) if changed else None
