"""Simulated tools (MUA-RL's B1): every call answered from the task's memory database, by rule or by a tool LLM.

A domain given as a spec (:mod:`rewardkit.envs.spec_domain`) has tool schemas, a ``returns`` schema per tool, the
tables' schema and a policy, and no Python tools. Its :class:`Simulation` answers each call on a private copy of the
task's memory (:mod:`rewardkit.envs.memory`): the task's own ``memory`` rows when it has them, else the domain's seed.
An :class:`Answerer` turns a :class:`SimCall` into an answer, one JSON object:

- ``{"ok": true, "result": <what the tool returns>, "writes": [<write>, ...]}``, each write as
  :data:`~rewardkit.envs.memory.WRITE_SCHEMA` says;
- ``{"ok": false, "code": "NOT_FOUND", "message": "..."}``, a refusal with one of the harness's result codes.

:func:`answer_problem` is the one check of an answer: its result must fit the tool's ``returns`` schema, only a
write tool may write, and its writes must apply to the memory. The environment applies the writes inside the
harness's transaction, so a later read sees them and a failed write leaves nothing. :func:`by_rule` is the
deterministic answerer (for CI, and for replaying a run); a tool LLM is another (``rewardkit.loop.tool_sim``). An
answerer that cannot answer raises :class:`ToolSimError`: the episode ends as ``tool_sim_error``, infrastructure,
never the policy's fault.
"""

from __future__ import annotations

import contextlib
import sqlite3
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from jsonschema import Draft202012Validator

from rewardkit.envs.harness import ToolEnvironment
from rewardkit.envs.memory import MemorySchemaError, apply_writes, open_memory, unstorable
from rewardkit.envs.schemas import first_error
from rewardkit.envs.sqlite_env import Tables, next_id
from rewardkit.envs.tool import ResultCode, ToolResult, ToolSpec


class ToolSimError(RuntimeError):
    """The tool simulator gave no usable answer (after its retries): the episode ends as ``tool_sim_error``."""


@dataclass(frozen=True)
class SimCall:
    """One call to answer: the tool, its checked arguments, what it returns, its rule, the memory and the calls so
    far in this episode (``{"tool", "arguments", "answer"}`` each)."""

    tool: ToolSpec
    arguments: Mapping[str, Any]
    returns: Mapping[str, Any]
    rule: Mapping[str, Any] | None
    conn: sqlite3.Connection
    tables: Tables
    history: tuple[Mapping[str, Any], ...] = ()


Answerer = Callable[[SimCall], Mapping[str, Any]]
CODES = tuple(c.value for c in ResultCode if c not in (ResultCode.OK, ResultCode.APPROVAL_REQUIRED))


def answer_problem(call: SimCall, answer: Any) -> str | None:
    """What is wrong with ``answer`` to ``call``, or None; its writes are tried on the memory and undone."""
    if not isinstance(answer, Mapping) or not isinstance(answer.get("ok"), bool):
        return 'the answer must be an object with "ok": true or false'
    if not answer["ok"]:
        if answer.get("code") not in CODES or not isinstance(answer.get("message"), str):
            return f'a refusal needs "code" (one of {", ".join(CODES)}) and a "message"'
        return None
    if "result" not in answer:
        return 'an answer with "ok": true needs a "result"'
    problem = first_error(Draft202012Validator(call.returns), answer["result"], "result")
    if problem is not None:
        return f"result does not fit what {call.tool.name} returns: {problem}"
    writes = answer.get("writes") or []
    if not isinstance(writes, list):
        return '"writes" must be a list of writes'
    if writes and call.tool.risk != "write":
        return f"{call.tool.name} is a read tool: it changes nothing, so its writes must be []"
    with _undone(call.conn):
        try:
            apply_writes(call.conn, writes, call.tables.names)
        except MemorySchemaError as exc:
            return f"the writes do not fit the memory: {exc}"
        return contradiction(call.conn, answer["result"], call.tables.names)  # the memory after the writes


@contextlib.contextmanager
def _undone(conn: sqlite3.Connection) -> Iterator[None]:
    """Whatever is written inside is undone after (a savepoint rolled back): writes tried, never kept."""
    conn.execute("SAVEPOINT rewardkit_try")
    try:
        yield
    finally:
        conn.execute("ROLLBACK TO rewardkit_try")
        conn.execute("RELEASE rewardkit_try")


def _tables(conn: sqlite3.Connection, names: Sequence[str]) -> dict[str, tuple[list[str], set[str]]]:
    """Table -> (its primary key's columns, all its columns), for the domain's tables ``names`` that have a key."""
    out = {}
    for table in names:
        info = sorted(conn.execute(f'PRAGMA table_info("{table}")'), key=lambda r: r[5])
        key = [r[1] for r in info if r[5]]
        if key:
            out[table] = (key, {r[1] for r in info})
    return out


def _objects(value: Any) -> list[Mapping[str, Any]]:
    if isinstance(value, Mapping):
        return [value, *(o for v in value.values() for o in _objects(v))]
    if isinstance(value, list):
        return [o for v in value for o in _objects(v)]
    return []


def _row_of(found: Mapping[str, Any], tables: Mapping[str, tuple[list[str], set[str]]]) -> list[str]:
    """The tables ``found`` is read as a row of: of those whose whole primary key it carries, the ones whose columns
    hold the most of its keys (an appointment carrying its slot's ``slot_id`` is an appointment, not a slot)."""
    fits = {t: len(found.keys() & names) for t, (key, names) in tables.items() if all(k in found for k in key)}
    most = max(fits.values(), default=0)
    return [t for t, n in fits.items() if n == most]


def _disagreement(conn: sqlite3.Connection, table: str, key: Sequence[str], found: Mapping[str, Any]) -> str | None:
    """Where ``found`` disagrees with the row of ``table`` its key names, or None (also when no row has it)."""
    if any(unstorable(found[k]) for k in key):  # a list, a lone surrogate: SQLite holds no row with such a key
        return None
    where = " AND ".join(f'"{k}" = ?' for k in key)
    row = conn.execute(f'SELECT * FROM "{table}" WHERE {where}', tuple(found[k] for k in key)).fetchone()
    for column in row.keys() if row is not None else ():
        if column in found and found[column] != row[column]:
            named = ", ".join(f"{k} {found[k]!r}" for k in key)
            return (
                f"the result says {table} {named} has {column} {found[column]!r}, but the memory holds "
                f"{row[column]!r}: answer from the memory as it is now"
            )
    return None


def contradiction(conn: sqlite3.Connection, result: Any, names: Sequence[str]) -> str | None:
    """Where ``result`` says something of a row the memory holds otherwise, or None (a read after a write must see the
    write). Every object in it is read as a row of the table whose whole primary key it carries and whose columns
    hold the most of its keys (:func:`_row_of`), and must agree with that table's row on the columns both have; an
    object that fits several tables equally is refused only when it disagrees with each of them."""
    tables = _tables(conn, names)
    for found in _objects(result):
        problems = [_disagreement(conn, t, tables[t][0], found) for t in _row_of(found, tables)]
        if problems and all(problems):
            return problems[0]
    return None


def _value(spec: Any, arguments: Mapping[str, Any]) -> tuple[bool, Any]:
    """A rule's value: an argument's name (absent: not given), or ``{"value": constant}``."""
    if isinstance(spec, Mapping):
        return True, spec.get("value")
    return spec in arguments, arguments.get(spec)


def _mapped(mapping: Mapping[str, Any], arguments: Mapping[str, Any]) -> dict[str, Any]:
    out = {}
    for column, spec in mapping.items():
        given, value = _value(spec, arguments)
        if given:
            out[column] = value
    return out


def _rows(conn: sqlite3.Connection, table: str, where: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The rows of ``table`` whose columns equal ``where``'s values, in insertion order; a value SQLite cannot hold (a
    list the arguments' schema let through) equals no column's."""
    if any(unstorable(v) for v in where.values()):
        return []
    clause = " AND ".join(f'"{k}" = ?' for k in where) or "1"
    return [dict(r) for r in conn.execute(f'SELECT * FROM "{table}" WHERE {clause} ORDER BY rowid', (*where.values(),))]


def by_rule(call: SimCall) -> dict[str, Any]:
    """The deterministic answer: the tool's rule (``get``, ``list``, ``update``, ``insert`` or ``upsert`` a table,
    docs/simulated_tools.md) run on the memory; a write the schema refuses (a key taken, a foreign key to nothing)
    is the tool's refusal, ``PRECONDITION_FAILED``, as the harness answers a real tool's constraint failure."""
    answer = _by_rule(call)
    with _undone(call.conn):
        try:
            apply_writes(call.conn, answer.get("writes") or [], call.tables.names)
        except MemorySchemaError as exc:
            return {"ok": False, "code": ResultCode.PRECONDITION_FAILED.value, "message": str(exc)}
    return answer


def _by_rule(call: SimCall) -> dict[str, Any]:
    rule, args, conn = call.rule, call.arguments, call.conn
    if rule is None:
        raise ToolSimError(
            f"tool {call.tool.name!r} has no rule, so the deterministic simulator cannot answer it; give it a rule in "
            "the domain's spec, or simulate it with a tool model (--tool-model URL)"
        )
    op = next(k for k in ("get", "list", "update", "insert", "upsert") if k in rule)
    table = rule[op]
    if op == "list":
        return {"ok": True, "result": _rows(conn, table, _mapped(rule.get("where") or {}, args)), "writes": []}
    if op in ("insert", "upsert"):
        values = _mapped(rule.get("values") or {}, args)
        if "id" in rule:
            spec = rule["id"]
            values[spec["column"]] = next_id(conn, table, spec["column"], spec.get("prefix", ""), spec.get("width", 3))
        write = {"op": op, "table": table, "values": values}
        return {"ok": True, "result": values, "writes": [write]}
    key = _mapped(rule.get("key") or {}, args)
    found = next(iter(_rows(conn, table, key)), None)
    if found is None:
        said = ", ".join(f"{k} {v!r}" for k, v in key.items())
        return {"ok": False, "code": ResultCode.NOT_FOUND.value, "message": f"no {table} row with {said}"}
    if op == "get":
        return {"ok": True, "result": found, "writes": []}
    values = _mapped(rule.get("set") or {}, args)
    return {
        "ok": True,
        "result": {**found, **values},
        "writes": [{"op": "update", "table": table, "key": key, "values": values}],
    }


@dataclass(frozen=True)
class Simulation:
    """How a spec domain's tools are answered: its tables (schema, seed), each tool's ``returns`` schema and rule,
    and the answerer (:func:`by_rule` unless a tool LLM is given)."""

    tables: Tables
    tools: Mapping[str, ToolSpec]
    returns: Mapping[str, Mapping[str, Any]]
    rules: Mapping[str, Mapping[str, Any]]
    answer: Answerer = by_rule
    memory: Callable[[Mapping[str, Any]], Any] | None = field(default=None, compare=False)  # task -> rows

    def rows(self, task: Mapping[str, Any] | None) -> Any:
        """The task's memory: ``memory(task)`` when a writer is given, else its ``memory`` key, else the seed."""
        if task is not None and self.memory is not None:
            return self.memory(task)
        if task is not None and task.get("memory") is not None:
            return task["memory"]
        return self.tables.seed_rows()

    def env(self, task: Mapping[str, Any] | None = None) -> SimulatedEnvironment:
        """A fresh environment on a private copy of the task's memory (None: the seed)."""
        rows = self.rows(task)
        try:
            conn = open_memory(self.tables.schema, rows)
        except MemorySchemaError as exc:
            where = f"task {task.get('id')!r}" if task is not None else "the seed"
            raise ToolSimError(f"the memory of {where} does not fit the schema: {exc}") from None
        return SimulatedEnvironment(conn, self)


class SimulatedEnvironment(ToolEnvironment):
    """The harness (schemas, idempotency keys, transactions, audit) over a memory database whose tools are answered
    by the simulation's answerer."""

    def __init__(self, conn: sqlite3.Connection, simulation: Simulation) -> None:
        super().__init__(conn, threading.RLock())  # its own lock: a tool model's answer must not stall the others
        self.tools = simulation.tools  # type: ignore[misc]
        self.simulation = simulation
        self.history: list[dict[str, Any]] = []

    def _run(self, spec: ToolSpec, arguments: dict[str, Any]) -> ToolResult:
        sim = self.simulation
        call = SimCall(
            spec,
            arguments,
            sim.returns[spec.name],
            sim.rules.get(spec.name),
            self.conn,
            sim.tables,
            tuple(self.history),
        )
        answer = sim.answer(call)
        problem = answer_problem(call, answer)
        if problem is not None:  # the LLM answerer checked this already: a rule or a domain's answerer is wrong
            raise ToolSimError(f"{spec.name}: the simulator's answer was refused: {problem}")
        self.history.append({"tool": spec.name, "arguments": dict(arguments), "answer": dict(answer)})
        if not answer["ok"]:
            return ToolResult.error(ResultCode(answer["code"]), answer["message"])
        try:
            apply_writes(self.conn, answer.get("writes") or [], sim.tables.names)
        except MemorySchemaError as exc:  # checked above: only a write racing its own check lands here
            return ToolResult.error(ResultCode.PRECONDITION_FAILED, str(exc))
        return ToolResult(ResultCode.OK, answer["result"])

    def export(self) -> dict[str, Any]:
        with self.lock:
            return self.simulation.tables.export(self.conn)

    def state_hash(self) -> str:
        with self.lock:
            return self.simulation.tables.full_hash(self.conn)
