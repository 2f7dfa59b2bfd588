"""Declaring config sections: :func:`setting` for a field, :func:`config_section` for a class, and what follows.

A section is a frozen dataclass whose every field is a :func:`setting` (its default, its meaning, its range), marked
``@config_section("<key>")``: ``<key>`` is its name in the YAML file. Declaring registers nothing anywhere; a
:class:`~rewardkit.config.load.ConfigSchema` lists the sections it reads. From the declarations come the JSON
Schema that validates a file (:func:`object_schema`), the defaults (:func:`defaults_of`), the dataclass built
from a checked mapping (:func:`build`), and the words that messages and the generated reference use
(:func:`allowed`, :func:`yaml_scalar`).
"""

from __future__ import annotations

import copy
import dataclasses
import types
import typing
from collections.abc import Callable, Mapping
from dataclasses import field
from functools import cache
from typing import Any, Literal, TypeVar

import yaml

from rewardkit.errors import UserError

S = TypeVar("S")


class ConfigError(UserError, ValueError):
    """A configuration value is unknown, mistyped or out of range."""


def setting(
    default: Any,
    doc: str,
    *,
    minimum: float | None = None,
    maximum: float | None = None,
    exclusive_minimum: float | None = None,
    min_length: int | None = None,
    item_min_length: int | None = None,
    json_schema: Mapping[str, Any] | None = None,
) -> Any:
    """One config field: its ``default``, its meaning (``doc``, one sentence) and its range.

    The type comes from the field's annotation (``int``, ``float``, ``bool``, ``str``, ``Literal[...]``,
    ``X | None``, ``tuple[str, ...]`` or a nested frozen dataclass); the keywords add JSON Schema bounds.
    ``json_schema`` replaces the derived schema for a field whose shape the annotation cannot say.
    """
    bounds = {
        "minimum": minimum,
        "maximum": maximum,
        "exclusiveMinimum": exclusive_minimum,
        "minLength": min_length,
    }
    meta = {
        "doc": doc,
        "bounds": {k: v for k, v in bounds.items() if v is not None},
        "item_bounds": {} if item_min_length is None else {"minLength": item_min_length},
        "json_schema": json_schema,
    }
    return field(default=default, metadata=meta)


def config_section(key: str) -> Callable[[type[S]], type[S]]:
    """Mark a frozen dataclass as the ``key:`` section of the config file (for a reward: its registry key).

    The class may define ``check(raw) -> (key, message) | None``, a static method that sees the section's raw
    mapping (possibly partial: one file's or one ``config=`` argument's keys) for rules across fields.
    """

    def mark(cls: type[S]) -> type[S]:
        check_declared(cls)
        cls.SECTION = key  # type: ignore[attr-defined]
        return cls

    return mark


def check_declared(cls: type) -> None:
    """Raise TypeError unless ``cls`` is a frozen dataclass whose every field (nested too) is a :func:`setting`."""
    if not (dataclasses.is_dataclass(cls) and cls.__dataclass_params__.frozen):  # type: ignore[attr-defined]
        raise TypeError(f"{cls.__qualname__}: a config section must be a frozen dataclass")
    for f in dataclasses.fields(cls):
        if not f.metadata.get("doc"):
            raise TypeError(f"{cls.__qualname__}.{f.name}: declare it with setting(default, doc, ...)")
        if dataclasses.is_dataclass(f.default):
            check_declared(type(f.default))


@cache
def hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def object_schema(cls: type) -> dict[str, Any]:
    """The JSON Schema of a section (or of a nested settings class): an object of exactly its fields."""
    props = {f.name: field_schema(cls, f) for f in dataclasses.fields(cls)}
    return {"type": "object", "additionalProperties": False, "properties": props}


def field_schema(owner: type, f: dataclasses.Field[Any]) -> dict[str, Any]:
    if f.metadata.get("json_schema") is not None:
        return copy.deepcopy(dict(f.metadata["json_schema"]))
    out = _type_schema(hints(owner)[f.name], f.metadata.get("item_bounds", {}))
    out.update(f.metadata.get("bounds", {}))
    return out


_SCALARS = {bool: "boolean", int: "integer", float: "number", str: "string"}


def _type_schema(hint: Any, item_bounds: Mapping[str, Any]) -> dict[str, Any]:
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if hint in _SCALARS:
        return {"type": _SCALARS[hint]}
    if origin is Literal:
        return {"enum": list(args)}
    if origin in (typing.Union, types.UnionType) and type(None) in args:
        (inner,) = [a for a in args if a is not type(None)]
        out = _type_schema(inner, item_bounds)
        if "enum" in out:
            out["enum"] = [*out["enum"], None]
        else:
            out["type"] = [out["type"], "null"]
        return out
    if origin is tuple and len(args) == 2 and args[1] is Ellipsis:
        return {"type": "array", "items": {**_type_schema(args[0], {}), **item_bounds}}
    if dataclasses.is_dataclass(hint):
        return object_schema(hint)
    raise TypeError(f"config fields cannot be {hint!r}; give setting(..., json_schema=...)")


def plain(value: Any) -> Any:
    """A dataclass as the YAML/JSON data it is written as: dicts and lists."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, Mapping):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    return value


def defaults_of(cls: type) -> dict[str, Any]:
    """The declared defaults as data (from the fields, not an instance: ``__post_init__`` may resolve some)."""
    return {f.name: plain(f.default) for f in dataclasses.fields(cls)}


def build(cls: type[S], raw: Mapping[str, Any]) -> S:
    """The dataclass from a complete, validated mapping. Lists become tuples, and numbers take the field's type:
    ``timeout_s: 60`` is 60.0 and ``max_turns: 30.0`` (an integer to JSON Schema) is 30; nothing else is converted."""
    values = {}
    for f in dataclasses.fields(cls):  # type: ignore[arg-type]
        value, hint = raw[f.name], hints(cls)[f.name]
        kinds = (hint, *typing.get_args(hint))
        number = isinstance(value, (int, float)) and not isinstance(value, bool)
        if dataclasses.is_dataclass(hint):
            value = build(hint, value)
        elif typing.get_origin(hint) is tuple:
            value = tuple(value)
        elif number and float in kinds and isinstance(value, int):
            value = float(value)
        elif number and int in kinds and isinstance(value, float):
            value = int(value)  # validated: a float here has no fractional part
        values[f.name] = value
    return cls(**values)


# --------------------------------------------------------------------------------------------------------------------
# The declarations in words, for messages and the generated reference


def yaml_scalar(value: Any) -> str:
    """``value`` as one line of YAML (flow style for lists and mappings)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        is_plain = value and yaml.safe_load(value) == value and not any(c in value for c in ":#{}[],&*!|>'\"%@`")
        return value if is_plain else yaml.safe_dump(value, default_style='"', allow_unicode=True).strip()
    if isinstance(value, list):
        return "[" + ", ".join(yaml_scalar(v) for v in value) + "]"
    if isinstance(value, Mapping):
        return "{" + ", ".join(f"{k}: {yaml_scalar(v)}" for k, v in value.items()) + "}"
    raise TypeError(f"cannot write {value!r} as YAML")


def allowed(owner: type, f: dataclasses.Field[Any]) -> str:
    """The field's values in words, from its schema: ``number in [0, 1]``, ``chars | tokens``."""
    return describe(field_schema(owner, f))


def describe(schema: Mapping[str, Any]) -> str:
    if "enum" in schema:
        return " | ".join(yaml_scalar(v) for v in schema["enum"])
    kinds = schema.get("type")
    kinds = [kinds] if isinstance(kinds, str) else list(kinds or [])
    nullable = "null" in kinds
    kinds = [k for k in kinds if k != "null"]
    kind = kinds[0] if kinds else "any"
    if kind == "object" and "properties" in schema:
        text = "mapping of " + ", ".join(schema["properties"])
    elif kind == "object":
        text = "mapping"
    elif kind == "array":
        text = f"list of {describe(schema.get('items', {}))}s"
    elif kind == "string" and schema.get("minLength"):
        text = "non-empty string"
    elif kind == "boolean":
        text = "true | false"
    else:
        text = " ".join(p for p in (kind, _number_range(schema)) if p)
    return f"{text} | null" if nullable else text


def _number_range(schema: Mapping[str, Any]) -> str:
    lo, hi = schema.get("minimum"), schema.get("maximum")
    xlo = schema.get("exclusiveMinimum")
    if (lo is not None or xlo is not None) and hi is not None:
        return f"in {'(' if xlo is not None else '['}{_num(xlo if xlo is not None else lo)}, {_num(hi)}]"
    if xlo is not None:
        return f"> {_num(xlo)}"
    if lo is not None:
        return f">= {_num(lo)}"
    return ""


def _num(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else str(x)
