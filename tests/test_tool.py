"""rewardkit.envs.tool: a tool's spec from its signature and docstring, and the hand-written schema beside it."""

from __future__ import annotations

import sqlite3
from typing import Annotated, Any, Literal

import pytest

from rewardkit.envs import ToolSpec, arguments_schema, tool, toolset
from rewardkit.envs.tool import IDEMPOTENCY_SCHEMA, ToolSpecError


def search(conn: sqlite3.Connection, query: str, limit: int = 10, exact: bool | None = None) -> list:
    """Search the catalogue.

    More text the model does not need.

    Args:
        query: words to look for,
            across two lines
        limit: at most this many results

    Returns:
        the rows
    """
    return [query, limit, exact]


def price(
    conn,
    sku: Annotated[str, {"pattern": "^SP[0-9]{3}$"}, "the product"],
    yuan: float,
    tags: list[str],
    mode: Literal["fixed", "percent"],
    extra: dict,
) -> None:
    """Set a price."""


# (function, decorator arguments, the arguments schema it gets)
SCHEMAS = [
    (
        search,
        {},
        {
            "type": "object",
            "properties": {
                # the Args: entry, its continuation line joined; Returns: is not an argument
                "query": {"type": "string", "description": "words to look for, across two lines"},
                "limit": {"type": "integer", "description": "at most this many results"},
                "exact": {"type": "boolean"},  # bool | None: the argument may be left out
            },
            "required": ["query"],  # the two with defaults are optional
            "additionalProperties": False,
        },
    ),
    (
        price,
        {"risk": "write"},
        {
            "type": "object",
            "properties": {
                "sku": {"type": "string", "pattern": "^SP[0-9]{3}$", "description": "the product"},
                "yuan": {"type": "number"},
                "tags": {"type": "array", "items": {"type": "string"}},
                "mode": {"enum": ["fixed", "percent"], "type": "string"},
                "extra": {"type": "object"},
                "idempotency_key": IDEMPOTENCY_SCHEMA,  # a write takes the optional key
            },
            "required": ["sku", "yuan", "tags", "mode", "extra"],
            "additionalProperties": False,
        },
    ),
]


@pytest.mark.parametrize(("fn", "kwargs", "schema"), SCHEMAS)
def test_the_schema_comes_from_the_signature_and_docstring(fn, kwargs: dict, schema: dict) -> None:
    spec = tool(**kwargs)(fn) if kwargs else tool(fn)
    assert (spec.name, spec.parameters) == (fn.__name__, schema)
    assert spec.risk == kwargs.get("risk", "read")


def test_the_description_is_the_first_paragraph_and_the_spec_stays_callable() -> None:
    spec = tool(search)
    assert spec.description == "Search the catalogue."
    assert spec(None, "dune", limit=2) == ["dune", 2, None]  # calling the spec calls the function


def wrapped(conn: Any, room_id: str) -> None:
    """上播商品。直播间须在直播中，
    商品须有库存; then English
    words, wrapped.

    Args:
        room_id: 直播间编号，
            如 R101; or
            its name
    """


def korean(conn: Any) -> None:
    """사용자의 주문을
    취소합니다."""


def test_wrapped_lines_join_with_a_space_except_between_wide_characters() -> None:
    # Chinese never separates words: two wide characters across a line break join as they are; else one space.
    spec = tool(wrapped)
    assert spec.description == "上播商品。直播间须在直播中，商品须有库存; then English words, wrapped."
    assert spec.parameters["properties"]["room_id"]["description"] == "直播间编号，如 R101; or its name"
    assert tool(korean).description == "사용자의 주문을 취소합니다."  # Hangul is wide, and Korean spaces its words


def test_a_hand_written_schema_is_the_same_object_shape() -> None:
    # arguments_schema is what @tool builds from, for a schema written by hand
    hand = arguments_schema({"query": {"type": "string"}}, ["query"])
    assert hand == {
        "type": "object",
        "properties": {"query": {"type": "string"}},
        "required": ["query"],
        "additionalProperties": False,
    }
    assert ToolSpec("search", "Search.", hand, "read", search).parameters == hand


def undocumented(conn, q: str) -> None:
    pass


def untyped(conn, q) -> None:
    """Untyped."""


def variadic(conn, **kwargs: str) -> None:
    """Variadic."""


def unmappable(conn, q: set[str]) -> None:
    """A set has no JSON type."""


def no_conn(*, q: str) -> None:
    """No connection."""


# (function, what the error names)
def keyed(conn, idempotency_key: str) -> None:
    """The harness takes this argument off every call."""


REFUSED = [
    (undocumented, "tool 'undocumented': no docstring"),
    (untyped, "tool 'untyped': parameter 'q' needs a type hint"),
    (variadic, "tool 'variadic': parameter 'kwargs' needs a type hint and a name"),
    (unmappable, r"tool 'unmappable': parameter 'q': the type hint set\[str\] has no JSON Schema"),
    (no_conn, "tool 'no_conn': the first parameter must be the database connection"),
    (keyed, "tool 'keyed': 'idempotency_key' is the harness's; name the parameter otherwise"),
]


@pytest.mark.parametrize(("fn", "message"), REFUSED)
def test_a_tool_that_cannot_be_declared_is_refused_by_name(fn, message: str) -> None:
    with pytest.raises(ToolSpecError, match=message):
        tool(fn)


def test_a_toolset_names_each_tool_once() -> None:
    spec = tool(search)
    assert toolset(spec) == {"search": spec}
    with pytest.raises(ToolSpecError, match="tool 'search' is declared twice"):
        toolset(spec, tool(search))
