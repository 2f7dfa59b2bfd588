"""JSON Schema checks of tool arguments, as the harness words them (``ToolSpec.violation``).

:func:`schema_violation` checks arguments against a schema that comes from elsewhere (an MCP server's
tool listing), so that gold actions are checked against any domain's tools the same way.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError, best_match


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
    return Draft202012Validator(schema)


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
