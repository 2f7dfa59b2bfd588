"""The tool contract every domain writes to: a tool's spec, the result of a call, the codes a refusal carries.

- :class:`Tool`: what every consumer reads of a tool, whether the harness runs it (:class:`ToolSpec`) or an MCP
  server lists it (``mcp_env.MCPToolSpec``);
- :class:`ToolSpec`: a tool the harness runs: ``fn(conn, **arguments)``, its JSON Schema, risk and gates;
- :class:`ToolError` (a tool refusing a call), :class:`ResultCode` and :class:`ToolResult` (what a call returns).

The environments that run tools are in :mod:`rewardkit.envs.harness`.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Literal, Protocol, runtime_checkable

from jsonschema import Draft202012Validator

from rewardkit.envs import approvals
from rewardkit.envs.approvals import Gate
from rewardkit.envs.schemas import first_error, ref_loop


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
        Draft202012Validator.check_schema(self.parameters)
        loop = ref_loop(self.parameters)
        if loop is not None:  # validating the agent's arguments would never end
            raise ValueError(f"tool {self.name!r}: parameters: {loop}")
        if self.gates and self.risk != "write":
            raise ValueError(f"tool {self.name!r}: only a write can be gated (risk is {self.risk!r})")
        if self.name in approvals.USER_TOOLS:  # the user's side: no agent tool may take the name
            raise ValueError(f"tool {self.name!r}: the name is the user's approval tool; name the tool otherwise")
        # A write's schema advertises the optional idempotency key to the model.
        if self.risk == "write" and IDEMPOTENCY_KEY not in self.parameters.get("properties", {}):
            raise ValueError(f"write tool {self.name!r} must declare an optional {IDEMPOTENCY_KEY!r} property")
        object.__setattr__(self, "_validator", Draft202012Validator(self.parameters))

    def violation(self, arguments: Mapping[str, Any]) -> str | None:
        return first_error(self._validator, arguments)  # type: ignore[attr-defined]

    def openai(self) -> dict[str, Any]:
        """The OpenAI function spec (what goes into a dataset's ``tools`` column)."""
        return {
            "type": "function",
            "function": {"name": self.name, "description": self.description, "parameters": dict(self.parameters)},
        }


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
