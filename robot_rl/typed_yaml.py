"""Build frozen dataclasses from parsed YAML, with errors a person can act on.

Every error names the file, the key path (``joints[3].kp``) and the bad value, because the person
reading it is editing a YAML file, not debugging Python. Only the types our configs use are supported:
bool, int, float, str, Literal, Optional, tuples (fixed and variadic), nested dataclasses, and
tagged unions of dataclasses (selected by their ``type`` field).
"""

from __future__ import annotations

import dataclasses
import types
from pathlib import Path
from typing import Any, Literal, Union, get_args, get_origin, get_type_hints

import yaml

from robot_rl.core.errors import RobotRLError


class ConfigError(RobotRLError, ValueError):
    """A config file is wrong. The message names the file, the key path and the bad value."""

    def __init__(self, source: str | Path, key_path: str, message: str):
        self.source = str(source)
        self.key_path = key_path
        super().__init__(f"{source}: {key_path or '<top level>'}: {message}")


def read_yaml(path: str | Path) -> Any:
    """Parse a YAML file, turning parser errors into a ConfigError that names the file."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(path, "", f"cannot read file ({exc.strerror})") from None
    except UnicodeDecodeError as exc:  # a binary file, or text in another encoding
        raise ConfigError(path, "", f"not a YAML text file: byte 0x{exc.object[exc.start]:02x} at offset "
                                    f"{exc.start} is not UTF-8") from None
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        raise ConfigError(path, "", f"not valid YAML{where}: {getattr(exc, 'problem', exc)}") from None


def _join(path: str, key: str | int) -> str:
    if isinstance(key, int):
        return f"{path}[{key}]"
    return f"{path}.{key}" if path else key


def _type_name(tp: Any) -> str:
    if tp is float:
        return "a number"
    if tp is int:
        return "an integer"
    if tp is str:
        return "a string"
    if tp is bool:
        return "true or false"
    if dataclasses.is_dataclass(tp):
        return "a mapping"
    return getattr(tp, "__name__", str(tp))


def build(cls: type, data: Any, source: str | Path, path: str = "") -> Any:
    """Build ``cls`` from ``data`` (parsed YAML), checking every key and type."""
    return _convert(cls, data, source, path)


def _convert(tp: Any, value: Any, source: str | Path, path: str) -> Any:
    origin = get_origin(tp)
    if tp is Any:
        return value
    if origin in (Union, types.UnionType):
        options = get_args(tp)
        if value is None and type(None) in options:
            return None
        non_none = [o for o in options if o is not type(None)]
        if all(dataclasses.is_dataclass(o) for o in non_none) and len(non_none) > 1:
            return _convert_tagged(non_none, value, source, path)
        errors = []
        for option in non_none:
            try:
                return _convert(option, value, source, path)
            except ConfigError as exc:
                errors.append(exc)
        raise errors[0]
    if origin is Literal:
        allowed = get_args(tp)
        if value not in allowed:
            raise ConfigError(source, path, f"{value!r} is not one of {', '.join(map(repr, allowed))}")
        return value
    if origin is tuple:
        args = get_args(tp)
        if not isinstance(value, list | tuple):
            raise ConfigError(source, path, f"expected a list, got {value!r}")
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(_convert(args[0], v, source, _join(path, i)) for i, v in enumerate(value))
        if len(value) != len(args):
            raise ConfigError(source, path, f"expected a list of {len(args)} items, got {value!r}")
        return tuple(_convert(a, v, source, _join(path, i)) for i, (a, v) in enumerate(zip(args, value, strict=True)))
    if origin is dict:
        key_tp, val_tp = get_args(tp)
        if not isinstance(value, dict):
            raise ConfigError(source, path, f"expected a mapping, got {value!r}")
        return {
            _convert(key_tp, k, source, path): _convert(val_tp, v, source, _join(path, str(k)))
            for k, v in value.items()
        }
    if dataclasses.is_dataclass(tp):
        return _convert_dataclass(tp, value, source, path)
    if tp is bool:
        if not isinstance(value, bool):
            raise ConfigError(source, path, f"expected true or false, got {value!r}")
        return value
    if tp is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(source, path, f"expected an integer, got {value!r}")
        return value
    if tp is float:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ConfigError(source, path, f"expected a number, got {value!r}")
        return float(value)
    if tp is str:
        if not isinstance(value, str):
            raise ConfigError(source, path, f"expected a string, got {value!r}")
        return value
    raise TypeError(f"typed_yaml does not support {tp!r} (at {path})")


def _convert_tagged(options: list[type], value: Any, source: str | Path, path: str) -> Any:
    if not isinstance(value, dict) or "type" not in value:
        raise ConfigError(source, path, f"expected a mapping with a 'type' key, got {value!r}")
    by_tag = {get_args(get_type_hints(o)["type"])[0]: o for o in options}
    tag = value["type"]
    if tag not in by_tag:
        raise ConfigError(
            source, _join(path, "type"), f"{tag!r} is not one of {', '.join(map(repr, by_tag))}"
        )
    return _convert_dataclass(by_tag[tag], value, source, path)


def _convert_dataclass(cls: type, value: Any, source: str | Path, path: str) -> Any:
    if not isinstance(value, dict):
        raise ConfigError(source, path, f"expected a mapping, got {value!r}")
    hints = get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls) if f.init}
    unknown = [k for k in value if k not in fields]
    if unknown:
        raise ConfigError(
            source,
            _join(path, str(unknown[0])),
            f"unknown key {unknown[0]!r} (allowed: {', '.join(fields)})",
        )
    kwargs = {}
    for name, field in fields.items():
        if name in value:
            kwargs[name] = _convert(hints[name], value[name], source, _join(path, name))
        elif field.default is dataclasses.MISSING and field.default_factory is dataclasses.MISSING:
            raise ConfigError(source, _join(path, name), f"missing key {name!r} ({_type_name(hints[name])})")
    return cls(**kwargs)


def to_plain(obj: Any) -> Any:
    """A dataclass tree as plain dicts/lists (the inverse of ``build``), for hashing and export."""
    if dataclasses.is_dataclass(obj):
        return {f.name: to_plain(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if isinstance(obj, tuple | list):
        return [to_plain(v) for v in obj]
    if isinstance(obj, dict):
        return {k: to_plain(v) for k, v in obj.items()}
    return obj


__all__ = ["ConfigError", "build", "read_yaml", "to_plain"]
