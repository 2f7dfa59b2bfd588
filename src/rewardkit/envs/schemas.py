"""JSON Schema checks of tool arguments, as the harness words them (``ToolSpec.violation``).

:func:`schema_violation` checks arguments against a schema that comes from elsewhere (an MCP server's
tool listing), so that gold actions are checked against any domain's tools the same way.
"""

from __future__ import annotations

import contextlib
import functools
import json
from collections.abc import Mapping
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError, best_match
from referencing import Registry
from referencing.exceptions import Unresolvable
from referencing.jsonschema import DRAFT202012

# Keywords whose subschemas apply to the value itself, not to a part of it: a cycle of ``$ref`` through these alone
# never reaches a smaller value, so validating anything against it recurses without end.
_IN_PLACE_ONE = ("$ref", "not", "if", "then", "else")
_IN_PLACE_MANY = ("allOf", "anyOf", "oneOf")
DATA_KEYWORDS = ("const", "enum", "default", "examples")  # their values are data, never subschemas


def first_error(validator: Draft202012Validator, arguments: Any, root: str = "arguments") -> str | None:
    """The most relevant error of ``arguments``, as ``path: message`` (``root`` names the whole); None when they
    fit."""
    error = best_match(validator.iter_errors(arguments))
    if error is None:
        return None
    where = "/".join(str(p) for p in error.absolute_path) or root
    return f"{where}: {error.message[:300]}"


@functools.lru_cache(maxsize=256)
def _validator(schema_json: str) -> Draft202012Validator | None:
    schema = json.loads(schema_json)
    try:
        Draft202012Validator.check_schema(schema)
    except SchemaError:
        return None
    return None if ref_loop(schema) else Draft202012Validator(schema)


def _in_place(node: Mapping[str, Any], resolver: Any) -> list[Any]:
    """The subschemas ``node`` applies to the same value: its ``$ref``'s target, ``allOf``/``anyOf``/``oneOf``
    members, ``not``/``if``/``then``/``else``."""
    found = [node.get(k) for k in _IN_PLACE_ONE[1:]] + [m for k in _IN_PLACE_MANY for m in node.get(k) or ()]
    ref = node.get("$ref")
    if isinstance(ref, str):
        with contextlib.suppress(Unresolvable, ValueError):  # a ref that points nowhere is another check's to name
            found.append(resolver.lookup(ref).contents)
    return [f for f in found if isinstance(f, Mapping)]


def _subschemas(schema: Any) -> list[Mapping[str, Any]]:
    out, stack = [], [schema]
    while stack:
        node = stack.pop()
        if isinstance(node, list):
            stack += node
        elif isinstance(node, Mapping):
            out.append(node)
            stack += [v for k, v in node.items() if k not in DATA_KEYWORDS]
    return out


def ref_loop(schema: Any) -> str | None:
    """The ``$ref`` that leads back to itself without stepping into a part of the value (``{"$ref": "#"}``, two
    ``$defs`` naming each other), or None: a validator that reaches it recurses without end."""
    if not isinstance(schema, Mapping):
        return None
    resolver = Registry().with_resource("", DRAFT202012.create_resource(schema)).resolver()
    done: set[int] = set()  # nodes from which no loop is reachable
    for start in _subschemas(schema):
        path, stack = [start], [iter(_in_place(start, resolver))]
        while stack:
            step = next(stack[-1], None)
            if step is None:
                done.add(id(path.pop()))
                stack.pop()
            elif any(step is node for node in path):
                loop = path[next(i for i, node in enumerate(path) if node is step) :]
                ref = next((node["$ref"] for node in loop if "$ref" in node), "")
                return f"$ref {ref!r:.80} leads back to itself without stepping into a part of the value"
            elif id(step) not in done:
                path.append(step)
                stack.append(iter(_in_place(step, resolver)))
    return None


def schema_violation(schema: Mapping[str, Any], arguments: Mapping[str, Any]) -> str | None:
    """What ``schema`` refuses in ``arguments``; None when it accepts them or is no schema the validator reads
    (the server that listed it validates calls itself)."""
    try:
        validator = _validator(json.dumps(schema, sort_keys=True))
    except (TypeError, ValueError, RecursionError):  # not JSON at all
        return None
    return None if validator is None else first_error(validator, arguments)


def not_json(arguments: Mapping[str, Any]) -> str | None:
    """Why ``arguments`` is not plain JSON (an object of strings, finite numbers, lists, objects), or None."""
    try:
        json.dumps(arguments, allow_nan=False)
    except (TypeError, ValueError, RecursionError) as exc:
        return f"arguments: not JSON ({type(exc).__name__}: {str(exc)[:120]})"
    return None


def unencodable(value: Any) -> bool:
    """True if some string in ``value`` cannot be UTF-8 encoded (a lone surrogate from a JSON escape)."""
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return True
        return False
    if isinstance(value, Mapping):
        return any(unencodable(k) or unencodable(v) for k, v in value.items())
    if isinstance(value, list):
        return any(unencodable(v) for v in value)
    return False
