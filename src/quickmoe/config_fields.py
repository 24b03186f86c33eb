"""Reading one field of a JSON config (config.json, hf_quant_config.json) with the error every config module
raises: `ConfigError` naming the file, the field, the value found and what was expected."""

from __future__ import annotations

from typing import Any

from quickmoe.errors import ConfigError

__all__ = ["field_error", "read_field"]


def field_error(field_name: str, value: Any, expected: str, source: str) -> ConfigError:
    """The error for field `field_name` of `source` holding `value` where `expected` was expected."""
    return ConfigError(f"{source}: field '{field_name}' = {value!r}: expected {expected}")


def read_field(raw: dict, name: str, kind: type | tuple, source: str, *, default: Any = ..., positive: bool = False):
    """Read `raw[name]`, check its type (bool is never an int here) and, optionally, that it is > 0."""
    if name not in raw or raw[name] is None:
        if default is ...:
            raise ConfigError(f"{source}: missing field '{name}' (expected {_kind_name(kind)})")
        return default
    value = raw[name]
    kinds = kind if isinstance(kind, tuple) else (kind,)
    ok = isinstance(value, kinds) and not (isinstance(value, bool) and bool not in kinds)
    if float in kinds and isinstance(value, int) and not isinstance(value, bool):
        ok, value = True, float(value)
    if not ok:
        raise field_error(name, value, _kind_name(kind), source)
    if positive and not value > 0:
        raise field_error(name, value, f"a positive {_kind_name(kind)}", source)
    return value


def _kind_name(kind: type | tuple) -> str:
    kinds = kind if isinstance(kind, tuple) else (kind,)
    return " or ".join({int: "an integer", float: "a number", bool: "a boolean", str: "a string",
                        list: "a list", dict: "an object"}.get(k, k.__name__) for k in kinds)
