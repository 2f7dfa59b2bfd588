"""Approval tiers on writes, enforced by the harness: none, a soft gate the user approves, a hard gate never passed.

A write tool declares its :class:`Gate` objects next to its schema (``ToolSpec(gates=...)``). Each gate's
``check(conn, arguments)`` returns why this exact call is gated (a price change within the range that needs the
streamer's consent, a price below cost), or None when the rule does not apply.

- **hard**: a platform red line. The call is refused with code ``HARD_GATE`` and the rule's name, always, whatever
  the user approved.
- **soft**: the call is refused with ``APPROVAL_REQUIRED`` and a request id, and the request waits for the user.
  Approving is the user's own action (a user-side tool, :data:`USER_TOOLS`), never an argument or a message of the
  agent's: in a conversation the simulated user's reply carries :data:`APPROVE` or :data:`DECLINE`, and the loop
  runs the user-side tool on every waiting request. The agent's next call with exactly the approved tool and
  arguments runs once and uses the approval up; any other call, or a second one, is gated again.

The requests live in the harness's own ``approvals`` table, beside the audit, in the database the harness attaches to
every connection (:data:`HARNESS_DB`): never part of the state, and out of reach of a domain's tables and writes.
"""

from __future__ import annotations

import itertools
import sqlite3
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

APPROVE = "###APPROVE###"  # in a user's reply: every waiting request is approved
DECLINE = "###DECLINE###"  # in a user's reply: every waiting request is declined
USER_TOOLS = {"approve_request": "approved", "decline_request": "declined"}  # user-side tool -> the request's status
REQUEST_PREFIX = "req-"
# The database the harness attaches to each connection for its own tables (``rewardkit.envs.harness.attach``): every
# statement names it, so a domain's table of the same name is never read or written for it.
HARNESS_DB = "rewardkit"
APPROVALS = f"{HARNESS_DB}.approvals"

APPROVALS_SCHEMA = f"""
CREATE TABLE {APPROVALS} (
    id TEXT PRIMARY KEY, call TEXT NOT NULL, rule TEXT NOT NULL, reason TEXT NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('pending', 'approved', 'declined', 'used'))
);
"""

Check = Callable[[sqlite3.Connection, Mapping[str, Any]], "str | None"]


@dataclass(frozen=True)
class Gate:
    """One approval rule of a write tool: ``check(conn, arguments)`` says why the call is gated, or None.

    ``rule`` names it in the refusal and the audit (UPPER_SNAKE, e.g. ``PRICE_BELOW_COST``). ``check`` runs inside
    the write's transaction, before the tool; it may raise the domain's ``ToolError`` (an unknown product)."""

    tier: Literal["soft", "hard"]
    rule: str
    check: Check = field(repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.tier not in ("soft", "hard"):
            raise ValueError(f"gate {self.rule!r}: tier must be 'soft' or 'hard', got {self.tier!r}")
        if not self.rule or not self.rule.replace("_", "").isalnum() or not self.rule.isupper():
            raise ValueError(f"gate rule {self.rule!r}: name it in UPPER_SNAKE (e.g. PRICE_BELOW_COST)")


def always(reason: str) -> Check:
    """A check that gates every call of the tool (a tool-level gate)."""
    return lambda conn, arguments: reason


def approved(conn: sqlite3.Connection, call: str) -> str | None:
    """The id of an approved, unused request for exactly ``call`` (canonical JSON of tool and arguments)."""
    row = conn.execute(
        f"SELECT id FROM {APPROVALS} WHERE call = ? AND status = 'approved' ORDER BY rowid LIMIT 1", (call,)
    ).fetchone()
    return None if row is None else row[0]


def use(conn: sqlite3.Connection, request: str) -> None:
    conn.execute(f"UPDATE {APPROVALS} SET status = 'used' WHERE id = ?", (request,))


def request(conn: sqlite3.Connection, call: str, rule: str, reason: str) -> str:
    """The waiting request for ``call``: the one already pending, else a new one (``req-1``, ``req-2``, ...)."""
    row = conn.execute(f"SELECT id FROM {APPROVALS} WHERE call = ? AND status = 'pending'", (call,)).fetchone()
    if row is not None:
        return row[0]
    (count,) = conn.execute(f"SELECT COUNT(*) FROM {APPROVALS}").fetchone()
    for n in itertools.count(count + 1):  # ids are never reused
        rid = f"{REQUEST_PREFIX}{n}"
        if conn.execute(f"SELECT 1 FROM {APPROVALS} WHERE id = ?", (rid,)).fetchone() is None:
            conn.execute(f"INSERT INTO {APPROVALS} VALUES (?, ?, ?, ?, 'pending')", (rid, call, rule, reason))
            return rid
    raise AssertionError("unreachable")


def pending(conn: sqlite3.Connection) -> list[dict[str, str]]:
    """The requests waiting for the user, oldest first: id, the call (canonical JSON), rule and reason."""
    rows = conn.execute(f"SELECT id, call, rule, reason FROM {APPROVALS} WHERE status = 'pending' ORDER BY rowid")
    return [{"id": r[0], "call": r[1], "rule": r[2], "reason": r[3]} for r in rows]


def decide(conn: sqlite3.Connection, tool: str, request_id: Any) -> str | None:
    """Run the user-side ``tool`` on ``request_id``: None when done, else why it cannot be (for the refusal)."""
    if not isinstance(request_id, str):
        return "request_id: must be a string"
    row = conn.execute(f"SELECT status FROM {APPROVALS} WHERE id = ?", (request_id,)).fetchone()
    if row is None:
        return f"no approval request {request_id!r}"
    if row[0] != "pending":
        return f"request {request_id!r} is {row[0]}, not waiting"
    conn.execute(f"UPDATE {APPROVALS} SET status = ? WHERE id = ?", (USER_TOOLS[tool], request_id))
    return None


def user_decision(text: str) -> str | None:
    """The user-side tool a user's reply asks for (``approve_request`` or ``decline_request``), or None.

    A reply carrying both markers decides nothing: the user's intent is not clear."""
    yes, no = APPROVE in text, DECLINE in text
    if yes == no:
        return None
    return "approve_request" if yes else "decline_request"


def agent_rows(audit: list[Any]) -> list[Mapping[str, Any]]:
    """The audit rows of the agent's own calls: not the user's decisions (rows recorded before gates have no side)."""
    return [a for a in audit if isinstance(a, Mapping) and a.get("side", "agent") == "agent"]


def decided_rows(audit: list[Any]) -> list[Mapping[str, Any]]:
    """The audit rows of the user's decisions that took effect: a user-side tool answered OK."""
    return [a for a in audit if isinstance(a, Mapping) and a.get("side") == "user" and a.get("code") == "OK"]


def gate_counts(audit: list[dict[str, Any]]) -> dict[str, int]:
    """An episode's gates from its audit: approval requests opened, approved and declined by the user, and hard
    gates hit (the production metrics of soft- and hard-gate traffic)."""
    agent = agent_rows(audit)
    user_ok = decided_rows(audit)
    return {
        "requested": len({a["request"] for a in agent if a.get("code") == "APPROVAL_REQUIRED"}),
        "approved": sum(a["tool"] == "approve_request" for a in user_ok),
        "declined": sum(a["tool"] == "decline_request" for a in user_ok),
        "hard_gate": sum(a.get("code") == "HARD_GATE" for a in agent),
    }
