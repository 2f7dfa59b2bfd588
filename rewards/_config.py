"""Reward configuration: each reward declares its own section; this module reads, checks and documents them.

Where a setting lives:

- A reward's settings are a frozen dataclass next to its formula, in the reward's own file, marked with
  ``@config_section("<key>")``; ``<key>`` is the section's name in the YAML file and the reward's registry key
  (``ThinkLengthConfig`` in ``rewards/think_length.py`` is the ``think_length:`` section). Each field is a
  :func:`setting`: its default, its meaning and its range.
- The expert-name threshold is one section, ``expert_match`` (``ExpertMatchConfig`` in ``rewards/_experts.py``),
  read by ExpertMatch, PlanCoverage and every planning reward's gold check.
- Settings every planning reward shares (answer schema, similarity backend) are :class:`SharedConfig`, top-level.
- ``user_sim:`` and ``rollout:`` belong to the multi-turn plugins, which check them when they are built
  (``src/rewardkit/loop/user_sim/config.py``, ``src/rewardkit/loop/config.py``); here they only have to be mappings.

Everything else is derived from those declarations: the defaults, the validation (an unknown key names the valid
ones; types, ranges and finiteness name the file and the dotted key), the example file
``recipes/planning/reward_config.yaml`` and the README's key table. ``tests/test_config_drift.py`` fails when the
two files differ from what the declarations generate::

    python -m rewardkit.rewards._config --write-example   # rewrite recipes/planning/reward_config.yaml
    python -m rewardkit.rewards._config --table           # print the README's Markdown key table
    python -m rewardkit.rewards._config --check           # exit 1 if the example file is out of date

Values come from the defaults, then the YAML file named by ``$REWARDKIT_CONFIG`` (read and parsed once per process
and file version: the cache is keyed by the path and the file's mtime), then a reward's ``config=`` argument.
A reward reads its section with ``self.config.section(ThinkLengthConfig)`` (or ``self.config.think_length``).
Code that must not depend on the environment (the data builders) builds its config with :meth:`RewardConfig.of`.
"""

from __future__ import annotations

import argparse
import collections
import copy
import dataclasses
import importlib
import math
import os
import sys
import threading
import types
import typing
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any, ClassVar, Literal, TypeVar

import yaml
from jsonschema import Draft202012Validator

ENV_VAR = "REWARDKIT_CONFIG"

# The modules that declare config sections, in the order the example file and the README table list them.
SECTION_MODULES = (
    "rewardkit.rewards.think_length",
    "rewardkit.rewards.think_quality",
    "rewardkit.rewards.rewrite_similarity",
    "rewardkit.rewards._experts",  # expert_match: shared by ExpertMatch, PlanCoverage and the gold checks
    "rewardkit.rewards.plan_coverage",
    "rewardkit.rewards.task_completion",
)

# Sections owned by the multi-turn plugins: accepted here as mappings, checked by their own loaders.
PLUGIN_SECTIONS = {
    "user_sim": (
        "rewardkit.loop.user_sim.config",
        "the user simulator of multi-turn rollouts (see recipes/tau2/mua_rl_config.yaml)",
    ),
    "rollout": (
        "rewardkit.loop.config",
        "when a multi-turn episode stops: turns, tokens, tool errors (see recipes/tau2/mua_rl_config.yaml)",
    ),
}

EXAMPLE_FILE = "planning/reward_config.yaml"  # under recipes/
WRITE_HINT = "python -m rewardkit.rewards._config --write-example"
TABLE_HINT = "python -m rewardkit.rewards._config --table"
README_BEGIN = "<!-- rewardkit:config-table:begin (generated: python -m rewardkit.rewards._config --table) -->"
README_END = "<!-- rewardkit:config-table:end -->"

_EXAMPLE_HEADER = f"""\
# rewardkit reward configuration for the merchant planner (docs/planning_rewards.md).
# Point REWARDKIT_CONFIG at this file (a recipe's ENV block does it); every key
# is optional and falls back to the default shown here.
#
# Generated from the config dataclasses next to each reward (rewards/_config.py explains where);
# do not edit by hand: {WRITE_HINT}
"""


class ConfigError(ValueError):
    """A configuration value is unknown, mistyped or out of range."""


# --------------------------------------------------------------------------------------------------------------------
# Declaring settings


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


_SECTIONS: dict[str, type] = {}
_LOCK = threading.Lock()
S = TypeVar("S")


def config_section(key: str) -> Callable[[type[S]], type[S]]:
    """Mark a frozen dataclass as the ``key:`` section of the config file (``key`` = the reward's registry key).

    The class may define ``check(raw) -> (key, message) | None``, a static method that sees the section's raw
    mapping (possibly partial: one file's or one ``config=`` argument's keys) for rules across fields.
    """

    def mark(cls: type[S]) -> type[S]:
        if not (dataclasses.is_dataclass(cls) and cls.__dataclass_params__.frozen):  # type: ignore[attr-defined]
            raise TypeError(f"{cls.__qualname__}: a config section must be a frozen dataclass")
        _check_documented(cls)
        cls.SECTION = key  # type: ignore[attr-defined]
        with _LOCK:
            _SECTIONS[key] = cls
        return cls

    return mark


def _check_documented(cls: type) -> None:
    for f in dataclasses.fields(cls):
        if not f.metadata.get("doc"):
            raise TypeError(f"{cls.__qualname__}.{f.name}: declare it with setting(default, doc, ...)")
        if dataclasses.is_dataclass(f.default):
            _check_documented(type(f.default))


@dataclass(frozen=True)
class SharedConfig:
    """Top-level settings every planning reward shares: the answer schema and the similarity backend."""

    SECTION: ClassVar[str] = ""  # top level, not a section

    schema: str = setting(
        "zh",
        'Answer JSON: `zh` = {"补全后的问题", "plan": [{"专家", "处理问题", "depends_on"?}]}, `en`, '
        "or a JSON Schema file (which also needs `schema_keys`).",
        min_length=1,
    )
    schema_keys: Mapping[str, str] | None = setting(
        None,
        "For a JSON Schema file: the answer's field names, {rewrite, plan, expert, tasks}.",
        json_schema={
            "type": ["object", "null"],
            "additionalProperties": False,
            # rewardkit.rewards._schema.KEY_NAMES
            "properties": {k: {"type": "string"} for k in ("rewrite", "plan", "expert", "tasks")},
        },
    )
    backend: Literal["lexical", "embedding"] = setting(
        "lexical",
        "Similarity for RewriteSimilarity and PlanCoverage: `lexical` (rapidfuzz, no model) "
        "or `embedding` (sentence-transformers).",
    )
    embedding_model: str | None = setting(
        None,
        "Local sentence-transformers directory for `backend: embedding`; loaded once per process, "
        "outside DeepSpeed ZeRO-3 partitioning.",
    )
    embedding_device: str = setting("cpu", "Device of the embedding model.", min_length=1)

    @staticmethod
    def check(raw: Mapping[str, Any]) -> tuple[str, str] | None:
        if raw.get("backend") == "embedding" and not raw.get("embedding_model"):
            return "embedding_model", "backend 'embedding' needs a local sentence-transformers model path"
        return None


# --------------------------------------------------------------------------------------------------------------------
# What the declarations derive


@dataclass(frozen=True)
class _Catalogue:
    sections: tuple[type, ...]  # in SECTION_MODULES order
    schema: dict[str, Any]
    validator: Draft202012Validator
    defaults: dict[str, Any]


def sections() -> tuple[type, ...]:
    """Every declared section class, in the order the example file lists them."""
    return _catalogue().sections


@cache
def _catalogue() -> _Catalogue:
    for module in SECTION_MODULES:
        importlib.import_module(module)
    with _LOCK:
        found = list(_SECTIONS.values())
    order = {m: i for i, m in enumerate(SECTION_MODULES)}
    ordered = tuple(sorted(found, key=lambda c: order.get(c.__module__, len(order))))
    clash = {c.SECTION for c in ordered} & ({f.name for f in dataclasses.fields(SharedConfig)} | set(PLUGIN_SECTIONS))
    if clash:
        raise TypeError(f"config sections {sorted(clash)} clash with top-level keys")
    schema = _object_schema(SharedConfig)
    for cls in ordered:
        schema["properties"][cls.SECTION] = _object_schema(cls)
    for key in PLUGIN_SECTIONS:
        schema["properties"][key] = {"type": "object"}
    defaults = _plain(SharedConfig())
    defaults.update({cls.SECTION: _plain(cls()) for cls in ordered})
    defaults.update({key: {} for key in PLUGIN_SECTIONS})
    return _Catalogue(ordered, schema, Draft202012Validator(schema), defaults)


@cache
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def _object_schema(cls: type) -> dict[str, Any]:
    hints = _hints(cls)
    props = {f.name: _field_schema(f, hints[f.name]) for f in dataclasses.fields(cls)}
    return {"type": "object", "additionalProperties": False, "properties": props}


def _field_schema(f: dataclasses.Field[Any], hint: Any) -> dict[str, Any]:
    if f.metadata.get("json_schema") is not None:
        return copy.deepcopy(dict(f.metadata["json_schema"]))
    out = _type_schema(hint, f.metadata.get("item_bounds", {}))
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
        out["type"] = [out["type"], "null"]
        return out
    if origin is tuple and len(args) == 2 and args[1] is Ellipsis:
        return {"type": "array", "items": {**_type_schema(args[0], {}), **item_bounds}}
    if dataclasses.is_dataclass(hint):
        return _object_schema(hint)
    raise TypeError(f"config fields cannot be {hint!r}; give setting(..., json_schema=...)")


def _plain(value: Any) -> Any:
    """A dataclass as the YAML/JSON data it is written as: dicts and lists."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, Mapping):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def _build(cls: type[S], raw: Mapping[str, Any]) -> S:
    """The dataclass from a complete, validated mapping; values are kept as given (no coercion)."""
    hints = _hints(cls)
    values = {}
    for f in dataclasses.fields(cls):  # type: ignore[arg-type]
        value, hint = raw[f.name], hints[f.name]
        if dataclasses.is_dataclass(hint):
            value = _build(hint, value)
        elif typing.get_origin(hint) is tuple:
            value = tuple(value)
        values[f.name] = value
    return cls(**values)


# Section classes that used to be defined here, and where they live now.
_MOVED = {
    "ThinkLengthConfig": "rewardkit.rewards.think_length",
    "ThinkQualityConfig": "rewardkit.rewards.think_quality",
    "PlanCoverageConfig": "rewardkit.rewards.plan_coverage",
}


def __getattr__(name: str) -> Any:
    # DEFAULTS is derived from the sections, which import this module: it is computed on first use.
    if name == "DEFAULTS":
        return copy.deepcopy(_catalogue().defaults)
    if name in _MOVED:
        return getattr(importlib.import_module(_MOVED[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# --------------------------------------------------------------------------------------------------------------------
# The loaded configuration


# Old flat names of RewardConfig, kept read-only for callers written before the sections (deprecated).
DEPRECATED_ALIASES = {
    "rewrite_alpha": ("rewrite_similarity", "alpha"),
    "rewrite_cjk_units": ("rewrite_similarity", "cjk_units"),
    "fuzzy_threshold": ("expert_match", "fuzzy_threshold"),
    "require_outputs": ("task_completion", "require_outputs"),
}


@dataclass(frozen=True)
class RewardConfig:
    """The whole configuration: :class:`SharedConfig` plus one instance of every declared section.

    ``cfg.section(ThinkLengthConfig)`` is a reward's section, typed; ``cfg.think_length`` is the same by key.
    The shared settings read as top-level attributes too (``cfg.schema``, ``cfg.backend``), as in the YAML.
    """

    shared: SharedConfig
    sections: Mapping[str, Any]  # section key -> its dataclass instance

    def section(self, cls: type[S]) -> S:
        """The section that ``cls`` declares (``cls.SECTION``)."""
        return typing.cast(S, self.sections[cls.SECTION])  # type: ignore[attr-defined]

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):  # pickle and copy probe for dunders on a bare instance
            raise AttributeError(name)
        sections = self.__dict__.get("sections", {})
        if name in sections:
            return sections[name]
        shared = self.__dict__.get("shared")
        if shared is not None and name in _SHARED_FIELDS:
            return getattr(shared, name)
        if name in DEPRECATED_ALIASES:
            key, attr = DEPRECATED_ALIASES[name]
            return getattr(sections[key], attr)
        raise AttributeError(f"{type(self).__name__} has no setting or section {name!r}")

    @classmethod
    def of(cls, *parts: Any) -> RewardConfig:
        """The defaults with whole sections replaced by ``parts`` (instances of SharedConfig or of a section class),
        checked like a file; never reads ``$REWARDKIT_CONFIG``. For code whose output must not depend on the
        environment, such as the data builders."""
        raw = copy.deepcopy(_catalogue().defaults)
        for part in parts:
            if isinstance(part, SharedConfig):
                raw.update(_plain(part))
            else:
                raw[type(part).SECTION] = _plain(part)
        _validate(raw, "code")
        return _from_raw(raw)


_SHARED_FIELDS = frozenset(f.name for f in dataclasses.fields(SharedConfig))


def _from_raw(raw: Mapping[str, Any]) -> RewardConfig:
    built = {cls.SECTION: _build(cls, raw[cls.SECTION]) for cls in _catalogue().sections}
    shared = _build(SharedConfig, {k: raw[k] for k in _SHARED_FIELDS})
    return RewardConfig(shared=shared, sections=built)


# --------------------------------------------------------------------------------------------------------------------
# Validation


def _merge(base: dict[str, Any], override: Mapping[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(base)
    for key, value in override.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), dict):
            out[key] = _merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def _fail(source: str, key: str, message: str) -> ConfigError:
    return ConfigError(f"{source}: {key or '<root>'}: {message}")


def _non_finite(value: Any, path: tuple[str, ...] = (), seen: frozenset[int] = frozenset()) -> tuple[str, Any] | None:
    """The dotted key and value of the first NaN or infinity under ``value``, if any.

    JSON Schema's ``number`` admits NaN and infinities, and NaN passes every
    ``minimum``/``maximum`` (all comparisons are false): only this catches them.
    ``seen`` guards against YAML anchors that make a list contain itself.
    """
    if isinstance(value, float) and not math.isfinite(value):
        return ".".join(path), value
    if id(value) in seen or not isinstance(value, (Mapping, list)):
        return None
    seen = seen | {id(value)}
    items = value.items() if isinstance(value, Mapping) else enumerate(value)
    for key, item in items:
        found = _non_finite(item, (*path, str(key)), seen)
        if found is not None:
            return found
    return None


def _field_at(path: list[str]) -> dataclasses.Field[Any] | None:
    """The declared field at a dotted path, if the path names one."""
    if not path:
        return None
    by_key = {cls.SECTION: cls for cls in _catalogue().sections}
    cls: Any = by_key.get(path[0])
    rest = path[1:]
    if cls is None:
        cls, rest = SharedConfig, path
    for i, name in enumerate(rest):
        fields = {f.name: f for f in dataclasses.fields(cls)}
        if name not in fields:
            return None
        if i == len(rest) - 1:
            return fields[name]
        cls = _hints(cls)[name]
        if not dataclasses.is_dataclass(cls):
            return None
    return None


def _expected(path: list[str]) -> str:
    found = _field_at(path)
    if found is None:
        return f"every key, its default and its meaning are in recipes/{EXAMPLE_FILE}"
    return f"expected {_allowed(found)} (default {_yaml_scalar(_plain(found.default))}): {found.metadata['doc']}"


def _validate(raw: Mapping[str, Any], source: str) -> None:
    bad = _non_finite(raw)
    if bad is not None:
        key, value = bad
        raise _fail(source, key, f"{value!r} is not a finite number; every numeric setting must be finite")
    for error in sorted(_catalogue().validator.iter_errors(raw), key=lambda e: list(map(str, e.absolute_path))):
        path = list(map(str, error.absolute_path))
        key = ".".join(path)
        if error.validator == "additionalProperties":
            allowed = sorted(error.schema.get("properties", {}))
            raise _fail(source, key, f"{error.message}; valid keys here are {allowed}")
        raise _fail(source, key, f"{error.message}; {_expected(path)}")
    for cls in (*_catalogue().sections, SharedConfig):
        section = raw.get(cls.SECTION, {}) if cls.SECTION else raw
        check = getattr(cls, "check", None)
        found = check(section) if check is not None and isinstance(section, Mapping) else None
        if found is not None:
            key, message = found
            raise _fail(source, f"{cls.SECTION}.{key}" if cls.SECTION else key, message)


# --------------------------------------------------------------------------------------------------------------------
# Reading the file


def _read_yaml(file: Path, name: str) -> Any:
    """The YAML in ``file``; every way of failing is a ConfigError naming ``name`` (and the line, for syntax)."""
    if file.is_dir():
        raise ConfigError(f"{name}: is a directory; point it at a YAML file")
    if not file.is_file():
        raise ConfigError(f"{name}: file not found; point it at a YAML file or unset it")
    try:
        text = file.read_text(encoding="utf-8-sig")  # -sig: a leading BOM is not part of the YAML
    except UnicodeDecodeError as exc:
        raise ConfigError(
            f"{name}: not UTF-8 text (byte {exc.start} is {exc.object[exc.start]:#04x}); save it as UTF-8"
        ) from exc
    except OSError as exc:
        raise ConfigError(f"{name}: cannot be read ({exc.strerror or exc}); check its permissions") from exc
    try:
        return yaml.safe_load(text)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        at = f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""
        raise ConfigError(f"{name}: invalid YAML at {at}{exc.problem or exc.context}") from exc
    except (yaml.YAMLError, ValueError, RecursionError) as exc:  # ValueError: a date such as 2020-13-01
        raise ConfigError(f"{name}: invalid YAML: {exc}") from exc


# Parsed files by (path, mtime, size, inode): each version of a file is read once per process. Failures are not
# kept, so a fixed file is read again; a few entries are enough (one file per run, a handful in tests).
_FILES: collections.OrderedDict[tuple[Any, ...], dict[str, Any]] = collections.OrderedDict()
_FILES_MAX = 8


def _file_key(path: str | os.PathLike[str]) -> tuple[Any, ...] | None:
    try:
        st = os.stat(path)
    except (OSError, ValueError):
        return None
    return (os.fspath(path), st.st_mtime_ns, st.st_ctime_ns, st.st_size, st.st_ino, st.st_dev)


def read_config_file(path: str | os.PathLike[str] | None = None) -> tuple[dict[str, Any], str]:
    """The YAML mapping in ``path`` (default: ``$REWARDKIT_CONFIG``; ``{}`` if unset) and its name for messages.

    Each version of a file is parsed once per process; the caller gets its own copy.
    """
    from_env = path is None
    path = path if path is not None else os.environ.get(ENV_VAR) or None
    if path is None:
        return {}, "config"
    key = _file_key(path)
    with _LOCK:
        cached = _FILES.get(key) if key is not None else None
        if cached is not None:
            _FILES.move_to_end(key)  # type: ignore[arg-type]
    if cached is None:
        loaded = _read_yaml(Path(path), f"{ENV_VAR}={path!s}" if from_env else str(path))
        if loaded is None:  # an empty file (or only comments) means "all defaults"
            loaded = {}
        if not isinstance(loaded, Mapping):
            raise ConfigError(f"{path}: the top level must be a mapping of config keys; got {type(loaded).__name__}")
        cached = dict(loaded)
        if key is not None:
            with _LOCK:
                _FILES[key] = cached
                while len(_FILES) > _FILES_MAX:
                    _FILES.popitem(last=False)
    return copy.deepcopy(cached), str(path)


def clear_file_cache() -> None:
    """Forget the parsed files (a test that rewrites one file within one mtime tick may need it)."""
    with _LOCK:
        _FILES.clear()


def load_config(overrides: Mapping[str, Any] | None = None, path: str | os.PathLike[str] | None = None) -> RewardConfig:
    """Defaults <- YAML file (``path`` or ``$REWARDKIT_CONFIG``) <- ``overrides``, checked at each step."""
    raw = _catalogue().defaults
    loaded, source = read_config_file(path)
    if loaded:
        _validate(loaded, source)
        raw = _merge(raw, loaded)
    if overrides:
        _validate(overrides, "overrides")
        raw = _merge(raw, overrides)
    _validate(raw, source)
    return _from_raw(raw)


def load_section(cls: type[S], config: RewardConfig | Mapping[str, Any] | None = None) -> S:
    """One section: of ``config`` if it is a RewardConfig, else of ``load_config(config)``."""
    return (config if isinstance(config, RewardConfig) else load_config(config)).section(cls)


# --------------------------------------------------------------------------------------------------------------------
# Documentation derived from the declarations


def _yaml_scalar(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        plain = value and yaml.safe_load(value) == value and not any(c in value for c in ":#{}[],&*!|>'\"%@`")
        return value if plain else yaml.safe_dump(value, default_style='"', allow_unicode=True).strip()
    if isinstance(value, list):
        return "[" + ", ".join(_yaml_scalar(v) for v in value) + "]"
    if isinstance(value, Mapping):
        return "{" + ", ".join(f"{k}: {_yaml_scalar(v)}" for k, v in value.items()) + "}"
    raise TypeError(f"cannot write {value!r} as YAML")


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


def _allowed(f: dataclasses.Field[Any]) -> str:
    """The field's values in words, from its schema: ``number in [0, 1]``, ``chars | tokens``."""
    hint = None if f.metadata.get("json_schema") is not None else _hints(_owner_of(f))[f.name]
    return _describe(_field_schema(f, hint))


def _describe(schema: Mapping[str, Any]) -> str:
    if "enum" in schema:
        return " | ".join(_yaml_scalar(v) for v in schema["enum"])
    kinds = schema.get("type")
    kinds = [kinds] if isinstance(kinds, str) else list(kinds or [])
    nullable = "null" in kinds
    kinds = [k for k in kinds if k != "null"]
    kind = kinds[0] if kinds else "any"
    if kind == "object" and "properties" in schema:
        text = "mapping of " + ", ".join(schema["properties"])
    elif kind == "array":
        text = f"list of {_describe(schema.get('items', {}))}s"
    elif kind == "string" and schema.get("minLength"):
        text = "non-empty string"
    elif kind == "boolean":
        text = "true | false"
    else:
        text = " ".join(p for p in (kind, _number_range(schema)) if p)
    return f"{text} | null" if nullable else text


_OWNERS: dict[int, type] = {}


def _owner_of(f: dataclasses.Field[Any]) -> type:
    if not _OWNERS:
        stack: list[type] = [SharedConfig, *_catalogue().sections]
        while stack:
            cls = stack.pop()
            for g in dataclasses.fields(cls):
                _OWNERS[id(g)] = cls
                if dataclasses.is_dataclass(g.default):
                    stack.append(type(g.default))
    return _OWNERS[id(f)]


def _module_file(cls: type) -> str:
    return cls.__module__.removeprefix("rewardkit.").replace(".", "/") + ".py"


def _rows(cls: type, prefix: str = "") -> Iterator[tuple[str, dataclasses.Field[Any]]]:
    for f in dataclasses.fields(cls):
        if dataclasses.is_dataclass(f.default):
            yield from _rows(type(f.default), f"{prefix}{f.name}.")
        else:
            yield f"{prefix}{f.name}", f


def _comment(text: str, indent: str, width: int = 118) -> list[str]:
    words, lines, line = text.split(), [], ""
    for word in words:
        if line and len(indent) + 2 + len(line) + 1 + len(word) > width:
            lines.append(line)
            line = word
        else:
            line = f"{line} {word}" if line else word
    lines.append(line)
    return [f"{indent}# {x}" for x in lines]


def _example_fields(cls: type, indent: str) -> list[str]:
    out: list[str] = []
    for f in dataclasses.fields(cls):
        out += _comment(f.metadata["doc"], indent)
        if dataclasses.is_dataclass(f.default):
            out.append(f"{indent}{f.name}:")
            out += _example_fields(type(f.default), indent + "  ")
        else:
            out.append(f"{indent}{f.name}: {_yaml_scalar(_plain(f.default))}  # {_allowed(f)}")
    return out


def _first_line(cls: type) -> str:
    return (cls.__doc__ or "").strip().splitlines()[0]


def render_example() -> str:
    """The text of ``recipes/planning/reward_config.yaml``: every key with its default and meaning."""
    out = [_EXAMPLE_HEADER.rstrip("\n"), ""]
    out += _comment(f"{_first_line(SharedConfig)} ({_module_file(SharedConfig)})", "")
    out += _example_fields(SharedConfig, "")
    for cls in _catalogue().sections:
        out.append("")
        out += _comment(f"{cls.SECTION}: {_first_line(cls)} ({cls.__name__}, {_module_file(cls)})", "")
        out.append(f"{cls.SECTION}:")
        out += _example_fields(cls, "  ")
    out.append("")
    for key, (module, meaning) in PLUGIN_SECTIONS.items():
        out += _comment(f"{key}: {meaning}; its keys are checked by {module}.", "")
    return "\n".join(out) + "\n"


def _md(text: str) -> str:
    return text.replace("|", "\\|")


def render_table() -> str:
    """The README's key table (Markdown): one row per key, with its default, its values and its meaning."""
    lines = ["| key | default | values | meaning |", "| --- | --- | --- | --- |"]
    groups: list[tuple[str, type]] = [("", SharedConfig)] + [(f"{c.SECTION}.", c) for c in _catalogue().sections]
    for prefix, cls in groups:
        where = f" ({cls.__name__}, `{_module_file(cls)}`)"
        for i, (key, f) in enumerate(_rows(cls, prefix)):
            meaning = f.metadata["doc"] + (where if i == 0 else "")
            default = f"`{_yaml_scalar(_plain(f.default))}`"
            lines.append(f"| `{key}` | {_md(default)} | {_md(_allowed(f))} | {_md(meaning)} |")
    for key, (module, meaning) in PLUGIN_SECTIONS.items():
        lines.append(
            f"| `{key}` | `{{}}` | mapping | {_md(meaning[:1].upper() + meaning[1:])}; checked by `{module}` |"
        )
    return "\n".join(lines) + "\n"


def readme_table_block() -> str:
    """The marker comments and the table between them, as the README carries them."""
    return f"{README_BEGIN}\n{render_table()}{README_END}\n"


def example_path() -> Path:
    # recipes/ sits next to rewards/ both in a checkout and in the installed package (rewardkit/recipes).
    return Path(__file__).resolve().parents[1] / "recipes" / EXAMPLE_FILE


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m rewardkit.rewards._config",
        description="Print or write what the reward config declarations generate (default: print the example).",
    )
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--write-example", action="store_true", help=f"rewrite recipes/{EXAMPLE_FILE}")
    group.add_argument("--check", action="store_true", help=f"exit 1 if recipes/{EXAMPLE_FILE} is out of date")
    group.add_argument("--table", action="store_true", help="print the README's key table with its markers")
    args = parser.parse_args(argv)
    path = example_path()
    if args.write_example:
        path.write_text(render_example(), encoding="utf-8")
        print(f"wrote {path}")
    elif args.check:
        current = path.read_text(encoding="utf-8") if path.is_file() else ""
        if current != render_example():
            print(f"{path} is out of date; run `{WRITE_HINT}`", file=sys.stderr)
            return 1
        print(f"{path} is up to date")
    elif args.table:
        sys.stdout.write(readme_table_block())
    else:
        sys.stdout.write(render_example())
    return 0


if __name__ == "__main__":
    # Run through the package's module, not this __main__ copy: the sections registered themselves there.
    from rewardkit.rewards._config import main as _main

    raise SystemExit(_main())
