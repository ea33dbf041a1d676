"""typed_yaml: frozen dataclasses built from parsed YAML, with errors naming file, key path and value."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import pytest

from robot_rl.typed_yaml import ConfigError, build, read_yaml, to_plain

SRC = "cfg.yaml"


@dataclass(frozen=True)
class Limits:
    pair: tuple[float, float]
    names: tuple[str, ...] = ()


@dataclass(frozen=True)
class Cat:
    type: Literal["cat"]
    lives: int = 9


@dataclass(frozen=True)
class Dog:
    type: Literal["dog"]
    good: bool


@dataclass(frozen=True)
class Config:
    name: str
    gain: float
    count: int
    enabled: bool
    mode: Literal["fast", "slow"]
    limits: Limits
    pet: Cat | Dog
    note: str | None = None
    extras: dict[str, float] = field(default_factory=dict)
    anything: Any = None


def good() -> dict:
    return {
        "name": "demo",
        "gain": 1.5,
        "count": 3,
        "enabled": True,
        "mode": "fast",
        "limits": {"pair": [-1.0, 1.0], "names": ["a", "b"]},
        "pet": {"type": "dog", "good": True},
    }


def build_error(data: dict, key_path: str, *in_message: str) -> ConfigError:
    with pytest.raises(ConfigError) as info:
        build(Config, data, SRC)
    err = info.value
    assert err.source == SRC
    assert err.key_path == key_path
    assert str(err).startswith(f"{SRC}: {key_path}: ")
    for text in in_message:
        assert text in str(err), f"{text!r} not in {str(err)!r}"
    return err


def test_builds_a_valid_config_with_defaults():
    cfg = build(Config, good(), SRC)
    assert cfg.limits == Limits(pair=(-1.0, 1.0), names=("a", "b"))
    assert cfg.pet == Dog(type="dog", good=True)
    assert cfg.note is None and cfg.extras == {} and cfg.anything is None


def test_to_plain_round_trips():
    cfg = build(Config, good() | {"note": "x", "extras": {"k": 2.0}, "anything": [1, "two"]}, SRC)
    plain = to_plain(cfg)
    assert plain["limits"]["pair"] == [-1.0, 1.0]  # tuples become lists, as YAML has them
    assert build(Config, plain, SRC) == cfg


# --- tuples -------------------------------------------------------------------------------------------------


def test_fixed_tuple_converts_items_and_checks_length():
    cfg = build(Config, good() | {"limits": {"pair": [0, 2]}}, SRC)
    assert cfg.limits.pair == (0.0, 2.0) and all(type(v) is float for v in cfg.limits.pair)
    build_error(good() | {"limits": {"pair": [1.0, 2.0, 3.0]}}, "limits.pair", "2 items", "[1.0, 2.0, 3.0]")


def test_tuple_item_errors_name_the_index():
    build_error(good() | {"limits": {"pair": [1.0, "x"]}}, "limits.pair[1]", "expected a number", "'x'")
    build_error(good() | {"limits": {"pair": [0, 1], "names": ["a", 7]}}, "limits.names[1]", "a string", "7")


def test_tuple_rejects_a_scalar():
    build_error(good() | {"limits": {"pair": 1.0}}, "limits.pair", "expected a list", "1.0")


def test_variadic_tuple_accepts_any_length():
    cfg = build(Config, good() | {"limits": {"pair": [0, 1], "names": []}}, SRC)
    assert cfg.limits.names == ()


# --- Literal, Optional ---------------------------------------------------------------------------------------


def test_literal_accepts_a_listed_value_and_names_the_allowed_ones():
    assert build(Config, good() | {"mode": "slow"}, SRC).mode == "slow"
    build_error(good() | {"mode": "medium"}, "mode", "'medium'", "'fast'", "'slow'")


def test_optional_accepts_none_or_the_type():
    assert build(Config, good() | {"note": None}, SRC).note is None
    assert build(Config, good() | {"note": "hi"}, SRC).note == "hi"
    build_error(good() | {"note": 3}, "note", "expected a string", "3")


# --- tagged unions -------------------------------------------------------------------------------------------


def test_tagged_union_picks_the_variant_by_type():
    assert build(Config, good() | {"pet": {"type": "cat"}}, SRC).pet == Cat(type="cat", lives=9)


def test_tagged_union_unknown_tag_names_the_type_key():
    build_error(good() | {"pet": {"type": "fish"}}, "pet.type", "'fish'", "'cat'", "'dog'")


def test_tagged_union_without_a_type_key():
    build_error(good() | {"pet": {"good": True}}, "pet", "'type' key")


def test_tagged_union_checks_keys_of_the_chosen_variant():
    build_error(good() | {"pet": {"type": "cat", "good": True}}, "pet.good", "unknown key 'good'")
    build_error(good() | {"pet": {"type": "dog"}}, "pet.good", "missing key 'good'", "true or false")


# --- scalars: bool/int strictness, int for float ---------------------------------------------------------------


def test_int_is_accepted_for_a_float_and_becomes_a_float():
    cfg = build(Config, good() | {"gain": 2}, SRC)
    assert cfg.gain == 2.0 and type(cfg.gain) is float


def test_bool_is_not_an_int_or_a_float():
    build_error(good() | {"count": True}, "count", "expected an integer", "True")
    build_error(good() | {"gain": False}, "gain", "expected a number", "False")


def test_int_is_not_a_bool():
    build_error(good() | {"enabled": 1}, "enabled", "expected true or false", "1")


def test_float_is_not_an_int():
    build_error(good() | {"count": 3.0}, "count", "expected an integer", "3.0")


def test_number_is_not_a_string():
    build_error(good() | {"name": 5}, "name", "expected a string", "5")


def test_dict_values_are_checked_with_their_key_in_the_path():
    assert build(Config, good() | {"extras": {"k": 1}}, SRC).extras == {"k": 1.0}
    build_error(good() | {"extras": {"k": "v"}}, "extras.k", "expected a number", "'v'")


# --- keys -----------------------------------------------------------------------------------------------------


def test_unknown_key_lists_the_allowed_ones():
    err = build_error(good() | {"gian": 1.0}, "gian", "unknown key 'gian'")
    assert "gain" in str(err)


def test_missing_key_says_what_type_is_needed():
    data = good()
    del data["count"]
    build_error(data, "count", "missing key 'count'", "an integer")


def test_top_level_must_be_a_mapping():
    with pytest.raises(ConfigError) as info:
        build(Config, ["not", "a", "mapping"], SRC)
    assert str(info.value).startswith(f"{SRC}: <top level>: expected a mapping")


def test_unsupported_type_is_a_programming_error():
    @dataclass(frozen=True)
    class Odd:
        values: set[int]

    with pytest.raises(TypeError, match="does not support"):
        build(Odd, {"values": [1]}, SRC)


# --- reading files --------------------------------------------------------------------------------------------


def test_read_yaml_parses_a_file(tmp_path: Path):
    path = tmp_path / "ok.yaml"
    path.write_text("a: 1\nb: [x, y]\n")
    assert read_yaml(path) == {"a": 1, "b": ["x", "y"]}


def test_read_yaml_names_file_and_line_of_a_syntax_error(tmp_path: Path):
    path = tmp_path / "bad.yaml"
    path.write_text("a: 1\nb: [x, y\nc: 2\n")
    with pytest.raises(ConfigError) as info:
        read_yaml(path)
    message = str(info.value)
    assert message.startswith(f"{path}: <top level>: not valid YAML at line ")
    assert info.value.source == str(path)


def test_read_yaml_missing_file(tmp_path: Path):
    with pytest.raises(ConfigError, match="cannot read file"):
        read_yaml(tmp_path / "absent.yaml")


@pytest.mark.parametrize("content", [b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR", "caf\u00e9: 1\n".encode("latin-1")],
                         ids=["binary", "latin-1"])
def test_read_yaml_names_a_file_that_is_not_utf8_text(tmp_path: Path, content: bytes):
    path = tmp_path / "spec.yaml"
    path.write_bytes(content)
    with pytest.raises(ConfigError, match=r"spec\.yaml: <top level>: not a YAML text file: byte 0x.. at offset \d+ "
                                          r"is not UTF-8") as info:
        read_yaml(path)
    assert "\n" not in str(info.value)
