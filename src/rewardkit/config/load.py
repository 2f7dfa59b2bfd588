"""Loading a configuration: a :class:`ConfigSchema` lists the sections it knows; it checks and builds them.

Each layer composes the schema of what it knows: the rewards theirs (``rewardkit.rewards.registry.config_schema()``,
which accepts the sections of the multi-turn loop as reserved keys that only have to be mappings), the loop the
whole file (``rewardkit.loop.config.RUN_SCHEMA``). Values come from the declared defaults, then the YAML file
(``path`` or ``$REWARDKIT_CONFIG``), then ``overrides``, then the flags a user gave; the config keeps each value's
source (:mod:`rewardkit.config.origin`). Each source is checked on its own and the merged result once more, so a
message names the source and the dotted key: an unknown key names the valid ones, a wrong type or range names the
expected values, the default and the meaning, and NaN or infinity is refused anywhere.
"""

from __future__ import annotations

import copy
import dataclasses
import os
import typing
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cache, cached_property
from typing import Any, TypeVar

from jsonschema import Draft202012Validator

from rewardkit.config.declare import (
    ConfigError,
    allowed,
    check_declared,
    defaults_of,
    describe,
    hints,
    object_schema,
    plain,
    yaml_scalar,
)
from rewardkit.config.declare import build as build_section
from rewardkit.config.origin import nested, record
from rewardkit.config.read import read_config_file
from rewardkit.config.values import merge, non_finite

S = TypeVar("S")


@dataclass(frozen=True)
class Config:
    """A loaded configuration: the schema's top-level settings plus one instance of every section.

    ``cfg.section(ThinkLengthConfig)`` is a section, typed; ``cfg.think_length`` is the same by key. The top-level
    settings read as attributes too (``cfg.schema``, ``cfg.backend``), as in the YAML. ``cfg.origin(key)`` says
    where a setting's value came from.
    """

    shared: Any  # an instance of the schema's top-level class, or None
    sections: Mapping[str, Any]  # section key -> its dataclass instance
    # dotted key -> "default", the file's name, "overrides", "code" or the flag that gave the value
    origins: Mapping[str, str] = dataclasses.field(default_factory=dict, compare=False, repr=False)

    def origin(self, key: str) -> str:
        """Where the dotted setting ``key``'s value came from (``user_sim.timeout_s`` -> ``--user-timeout``)."""
        found = self.origins.get(key)
        if found is None:
            raise KeyError(
                f"{key!r} is no setting of this config; name one by its dotted key, e.g. "
                f"{next(iter(self.origins), 'rollout.max_turns')!r}"
            )
        return found

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
        if shared is not None and name in _field_names(type(shared)):
            return getattr(shared, name)
        raise AttributeError(f"{type(self).__name__} has no setting or section {name!r}")


@cache
def _field_names(cls: type) -> frozenset[str]:
    return frozenset(f.name for f in dataclasses.fields(cls))


class ConfigSchema:
    """The sections one layer reads: ``shared`` (top-level keys), ``sections`` (``key:`` mappings, in the order
    the reference lists them) and ``reserved`` (key -> meaning: sections owned by a higher layer, accepted here as
    any mapping). ``reference`` is the file that lists every key, named in messages."""

    def __init__(
        self,
        *,
        shared: type | None = None,
        sections: Sequence[type] = (),
        reserved: Mapping[str, str] | None = None,
        reference: str = "",
        config_class: type[Config] = Config,
    ) -> None:
        for cls in (*([shared] if shared is not None else []), *sections):
            check_declared(cls)
        keys = [getattr(cls, "SECTION", None) for cls in sections]
        if not all(keys):
            raise TypeError("every section needs @config_section(key)")
        top = list(_field_names(shared)) if shared is not None else []
        names = [*top, *keys, *(reserved or {})]
        clash = sorted({k for k in names if names.count(k) > 1})
        if clash:
            raise TypeError(f"config keys {clash} are declared twice")
        self.shared = shared
        self.sections: tuple[type, ...] = tuple(sections)
        self.reserved: dict[str, str] = dict(reserved or {})
        self.reference = reference
        self.config_class = config_class

    def __repr__(self) -> str:
        return f"ConfigSchema({', '.join(c.SECTION for c in self.sections)})"  # type: ignore[attr-defined]

    @cached_property
    def json_schema(self) -> dict[str, Any]:
        schema = object_schema(self.shared) if self.shared is not None else _empty_object()
        for cls in self.sections:
            schema["properties"][cls.SECTION] = object_schema(cls)
        for key in self.reserved:
            schema["properties"][key] = {"type": "object"}
        return schema

    @cached_property
    def _validator(self) -> Draft202012Validator:
        return Draft202012Validator(self.json_schema)

    @cached_property
    def _defaults(self) -> dict[str, Any]:
        out = defaults_of(self.shared) if self.shared is not None else {}
        out.update({cls.SECTION: defaults_of(cls) for cls in self.sections})
        out.update({key: {} for key in self.reserved})
        return out

    @property
    def defaults(self) -> dict[str, Any]:
        """Every key with its default, as the YAML data it is written as (a copy)."""
        return copy.deepcopy(self._defaults)

    # ----------------------------------------------------------------------------------------------------------------

    def load(
        self,
        overrides: Mapping[str, Any] | None = None,
        path: str | os.PathLike[str] | None = None,
        *,
        flags: Mapping[str, tuple[str, Any]] | None = None,
    ) -> Any:
        """Defaults <- YAML file (``path`` or ``$REWARDKIT_CONFIG``) <- ``overrides`` <- ``flags``, checked at each
        step. ``flags``: dotted key -> (flag, value), only the options the user gave; each is checked alone (type and
        range; the rules across keys on the merged result) and ``cfg.origin(key)`` names the flag."""
        return self.load_layers(self.layers(overrides, path), flags=flags)

    @staticmethod
    def layers(
        overrides: Mapping[str, Any] | None = None, path: str | os.PathLike[str] | None = None
    ) -> list[tuple[str, Mapping[str, Any]]]:
        """The sources :meth:`load` lays over the defaults, in order, each with its name for messages: the file
        (read here; ``{}`` when there is none), then ``overrides``."""
        loaded, source = read_config_file(path)
        return [(source, loaded), ("overrides", dict(overrides or {}))]

    def load_layers(
        self, layers: Sequence[tuple[str, Mapping[str, Any]]], *, flags: Mapping[str, tuple[str, Any]] | None = None
    ) -> Any:
        """:meth:`load` of sources already read (:meth:`layers`); the first one names the merged result."""
        raw, origins = self.defaults, {}
        record(origins, raw, "default")
        source = layers[0][0]
        for name, layer in layers:
            if layer:
                self.validate(layer, name)
                raw = merge(raw, layer)
                record(origins, layer, name)
        for key, (flag, value) in (flags or {}).items():
            layer = nested(key, value)
            self.validate(layer, flag, checks=False)
            raw = merge(raw, layer)
            record(origins, layer, flag)
        self.validate(raw, " with ".join([source, *(flag for flag, _ in (flags or {}).values())]))
        return self.build(raw, origins)

    def of(self, *parts: Any) -> Any:
        """The defaults with whole sections replaced by ``parts`` (instances of the top-level class or of a
        section), checked like a file; never reads ``$REWARDKIT_CONFIG``."""
        raw, origins = self.defaults, {}
        record(origins, raw, "default")
        for part in parts:
            shared = self.shared is not None and isinstance(part, self.shared)
            layer = plain(part) if shared else {type(part).SECTION: plain(part)}
            raw.update(layer)
            record(origins, layer, "code")
        self.validate(raw, "code")
        return self.build(raw, origins)

    def section(self, cls: type[S], raw: Any, source: str) -> S:
        """One section from its own mapping ``raw`` (a file's ``key:`` block; None: the defaults), checked as if
        it stood in a file named ``source``."""
        if cls not in self.sections:
            raise TypeError(f"{cls.__qualname__} is not a section of {self!r}")
        key = cls.SECTION  # type: ignore[attr-defined]
        if raw is None:
            raw = {}
        self.validate({key: raw}, source)
        merged = merge(self._defaults[key], raw)
        self.validate({key: merged}, source)
        return build_section(cls, merged)

    def build(self, raw: Mapping[str, Any], origins: Mapping[str, str] | None = None) -> Any:
        """The config from a complete, validated mapping (``origins``: where each value came from)."""
        built = {cls.SECTION: build_section(cls, raw[cls.SECTION]) for cls in self.sections}
        shared = None
        if self.shared is not None:
            shared = build_section(self.shared, {k: raw[k] for k in _field_names(self.shared)})
        return self.config_class(shared=shared, sections=built, origins=dict(origins or {}))

    # ----------------------------------------------------------------------------------------------------------------

    def validate(self, raw: Mapping[str, Any], source: str, checks: bool = True) -> None:
        """Raise one ConfigError, naming ``source`` and the dotted key, for the first thing wrong in ``raw``
        (``checks=False``: types and ranges only, not the sections' rules across keys)."""
        bad = non_finite(raw)
        if bad is not None:
            key, value = bad
            raise _fail(source, key, f"{value!r} is not a finite number; every numeric setting must be finite")
        for error in sorted(self._validator.iter_errors(raw), key=lambda e: list(map(str, e.absolute_path))):
            path = list(map(str, error.absolute_path))
            if error.validator == "additionalProperties":
                known = error.schema.get("properties", {})
                extra = sorted((str(k) for k in error.instance if k not in known), key=str)
                raise _fail(source, ".".join([*path, *extra[:1]]), f"unknown key; valid keys here are {sorted(known)}")
            raise _fail(source, ".".join(path), f"{error.message}; {self._expected(path)}")
        classes = [*self.sections, *([self.shared] if self.shared is not None else [])] if checks else []
        for cls in classes:
            section = raw.get(cls.SECTION, {}) if cls.SECTION else raw
            check = getattr(cls, "check", None)
            found = check(section) if check is not None and isinstance(section, Mapping) else None
            if found is not None:
                key, message = found
                raise _fail(source, f"{cls.SECTION}.{key}" if cls.SECTION else key, message)

    def field_at(self, path: Sequence[str]) -> tuple[type, dataclasses.Field[Any]] | type | None:
        """What a dotted path names: (owner class, field) for a setting, the class for a section, else None."""
        if not path:
            return None
        by_key = {cls.SECTION: cls for cls in self.sections}
        cls: Any = by_key.get(path[0])
        rest = list(path[1:])
        if cls is None:
            cls, rest = self.shared, list(path)
        if cls is None:
            return None
        if not rest:
            return cls
        for i, name in enumerate(rest):
            fields = {f.name: f for f in dataclasses.fields(cls)}
            if name not in fields:
                return None
            if i == len(rest) - 1:
                return cls, fields[name]
            cls = hints(cls)[name]
            if not dataclasses.is_dataclass(cls):
                return None
        return None

    def _expected(self, path: list[str]) -> str:
        where = f"every key, its default and its meaning are in {self.reference or 'the reference'}"
        found = self.field_at(path)
        if found is None:
            return where
        if isinstance(found, type):
            return f"expected {describe(object_schema(found))}; {where}"
        owner, f = found
        return f"expected {allowed(owner, f)} (default {yaml_scalar(plain(f.default))}): {f.metadata['doc']}"


def _empty_object() -> dict[str, Any]:
    return {"type": "object", "additionalProperties": False, "properties": {}}


def _fail(source: str, key: str, message: str) -> ConfigError:
    return ConfigError(f"{source}: {key or '<root>'}: {message}")
