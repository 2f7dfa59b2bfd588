"""A tool harness over one private SQLite database, with a production agent harness's rules (docs/harness.md).

- every tool declares a JSON Schema for its arguments (an OpenAI function spec,
  usable as ms-swift's ``tools`` column) and a risk level, ``read`` or ``write`` (:mod:`rewardkit.envs.tool`);
- arguments are validated before anything runs;
- failures come back as structured results with a code, never as exceptions;
- a write runs in one transaction: a failed write changes nothing;
- a write may carry an ``idempotency_key``: a repeated key returns the first
  result without writing again; the same key with other arguments is ``IDEMPOTENCY_CONFLICT``;
- a write may be gated (:mod:`rewardkit.envs.approvals`): a hard gate always refuses it, a soft gate
  runs it only once the user approved that exact call, by a user-side tool;
- every call, the user's approvals and refusals included, is appended to an ``audit`` table (part of
  the rollout's record, not of the state: exports and state hashes never read it);
- the harness's own tables live in a database it attaches to the connection (:func:`attach`), so a domain's tables
  and the writes a simulated tool reports never reach them, whatever they are named.
"""

from __future__ import annotations

import functools
import json
import sqlite3
import threading
from abc import ABC, abstractmethod
from collections.abc import Iterable, Mapping
from typing import Any, ClassVar

from rewardkit.envs import approvals
from rewardkit.envs.schemas import not_json, unencodable
from rewardkit.envs.tool import IDEMPOTENCY_KEY, ResultCode, ToolError, ToolResult, ToolSpec, canonical
from rewardkit.envs.tool_calls import ToolCall

HARNESS_DB = approvals.HARNESS_DB  # attached to every connection (attach); every statement below names it
HARNESS_SCHEMA = (
    f"""
CREATE TABLE {HARNESS_DB}.audit (
    -- tool and arguments as JSON text: what the model sent may not even be valid UTF-8
    seq INTEGER PRIMARY KEY, tool TEXT NOT NULL, arguments TEXT NOT NULL, code TEXT NOT NULL,
    replayed INTEGER NOT NULL DEFAULT 0, side TEXT NOT NULL DEFAULT 'agent', rule TEXT, request TEXT
);
CREATE TABLE {HARNESS_DB}.idempotency (key TEXT PRIMARY KEY, call TEXT NOT NULL, result TEXT NOT NULL);
"""
    + approvals.APPROVALS_SCHEMA
)
SQLITE_INTEGERS = range(-(2**63), 2**63)  # what SQLite's INTEGER holds; binding a wider int raises OverflowError

# Every in-process database's calls take turns under one lock. SQLite releases the interpreter lock around each
# statement; with hundreds of rollout threads, each release hands the interpreter to another thread, which asks for
# it back (a batch of 256 spent 15-20% more CPU so: benchmarks/bench_database_lock.py). Waiting on this lock parks a
# thread until its turn instead. In-memory calls take microseconds, and the interpreter lock ran them one at a time
# anyway; an environment whose calls wait on a model (SimulatedEnvironment) keeps a lock of its own.
DATABASE_LOCK = threading.RLock()


def attach(conn: sqlite3.Connection) -> None:
    """The harness's own tables (audit, idempotency keys, approval requests) on ``conn``, empty, in a database of
    their own (:data:`HARNESS_DB`, in memory) that no domain schema declares and no simulated write names: a domain
    may have tables called ``audit`` or ``approvals``, and nothing written to them reaches the record. A copy made
    with the backup API copies ``main`` only, so each connection attaches its own: an empty one deserialised, about
    100 us less per rollout than creating its tables."""
    conn.execute(f"ATTACH DATABASE ':memory:' AS {HARNESS_DB}")
    conn.deserialize(_empty_harness_db(), name=HARNESS_DB)


@functools.cache
def _empty_harness_db() -> bytes:
    conn = sqlite3.connect(":memory:")
    conn.execute(f"ATTACH DATABASE ':memory:' AS {HARNESS_DB}")
    conn.executescript(HARNESS_SCHEMA)
    empty = conn.serialize(name=HARNESS_DB)
    conn.close()
    return empty


def pending_requests(conn: sqlite3.Connection, lock: threading.RLock) -> list[dict[str, Any]]:
    """The approval requests waiting for the user in ``conn``'s harness tables: id, tool, arguments, rule and the
    refusal's text."""
    with lock:
        waiting = approvals.pending(conn)
    out = []
    for request in waiting:
        tool, arguments = json.loads(request.pop("call"))
        out.append({**request, "tool": tool, "arguments": arguments})
    return out


def too_wide(value: Any) -> bool:
    """True if some integer in ``value`` is past SQLite's 64 bits: a tool binding it would raise OverflowError."""
    if isinstance(value, int):
        return value not in SQLITE_INTEGERS
    if isinstance(value, Mapping):
        return any(too_wide(v) for v in value.values())
    if isinstance(value, list):
        return any(too_wide(v) for v in value)
    return False


class StatefulEnvironment(ABC):
    """What an environment owes its callers besides running tool calls (see ``ToolEnvironment``).

    ``state_hash`` is the canonical identity of the state (equal states, equal hashes,
    whatever order the writes came in); ``export`` is the state as JSON, in the domain's
    own data format. Neither reads the audit.
    """

    @abstractmethod
    def state_hash(self) -> str: ...

    @abstractmethod
    def export(self) -> dict[str, Any]: ...

    def changes(self) -> dict[str, dict[str, tuple[Any, Any]]] | None:
        """What the writes changed since the environment opened, unit by unit (:mod:`rewardkit.envs.state_diff`), where
        the environment tracks its writes (the SQLite tables do); None where it does not (read its export instead)."""
        return None

    def close(self) -> None:  # noqa: B027 - optional: environments holding connections or sessions release them
        """Release what the environment holds (a database connection, a server session)."""

    def pending_approvals(self) -> list[dict[str, Any]]:
        """The soft-gated requests waiting for the user (``rewardkit.envs.approvals``); none without gates."""
        return []


class CallingEnvironment(StatefulEnvironment):
    """Tool calls under the harness's rules for what can be called at all (a JSON object of arguments, a known
    tool); subclasses run what passes (``_call``) and record every call, refused ones included (``_record``)."""

    tools: Mapping[str, Any]
    lock: threading.RLock

    def call(self, name: str, arguments: Mapping[str, Any] | None = None) -> ToolResult:
        with self.lock:
            return self._call(name, arguments)

    def execute(self, call: ToolCall) -> ToolResult:
        """Run a decoded tool call; an undecodable one is a schema violation."""
        with self.lock:
            if call.error is not None:
                return self._record(call.name, {}, ToolResult.error(ResultCode.SCHEMA_VIOLATION, call.error))
            return self._call(call.name, call.arguments)

    def replay(self, calls: Iterable[ToolCall | Mapping[str, Any]], approve: bool = False) -> list[ToolResult]:
        """Run calls in order, one result each; mappings are ``{"name", "arguments"}`` (gold actions, action files).

        With ``approve`` (a task whose user approves, ``tasks.approves``), a call held for approval is approved on
        the user's behalf, by the user-side tool, and sent once more: the gold as its conversation would run it."""
        out = []
        with self.lock:  # one replay is one uninterrupted sequence
            for call in calls:
                if isinstance(call, Mapping):
                    call = ToolCall(str(call.get("name", "")), call.get("arguments") or {})
                result = self.execute(call)
                if approve and result.request_id is not None:
                    self.user_call("approve_request", {"request_id": result.request_id})
                    result = self.execute(call)
                out.append(result)
        return out

    def user_call(self, name: str, arguments: Mapping[str, Any]) -> ToolResult:
        """A user-side tool (``approvals.USER_TOOLS``); an environment without gates takes none."""
        return ToolResult.error(ResultCode.UNKNOWN_TOOL, f"no user-side tool {name!r} here: nothing is gated")

    def _admit(self, name: Any, arguments: Any) -> tuple[str, dict[str, Any], ToolResult | None]:
        """The name and arguments as stored, and the refusal when the call cannot run at all."""
        if not isinstance(name, str):
            name = f"<{type(name).__name__}>"  # never a tool name: UNKNOWN_TOOL below
        if arguments is not None and not isinstance(arguments, Mapping):
            problem = f"arguments: must be a JSON object, got {type(arguments).__name__}"
            return name, {}, ToolResult.error(ResultCode.SCHEMA_VIOLATION, problem)
        arguments = dict(arguments or {})
        problem = not_json(arguments)
        if problem is not None:  # bytes, sets, NaN, nesting too deep: nothing below could store or check them
            return name, {}, ToolResult.error(ResultCode.SCHEMA_VIOLATION, problem)
        if name not in self.tools:
            refused = ToolResult.error(
                ResultCode.UNKNOWN_TOOL, f"no tool named {name!r}; tools: {', '.join(self.tools)}"
            )
            return name, arguments, refused
        return name, arguments, None

    @abstractmethod
    def _call(self, name: str, arguments: Mapping[str, Any] | None) -> ToolResult: ...

    @abstractmethod
    def _record(
        self, name: str, arguments: Mapping[str, Any], result: ToolResult, replayed: bool = False
    ) -> ToolResult: ...


class ToolEnvironment(CallingEnvironment):
    """Runs tool calls against one connection (a rollout's private database copy).

    Subclasses name their tools and implement ``state_hash`` and ``export``.
    """

    tools: ClassVar[Mapping[str, ToolSpec]] = {}

    def __init__(self, conn: sqlite3.Connection, lock: threading.RLock = DATABASE_LOCK) -> None:
        # One connection, one transaction at a time: calls from several threads are serialised, so a write
        # and its audit row can never interleave with another thread's (the lock is re-entrant for subclasses).
        self.lock = lock
        with lock:
            # The harness opens and ends every transaction itself, and reads its own tables by column name: whatever
            # the connection was opened with (sqlite3.connect's defaults included), its seed data is committed first.
            if conn.in_transaction:
                conn.commit()
            conn.isolation_level = None
            conn.row_factory = sqlite3.Row
            self.conn = conn
            attach(conn)

    def __enter__(self) -> ToolEnvironment:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        with self.lock:
            self.conn.close()

    def _call(self, name: str, arguments: Mapping[str, Any] | None) -> ToolResult:
        name, arguments, refused = self._admit(name, arguments)
        if refused is not None:
            return self._record(name, arguments, refused)
        spec = self.tools[name]
        problem = spec.violation(arguments)
        if problem is None and unencodable(arguments):
            problem = "arguments: strings must be valid Unicode (found a lone surrogate)"
        if problem is None and too_wide(arguments):  # a JSON Schema "integer" has no bound of its own
            problem = "arguments: integers must fit in 64 bits (-2**63 to 2**63 - 1)"
        if problem is not None:
            return self._record(name, arguments, ToolResult.error(ResultCode.SCHEMA_VIOLATION, problem))
        key = arguments.pop(IDEMPOTENCY_KEY, None)
        if key is not None and not isinstance(key, str):  # a schema may leave the key's type open; the store may not
            problem = f"{IDEMPOTENCY_KEY}: must be a string, got {type(key).__name__}"
            return self._record(name, arguments, ToolResult.error(ResultCode.SCHEMA_VIOLATION, problem))
        if spec.risk == "read":
            return self._record(name, arguments, self._run(spec, arguments))
        if key is not None:
            row = self.conn.execute(
                f"SELECT call, result FROM {HARNESS_DB}.idempotency WHERE key = ?", (key,)
            ).fetchone()
            if row is not None:
                if row["call"] != canonical([name, arguments]):
                    result = ToolResult.error(
                        ResultCode.IDEMPOTENCY_CONFLICT,
                        f"idempotency_key {key!r} was already used for a different call",
                    )
                    return self._record(name, arguments, result)
                return self._record(
                    name, arguments, ToolResult(ResultCode.OK, json.loads(row["result"])), replayed=True
                )
        call = canonical([name, arguments])
        self.conn.execute("BEGIN")
        try:
            gated, request = self._gate(spec, call, arguments)
            result = gated or self._run(spec, arguments)
            if result.ok and key is not None:  # only successes are remembered: a failed write may be retried
                self.conn.execute(
                    f"INSERT INTO {HARNESS_DB}.idempotency VALUES (?, ?, ?)", (key, call, canonical(result.value))
                )
        except BaseException:  # a tool returning what JSON cannot hold, a bug: nothing stays half-written
            self.conn.execute("ROLLBACK")
            raise
        if not result.ok:
            self.conn.execute("ROLLBACK")
            if gated is not None and gated.code is ResultCode.APPROVAL_REQUIRED:  # the request outlives the write
                request = approvals.request(self.conn, call, gated.value["error"]["rule"], gated.text())
                gated.value["error"]["request_id"] = request
            return self._record(name, arguments, result, request=request)
        self.conn.execute("COMMIT")
        return self._record(name, arguments, result, request=request)

    def _gate(self, spec: ToolSpec, call: str, arguments: dict[str, Any]) -> tuple[ToolResult | None, str | None]:
        """The refusal of a gated call (None: it may run) and the approval it uses up (in the write's transaction).

        Hard gates are checked first and refuse whatever was approved; a soft gate passes only on an approved,
        unused request for exactly this call."""
        hits = []
        for gate in spec.gates:
            try:
                reason = gate.check(self.conn, arguments)
            except ToolError as exc:
                return ToolResult.error(exc.code, exc.message), None
            if reason is not None:
                hits.append((gate, reason))
        for gate, reason in sorted(hits, key=lambda hit: hit[0].tier != "hard"):
            if gate.tier == "hard":
                return ToolResult.error(ResultCode.HARD_GATE, f"{gate.rule}: {reason}", rule=gate.rule), None
            granted = approvals.approved(self.conn, call)
            if granted is None:
                message = f"{gate.rule}: {reason}; the user must approve this exact request before it runs"
                return ToolResult.error(ResultCode.APPROVAL_REQUIRED, message, rule=gate.rule), None
            approvals.use(self.conn, granted)
            return None, granted
        return None, None

    def user_call(self, name: str, arguments: Mapping[str, Any]) -> ToolResult:
        """A user-side tool (``approve_request`` or ``decline_request``) on one waiting request; the agent's tools
        never include these, so nothing the agent writes can approve."""
        with self.lock:
            if name not in approvals.USER_TOOLS:
                result = ToolResult.error(ResultCode.UNKNOWN_TOOL, f"no user-side tool {name!r}")
                return self._record(name, dict(arguments), result, side="user")
            request = arguments.get("request_id")
            problem = approvals.decide(self.conn, name, request)
            result = (
                ToolResult(ResultCode.OK, {"request_id": request, "status": approvals.USER_TOOLS[name]})
                if problem is None
                else ToolResult.error(ResultCode.PRECONDITION_FAILED, problem)
            )
            return self._record(name, dict(arguments), result, side="user", request=str(request))

    def pending_approvals(self) -> list[dict[str, Any]]:
        """The requests waiting for the user: id, tool, arguments, rule and the refusal's text."""
        return pending_requests(self.conn, self.lock)

    def audit(self) -> list[dict[str, Any]]:
        """Every call so far: sequence number, tool, arguments, result code, idempotent replay or not."""
        with self.lock:
            rows = self.conn.execute(f"SELECT * FROM {HARNESS_DB}.audit ORDER BY seq").fetchall()
        return [
            {
                "seq": r["seq"],
                "tool": json.loads(r["tool"]),
                "arguments": json.loads(r["arguments"]),
                "code": r["code"],
                "replayed": bool(r["replayed"]),
                "side": r["side"],
                "rule": r["rule"],
                "request": r["request"],
            }
            for r in rows
        ]

    def _run(self, spec: ToolSpec, arguments: dict[str, Any]) -> ToolResult:
        try:
            return ToolResult(ResultCode.OK, spec.fn(self.conn, **arguments))
        except ToolError as exc:
            return ToolResult.error(exc.code, exc.message)
        except sqlite3.IntegrityError as exc:  # a constraint the tool's own checks should have caught first
            return ToolResult.error(ResultCode.PRECONDITION_FAILED, f"constraint failed: {exc}")

    def _record(
        self,
        name: str,
        arguments: Mapping[str, Any],
        result: ToolResult,
        replayed: bool = False,
        side: str = "agent",
        request: str | None = None,
    ) -> ToolResult:
        rule = result.value["error"].get("rule") if not result.ok else None
        self.conn.execute(
            f"INSERT INTO {HARNESS_DB}.audit (tool, arguments, code, replayed, side, rule, request) "
            "VALUES (?, ?, ?, ?, ?, ?, ?)",
            (canonical(name), canonical(arguments), result.code.value, int(replayed), side, rule, request),
        )
        return result
