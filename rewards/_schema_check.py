"""Load-time checks of a custom answer schema, so that nothing about it can fail mid-training.

jsonschema resolves ``$ref`` lazily, at the first instance that reaches it: an
unresolvable reference, or one that loops back to itself without reading the
instance, would only raise (RecursionError) at some later completion. Here
every reference is resolved once, against the schema's own document and the
JSON Schema meta-schemas (never the network), and in-place reference cycles
are refused. ``check_keys`` confirms that ``schema_keys`` name declared fields.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any
from urllib.parse import urljoin

from jsonschema_specifications import REGISTRY as META_SCHEMAS
from referencing import Registry, Resource
from referencing.exceptions import Unresolvable
from referencing.jsonschema import DRAFT202012

from rewardkit.config import ConfigError

if TYPE_CHECKING:
    from referencing._core import Resolver

# Keywords whose values are data, not subschemas: a "$ref" inside them is not a reference.
_DATA_KEYWORDS = frozenset({"const", "enum", "default", "examples"})
# Keywords that apply their subschemas to the same instance: a cycle through them never ends.
_IN_PLACE_LISTS = ("allOf", "anyOf", "oneOf")
_IN_PLACE_ONE = ("not", "if", "then", "else")
_MAX_HOPS = 16  # how far key checks follow $ref and combinators


def dotted(path: Sequence[Any]) -> str:
    return ".".join(map(str, path)) or "<root>"


def _root_id(schema: Any) -> str:
    return schema["$id"] if isinstance(schema, Mapping) and isinstance(schema.get("$id"), str) else ""


def registry_for(schema: Any) -> Registry:
    """The meta-schemas plus ``schema`` (and its ``$id`` subresources); no retrieval of anything else."""
    resource = Resource.from_contents(schema, default_specification=DRAFT202012)
    return META_SCHEMAS.with_resource(_root_id(schema), resource).crawl()


def _nodes(node: Any, base: str, path: tuple[str, ...] = ()) -> Iterator[tuple[str, Mapping[str, Any], str]]:
    """(dotted location, subschema, base URI in effect) for every object in the schema document."""
    if isinstance(node, Mapping):
        if isinstance(node.get("$id"), str):
            base = urljoin(base, node["$id"])
        yield dotted(path), node, base
        for key, value in node.items():
            if key not in _DATA_KEYWORDS:
                yield from _nodes(value, base, (*path, str(key)))
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from _nodes(value, base, (*path, str(i)))


def _in_place(node: Mapping[str, Any], resolver: Resolver) -> Iterator[tuple[Any, Resolver]]:
    for key in _IN_PLACE_LISTS:
        for sub in node.get(key) if isinstance(node.get(key), list) else ():
            yield sub, resolver
    for key in _IN_PLACE_ONE:
        yield node.get(key), resolver
    dependent = node.get("dependentSchemas")
    for sub in dependent.values() if isinstance(dependent, Mapping) else ():
        yield sub, resolver
    if isinstance(node.get("$ref"), str):
        try:
            resolved = resolver.lookup(node["$ref"])
        except Unresolvable:  # reached without the right base URI (a nested $id); checked on its own
            return
        yield resolved.contents, resolved.resolver


def _loops(node: Any, resolver: Resolver, state: dict[int, int]) -> bool:
    """Depth-first search of in-place edges; ``state``: 1 = on the current path, 2 = known to end."""
    if not isinstance(node, Mapping):
        return False
    mark = state.get(id(node))
    if mark is not None:
        return mark == 1
    state[id(node)] = 1
    if any(_loops(child, res, state) for child, res in _in_place(node, resolver)):
        return True
    state[id(node)] = 2
    return False


def check_references(name: str, schema: Any) -> Registry:
    """Resolve every ``$ref`` of ``schema`` now; refuse unresolvable ones and in-place cycles."""
    registry = registry_for(schema)
    nodes = list(_nodes(schema, _root_id(schema)))
    for where, node, base in nodes:
        dynamic = next((k for k in ("$dynamicRef", "$recursiveRef") if k in node), None)
        if dynamic is not None:  # its target depends on the evaluation path: not checkable at load, so refused
            raise ConfigError(f"schema: {name}: {dynamic} at {where} is not supported in an answer schema; use $ref")
        ref = node.get("$ref")
        if not isinstance(ref, str):
            continue
        try:
            registry.resolver(base).lookup(ref)
        except Unresolvable as exc:
            raise ConfigError(
                f"schema: {name}: $ref {ref!r} at {where} cannot be resolved ({type(exc).__name__}); only "
                "references into the same file (e.g. '#/$defs/step') and to JSON Schema meta-schemas are supported"
            ) from exc
    state: dict[int, int] = {}
    for where, node, base in nodes:
        try:
            looped = _loops(node, registry.resolver(base), state)
        except RecursionError as exc:
            raise ConfigError(f"schema: {name}: subschemas nested too deeply at {where}") from exc
        if looped:
            raise ConfigError(
                f"schema: {name}: $ref/allOf/anyOf/oneOf at {where} lead back to themselves without reading "
                "a value: validation would never end; break the cycle"
            )
    return registry


def _expand(node: Any, resolver: Resolver, hops: int = 0) -> Iterator[tuple[Mapping[str, Any], Resolver]]:
    """``node`` and every subschema it stands for through $ref and allOf/anyOf/oneOf."""
    if not isinstance(node, Mapping) or hops > _MAX_HOPS:
        return
    yield node, resolver
    for key in _IN_PLACE_LISTS:
        for sub in node.get(key) if isinstance(node.get(key), list) else ():
            yield from _expand(sub, resolver, hops + 1)
    if isinstance(node.get("$ref"), str):
        try:
            resolved = resolver.lookup(node["$ref"])
        except Unresolvable:  # as in _in_place
            return
        yield from _expand(resolved.contents, resolved.resolver, hops + 1)


def _children(nodes: list[tuple[Any, Resolver]], keyword: str, key: str | None = None) -> list[tuple[Any, Resolver]]:
    """The subschemas at ``properties[key]`` (``key`` given) or at ``keyword`` of ``nodes``, through references."""
    out = []
    for node, resolver in nodes:
        for part, res in _expand(node, resolver):
            child = part.get(keyword)
            if key is not None:
                child = child.get(key) if isinstance(child, Mapping) else None
            if isinstance(child, Mapping):
                out.append((child, res))
    return out


def _declared(nodes: list[tuple[Any, Resolver]]) -> tuple[set[str], list[str]] | None:
    """Property names and patterns that ``nodes`` declare; None when they declare none (any field may be right)."""
    names: set[str] = set()
    patterns: list[str] = []
    for node, resolver in nodes:
        for part, _ in _expand(node, resolver):
            properties, pattern_properties = part.get("properties"), part.get("patternProperties")
            names |= {str(n) for n in properties} if isinstance(properties, Mapping) else set()
            patterns += [str(p) for p in pattern_properties] if isinstance(pattern_properties, Mapping) else []
    return (names, patterns) if names or patterns else None


def _declares(field_name: str, names: set[str], patterns: list[str]) -> bool:
    if field_name in names:
        return True
    for pattern in patterns:
        try:
            if re.search(pattern, field_name):
                return True
        except re.error:  # an ECMA-262 pattern Python cannot compile: give it the benefit of the doubt
            return True
    return False


def check_keys(name: str, schema: Any, fields: Mapping[str, str]) -> None:
    """Each of ``fields`` (schema_keys: rewrite/plan/expert/tasks -> field) must be declared where the schema
    declares fields at all: rewrite and plan on the answer object, expert and tasks on the plan's items."""
    root = [(schema, registry_for(schema).resolver(_root_id(schema)))]
    steps = _children(_children(root, "properties", fields["plan"]), "items")
    levels = [(root, ("rewrite", "plan"), "the answer object"), (steps, ("expert", "tasks"), "the plan's items")]
    for nodes, keys, what in levels:
        declared = _declared(nodes)
        if declared is None:
            continue  # the schema leaves this level open
        for key in keys:
            if not _declares(fields[key], *declared):
                raise ConfigError(
                    f"schema_keys.{key}: field {fields[key]!r} is not declared for {what} in schema {name} "
                    f"(declared: {sorted(declared[0])}); fix schema_keys or the schema"
                )
