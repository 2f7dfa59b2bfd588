"""What ``lint tokens`` checks before anything is encoded: its flags, and the ``--data`` rows.

:func:`check_options`: ``--template``, ``--agent-template`` and ``--loss-scale`` against ms-swift's own registries,
``--max-length`` positive; an unknown name is a usage error, not an ``encode_error`` on every row.

ms-swift's preprocessor asserts on a bad message (a traceback, not a report), drops a row without messages (every
later row would be reported under the wrong number), and Arrow, which holds the rows as one dataset, fails on a
column whose type differs between rows. So each row is checked first, and the first bad one raises
:class:`TokenLintError` naming ``FILE:LINE``, the column or message, and how to fix it:

- ``messages``: a non-empty list of objects, each with a ``role`` ms-swift knows (system, user, assistant,
  tool_call, tool, tool_response, or one of the aliases its ``MessagesPreprocessor`` maps: human, gpt, ...), a
  string ``content`` (``""`` for none), ``loss`` true, false or null and ``loss_scale`` a number or null;
- ``tools`` (optional, null or ``""`` for none): a list of tool objects (or of their JSON texts), or the JSON
  text of one or of such a list;
- ``system`` (optional, put before the messages by ms-swift): a string;
- ``chat_template_kwargs`` (optional): an object.

:func:`prepared` then hands ms-swift only what it reads of a text row: those four columns in every row (null where
a row has none: a dataset built from rows takes its columns from the first row, so a ``tools`` column that the
first row lacks would be dropped from all), the message keys it keeps (``role``, ``content``, ``loss``,
``loss_scale``), and ``tools`` as JSON text (as ``rewardkit synth agent`` writes it), so that Arrow cannot merge
the tool specs of different rows (adding null fields to them) or fail on a mix of lists and texts.
"""

from __future__ import annotations

import difflib
import json
import math
from collections.abc import Mapping, Sequence
from typing import Any

from rewardkit.errors import UserError
from rewardkit.files.jsonl import kind

COLUMNS = ("messages", "tools", "system", "chat_template_kwargs")
MESSAGE_KEYS = ("role", "content", "loss", "loss_scale")
ROLES = ("system", "user", "assistant", "tool_call", "tool", "tool_response")
WELL_KNOWN = ("qwen3", "qwen2_5", "llama3", "chatml")  # template types named when an unknown one is close to none


class TokenLintError(UserError, ValueError):
    """The model directory, a flag or the data cannot be used (a usage error: exit 2)."""


def _unknown(flag: str, value: str, names: Sequence[str], what: str, listing: str | None = None) -> str:
    """One line: ``value`` is not among ``names``. All of them; or, with ``listing`` (how to print all), the close
    ones or a few well-known ones."""
    if listing is None:
        return f"{flag} {value!r}: not an ms-swift {what}; choose one of {', '.join(names)}"
    close = difflib.get_close_matches(value, names, n=4, cutoff=0.6)
    few = close or [n for n in WELL_KNOWN if n in names] or list(names[:4])
    lead = "did you mean" if close else "e.g."
    return f"{flag} {value!r}: not an ms-swift {what}; {lead} {', '.join(few)} (all {len(names)}: {listing})"


def check_options(
    template_type: str | None, loss_scale: str, agent_template: str | None, max_length: int | None
) -> None:
    """The template flags against ms-swift's own registries (``TEMPLATE_MAPPING``, ``agent_template_map``,
    ``get_loss_scale``): an unknown name is a usage error here, not an ``encode_error`` on every row."""
    from swift.agent_template import agent_template_map
    from swift.loss_scale import get_loss_scale, loss_scale_map
    from swift.loss_scale.base import ALL_BASE_STRATEGY
    from swift.template import TEMPLATE_MAPPING

    if template_type is not None and template_type not in TEMPLATE_MAPPING:
        listing = "python -c 'from swift.template import TEMPLATE_MAPPING; print(sorted(TEMPLATE_MAPPING))'"
        raise TokenLintError(_unknown("--template", template_type, sorted(TEMPLATE_MAPPING), "template type", listing))
    if agent_template is not None and agent_template not in agent_template_map:
        raise TokenLintError(_unknown("--agent-template", agent_template, list(agent_template_map), "agent template"))
    try:
        get_loss_scale(loss_scale)
    except (KeyError, ValueError):
        raise TokenLintError(
            f"--loss-scale {loss_scale!r}: not an ms-swift loss_scale; use a strategy ({', '.join(ALL_BASE_STRATEGY)}),"
            f" a type ({', '.join(loss_scale_map)}) or STRATEGY+TYPE[+TYPE...], e.g. last_round+hermes"
        ) from None
    if max_length is not None and max_length < 1:
        raise TokenLintError(f"--max-length must be a positive number of tokens, got {max_length}")


def known_roles() -> list[str]:
    """The roles ms-swift's preprocessor takes: its own, then the aliases it maps onto them."""
    from swift.dataset.preprocessor import MessagesPreprocessor

    p = MessagesPreprocessor()
    aliases = [*p.user_roles, *p.assistant_roles, *p.tool_call_roles, *p.tool_response_roles]
    return [*ROLES, *(r for r in aliases if r not in ROLES)]


def _shown(value: Any) -> str:
    """A value as JSON writes it, cut to 40 characters."""
    text = json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= 40 else text[:37] + "..."


def _message(where: str, i: int, m: Any, roles: Sequence[str]) -> None:
    """One message of ``messages``: raises naming ``messages[i]`` and the fix."""
    at = f"{where}: messages[{i}]"
    if not isinstance(m, Mapping):
        raise TokenLintError(f"{at} must be an object with 'role' and 'content', got {kind(m)}")
    if "role" not in m or m["role"] not in roles:
        got = " has no 'role'" if "role" not in m else f".role {_shown(m['role'])} is not a role ms-swift knows"
        aliases = ", ".join(roles[len(ROLES) :])
        raise TokenLintError(f"{at}{got}; use one of {', '.join(ROLES)} (or an alias ms-swift maps: {aliases})")
    if "content" not in m:
        raise TokenLintError(f"{at} ({m['role']}) has no 'content'; give it a string ('' for none)")
    if not isinstance(m["content"], str):
        hint = "; join its text parts into one string" if isinstance(m["content"], list) else ""
        raise TokenLintError(f"{at}.content must be a string ('' for none), got {kind(m['content'])}{hint}")
    if not (m.get("loss") is None or isinstance(m["loss"], bool)):
        raise TokenLintError(f"{at}.loss must be true, false or null, got {kind(m['loss'])}")
    scale = m.get("loss_scale")
    if scale is not None and (
        isinstance(scale, bool) or not isinstance(scale, int | float) or not math.isfinite(scale)
    ):
        raise TokenLintError(f"{at}.loss_scale must be a number or null, got {kind(scale)}")


def _tool(value: Any) -> bool:
    """A tool spec: an object, or the JSON text of one."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return False
    return isinstance(value, Mapping)


def _tools(where: str, tools: Any) -> None:
    """The ``tools`` column: null or "" (none, as ms-swift reads them), a list of tool specs, or the JSON text of a
    tool spec or of such a list."""
    if tools is None or tools == "":
        return
    items = tools
    if isinstance(tools, str):
        try:
            items = json.loads(tools)
        except ValueError:
            raise TokenLintError(f"{where}: 'tools' is text but not JSON; write the list of tool specs") from None
        items = items if isinstance(items, list) else [items]
    if not isinstance(items, list):
        raise TokenLintError(f"{where}: 'tools' must be a list of tool objects (or its JSON text), got {kind(tools)}")
    bad = next((i for i, t in enumerate(items) if not _tool(t)), None)
    if bad is not None:
        raise TokenLintError(
            f"{where}: tools[{bad}] must be a tool object (or its JSON text), got {kind(items[bad])}; "
            'write it as {"type": "function", "function": {"name": ..., "parameters": ...}}'
        )


def check_row(where: str, row: Mapping[str, Any], roles: Sequence[str]) -> None:
    """One row of ``--data``; raises :class:`TokenLintError` naming ``where`` (``FILE:LINE``)."""
    if "messages" not in row:
        raise TokenLintError(
            f'{where}: no \'messages\' column; each row needs a list of {{"role", "content"}} messages '
            "(query/response or alpaca rows: write them as a user and an assistant message)"
        )
    messages = row["messages"]
    if not isinstance(messages, list) or not messages:
        raise TokenLintError(
            f'{where}: \'messages\' must be a non-empty list of {{"role", "content"}} objects, got {kind(messages)}'
        )
    for i, m in enumerate(messages):
        _message(where, i, m, roles)
    _tools(where, row.get("tools"))
    if row.get("system") is not None and not isinstance(row["system"], str):
        raise TokenLintError(f"{where}: 'system' must be a string, got {kind(row['system'])}")
    if row.get("chat_template_kwargs") is not None and not isinstance(row["chat_template_kwargs"], Mapping):
        raise TokenLintError(
            f"{where}: 'chat_template_kwargs' must be an object, got {kind(row['chat_template_kwargs'])}"
        )


def _tools_text(tools: Any) -> str | None:
    """``tools`` as the JSON text of its list of tool objects (none as None)."""
    if tools is None or isinstance(tools, str):
        return tools or None
    return json.dumps([json.loads(t) if isinstance(t, str) else t for t in tools], ensure_ascii=False)


def prepared(rows: Sequence[Mapping[str, Any]], where: Sequence[str]) -> list[dict[str, Any]]:
    """Every row checked (the first bad one raises), then reduced to what ms-swift's preprocessor reads."""
    roles = known_roles()
    out = []
    for label, row in zip(where, rows, strict=True):
        check_row(label, row, roles)
        kept = {k: row.get(k) for k in COLUMNS}  # every column in every row (see the module)
        kept["messages"] = [{k: m[k] for k in MESSAGE_KEYS if k in m} for m in row["messages"]]
        kept["tools"] = _tools_text(kept["tools"])
        out.append(kept)
    return out
