"""The tool contract every domain writes to: a tool's spec, the result of a call, the codes a refusal carries.

- :class:`Tool`: what every consumer reads of a tool, whether the harness runs it (:class:`ToolSpec`) or an MCP
  server lists it (``mcp_env.MCPToolSpec``);
- :class:`ToolSpec`: a tool the harness runs: ``fn(conn, **arguments)``, its JSON Schema, risk and gates;
- :func:`tool`: a ``ToolSpec`` from a function's signature and docstring (name, schema, description written once),
  and :func:`toolset`, the tools of a domain by name; :func:`arguments_schema` for a schema written by hand;
- :class:`ToolError` (a tool refusing a call), :class:`ResultCode` and :class:`ToolResult` (what a call returns).

The environments that run tools are in :mod:`rewardkit.envs.harness`.
"""

from __future__ import annotations

import inspect
import json
import re
import types
import typing
import unicodedata
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import Annotated, Any, Literal, Protocol, Union, runtime_checkable

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError

from rewardkit.envs import approvals
from rewardkit.envs.approvals import Gate
from rewardkit.envs.schemas import first_error, ref_loop
from rewardkit.errors import UserError


@runtime_checkable
class Tool(Protocol):
    """What every consumer reads of a tool, whether the harness runs it (:class:`ToolSpec`) or an MCP server
    lists it (``mcp_env.MCPToolSpec``): the schema the model sees, the risk, and the check of gold arguments."""

    name: str
    description: str
    parameters: Mapping[str, Any]  # JSON Schema of the arguments object
    risk: Literal["read", "write"]

    def openai(self) -> dict[str, Any]: ...

    def violation(self, arguments: Mapping[str, Any]) -> str | None: ...


IDEMPOTENCY_KEY = "idempotency_key"
IDEMPOTENCY_SCHEMA = {
    "type": "string",
    "minLength": 1,
    "maxLength": 200,
    "description": "Optional. Repeating a key returns the first call's result instead of writing again.",
}


class ToolSpecError(UserError, ValueError):
    """A tool declared wrong (its schema, risk, gates, name, signature or docstring); the message names the tool."""


class ResultCode(str, Enum):  # str: comparable with the codes in JSON records
    OK = "OK"
    NOT_FOUND = "NOT_FOUND"
    INVALID_ARGUMENT = "INVALID_ARGUMENT"
    SCHEMA_VIOLATION = "SCHEMA_VIOLATION"
    PRECONDITION_FAILED = "PRECONDITION_FAILED"
    INSUFFICIENT_FUNDS = "INSUFFICIENT_FUNDS"
    UNKNOWN_TOOL = "UNKNOWN_TOOL"
    IDEMPOTENCY_CONFLICT = "IDEMPOTENCY_CONFLICT"
    APPROVAL_REQUIRED = "APPROVAL_REQUIRED"  # a soft gate: the user has not approved this exact call
    HARD_GATE = "HARD_GATE"  # a platform red line: refused whatever was approved


class ToolError(Exception):
    """A tool refusing a call; the harness turns it into a structured result."""

    def __init__(self, code: ResultCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


@dataclass(frozen=True)
class ToolSpec:
    """One tool: ``fn(conn, **arguments)`` returns a JSON value or raises :class:`ToolError`."""

    name: str
    description: str
    parameters: Mapping[str, Any]  # JSON Schema of the arguments object
    risk: Literal["read", "write"]
    fn: Callable[..., Any] = field(repr=False, compare=False)
    gates: tuple[Gate, ...] = ()  # approval rules, checked in order before the write runs (writes only)

    def __post_init__(self) -> None:
        try:
            Draft202012Validator.check_schema(self.parameters)
        except SchemaError as exc:
            raise ToolSpecError(f"tool {self.name!r}: parameters: not a JSON Schema ({exc.message})") from exc
        loop = ref_loop(self.parameters)
        if loop is not None:  # validating the agent's arguments would never end
            raise ToolSpecError(f"tool {self.name!r}: parameters: {loop}")
        if self.gates and self.risk != "write":
            raise ToolSpecError(f"tool {self.name!r}: only a write can be gated (risk is {self.risk!r})")
        if self.name in approvals.USER_TOOLS:  # the user's side: no agent tool may take the name
            raise ToolSpecError(f"tool {self.name!r}: the name is the user's approval tool; name the tool otherwise")
        # A write's schema advertises the optional idempotency key to the model.
        if self.risk == "write" and IDEMPOTENCY_KEY not in self.parameters.get("properties", {}):
            raise ToolSpecError(f"write tool {self.name!r} must declare an optional {IDEMPOTENCY_KEY!r} property")
        object.__setattr__(self, "_validator", Draft202012Validator(self.parameters))

    def violation(self, arguments: Mapping[str, Any]) -> str | None:
        return first_error(self._validator, arguments)  # type: ignore[attr-defined]

    def openai(self) -> dict[str, Any]:
        """The OpenAI function spec (what goes into a dataset's ``tools`` column)."""
        return {
            "type": "function",
            "function": {"name": self.name, "description": self.description, "parameters": dict(self.parameters)},
        }

    def __call__(self, conn: Any, *args: Any, **kwargs: Any) -> Any:
        """The function itself: a function decorated with :func:`tool` stays callable."""
        return self.fn(conn, *args, **kwargs)


def arguments_schema(
    properties: Mapping[str, Any],
    required: typing.Iterable[str],
    *,
    write: bool = False,
    key: Mapping[str, Any] = IDEMPOTENCY_SCHEMA,
) -> dict[str, Any]:
    """The JSON Schema of a tool's arguments object: ``properties``, the ``required`` ones, nothing else; a write
    also takes the optional idempotency key (``key``: its schema, to word it in the domain's language)."""
    extra = {IDEMPOTENCY_KEY: dict(key)} if write else {}
    properties = {**properties, **extra}
    return {"type": "object", "properties": properties, "required": list(required), "additionalProperties": False}


_JSON_TYPES = {str: "string", int: "integer", float: "number", bool: "boolean", dict: "object", list: "array"}
_ARG_LINE = re.compile(r"^\s*(\w+)\s*(?:\([^)]*\))?\s*:\s*(.+)$")


def tool(
    fn: Callable[..., Any] | None = None,
    *,
    risk: Literal["read", "write"] = "read",
    gates: tuple[Gate, ...] = (),
    key: Mapping[str, Any] = IDEMPOTENCY_SCHEMA,
) -> Any:
    """A :class:`ToolSpec` from ``fn(conn, ...)``: the name is the function's, the description its docstring's
    first paragraph, and each parameter after ``conn`` an argument, its JSON Schema from the type hint (``str``,
    ``int``, ``float``, ``bool``, ``list[T]``, ``dict``, ``Literal[...]``, ``T | None``) and its description from the
    docstring's ``Args:`` section. ``Annotated[T, "description"]`` or ``Annotated[T, {"pattern": ...}]`` adds to one
    argument's schema. A parameter with a default is optional. A write (``risk="write"``) also takes the optional
    idempotency key, and its ``gates`` are checked before it runs. The decorated name is the spec, and calling it
    calls the function::

        @tool
        def find_book(conn, title: str) -> dict:
            \"\"\"Find a book by its exact title.

            Args:
                title: the title, as the catalogue spells it
            \"\"\"
    """
    if fn is None:
        return lambda f: tool(f, risk=risk, gates=gates, key=key)
    name = getattr(fn, "__name__", repr(fn))
    summary, described = _docstring(fn, name)
    hints = typing.get_type_hints(fn, include_extras=True)
    params = list(inspect.signature(fn).parameters.values())
    if not params or params[0].kind not in (params[0].POSITIONAL_ONLY, params[0].POSITIONAL_OR_KEYWORD):
        raise ToolSpecError(f"tool {name!r}: the first parameter must be the database connection, fn(conn, ...)")
    properties: dict[str, Any] = {}
    for param in params[1:]:
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD) or param.name not in hints:
            why = "needs a type hint and a name the model can pass (no *args or **kwargs)"
            raise ToolSpecError(f"tool {name!r}: parameter {param.name!r} {why}")
        if param.name == IDEMPOTENCY_KEY:  # the harness takes it off every call before the tool runs
            raise ToolSpecError(f"tool {name!r}: {IDEMPOTENCY_KEY!r} is the harness's; name the parameter otherwise")
        schema = _schema(hints[param.name], f"tool {name!r}: parameter {param.name!r}")
        if param.name in described:
            schema = {**schema, "description": described[param.name]}
        properties[param.name] = schema
    required = [p.name for p in params[1:] if p.default is inspect.Parameter.empty]
    parameters = arguments_schema(properties, required, write=risk == "write", key=key)
    return ToolSpec(name, summary, parameters, risk, fn, gates=gates)


def toolset(*specs: ToolSpec) -> dict[str, ToolSpec]:
    """A domain's tools by name, each name once."""
    out: dict[str, ToolSpec] = {}
    for spec in specs:
        if spec.name in out:
            raise ToolSpecError(f"tool {spec.name!r} is declared twice; give each tool its own name")
        out[spec.name] = spec
    return out


def _docstring(fn: Callable[..., Any], name: str) -> tuple[str, dict[str, str]]:
    """The first paragraph, and each parameter's description under ``Args:`` (continuation lines joined)."""
    doc = inspect.getdoc(fn)
    if not doc or not doc.strip():
        raise ToolSpecError(f"tool {name!r}: no docstring; its first paragraph is the description the model reads")
    head, _, args = doc.partition("\nArgs:")
    described: dict[str, str] = {}
    last = None
    for line in args.splitlines():
        indent = len(line) - len(line.lstrip())
        if line.strip() and indent == 0:  # the next section (Returns:, Raises:)
            break
        match = _ARG_LINE.match(line)
        if match and indent <= 4:
            last = match.group(1)
            described[last] = match.group(2).strip()
        elif last and line.strip():
            described[last] = _joined([described[last], line])
    return _joined(head.split("\n\n")[0].splitlines()), described


def _joined(lines: list[str]) -> str:
    """Wrapped lines as one: a space between two lines, none where both sides are Chinese or Japanese characters
    (wide, and not Korean, which spaces its words), which that text never separates."""
    out = ""
    for line in (" ".join(line.split()) for line in lines):
        if out and line:
            out += "" if _unspaced(out[-1]) and _unspaced(line[0]) else " "
        out += line
    return out


def _unspaced(char: str) -> bool:
    """A character of a script written without spaces between words: a wide one, Hangul aside."""
    return unicodedata.east_asian_width(char) in "WF" and not unicodedata.name(char, "").startswith("HANGUL")


def _schema(hint: Any, where: str) -> dict[str, Any]:
    """The JSON Schema of one type hint."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is Annotated:
        schema = _schema(args[0], where)
        for extra in args[1:]:
            schema = {**schema, **({"description": extra} if isinstance(extra, str) else dict(extra))}
        return schema
    if origin in (Union, types.UnionType):
        present = [a for a in args if a is not type(None)]
        if len(present) == 1:  # T | None: the argument may be left out
            return _schema(present[0], where)
    elif origin is Literal:
        kinds = {_JSON_TYPES.get(type(a)) for a in args}
        return {"enum": list(args), **({"type": kinds.pop()} if len(kinds) == 1 and None not in kinds else {})}
    elif origin in (list, tuple) or hint in (list, tuple):
        item = args[0] if args else None
        return {"type": "array", **({"items": _schema(item, where)} if item is not None else {})}
    elif origin is dict or hint is dict:
        return {"type": "object"}
    elif hint in _JSON_TYPES:
        return {"type": _JSON_TYPES[hint]}
    kinds = "str, int, float, bool, list[T], dict, Literal[...], T | None, or Annotated[T, {schema}]"
    raise ToolSpecError(f"{where}: the type hint {hint!r} has no JSON Schema here; use {kinds}")


@dataclass(frozen=True)
class ToolResult:
    code: ResultCode
    value: Any  # the tool's JSON value, or {"error": {"code", "message"}}

    @property
    def ok(self) -> bool:
        return self.code is ResultCode.OK

    def text(self) -> str:
        """The tool message content: strings as they are, everything else as JSON."""
        return self.value if isinstance(self.value, str) else json.dumps(self.value, ensure_ascii=False)

    @property
    def request_id(self) -> str | None:
        """The approval request a held call opened (``APPROVAL_REQUIRED``), or None."""
        error = self.value.get("error") if isinstance(self.value, Mapping) else None
        found = error.get("request_id") if isinstance(error, Mapping) else None
        return found if self.code is ResultCode.APPROVAL_REQUIRED and isinstance(found, str) else None

    @classmethod
    def error(cls, code: ResultCode, message: str, **detail: str) -> ToolResult:
        """A refusal; ``detail`` adds fields the caller acts on (a gate's ``rule``, an approval's ``request_id``)."""
        return cls(code, {"error": {"code": code.value, "message": message, **detail}})


def canonical(value: Any) -> str:
    """``value`` as the harness stores and compares it: sorted keys, ASCII escapes (they keep lone surrogates, valid
    JSON but not UTF-8, storable), and a whole float written as the integer it equals (``89.0`` is ``89``: one JSON
    number, so one call to an idempotency key or an approval)."""
    return json.dumps(_whole(value), sort_keys=True)


def _whole(value: Any) -> Any:
    if isinstance(value, float) and value.is_integer() and abs(value) <= 2**53:
        return int(value)
    if isinstance(value, Mapping):
        return {k: _whole(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_whole(v) for v in value]
    return value
