"""LLM-simulated tools (MUA-RL's B1): a tool model answers every call from the task's memory, a memory model writes
that memory, and writes the tool model reports update it, so later reads agree.

- :class:`ToolModel`: an :data:`~rewardkit.envs.simulated.Answerer`. It sees the tool's spec and ``returns`` schema,
  the memory as it is now (every table's rows), the calls so far in the episode and this call's arguments, and
  answers one JSON object (:mod:`rewardkit.envs.simulated`). :func:`~rewardkit.envs.simulated.answer_problem` checks
  it (the result against the declared return schema, a read that writes nothing, writes that fit the memory); a
  refused answer is sent back with the problem (:class:`~rewardkit.loop.roles.JsonRole`), and after the retries the
  call raises :class:`~rewardkit.envs.simulated.ToolSimError`: the episode ends as ``tool_sim_error``, excluded as
  infrastructure.
- :class:`MemoryWriter`: per task, a small database that fits the schema and holds what the task's scenario and gold
  actions refer to, checked by loading it into SQLite (:func:`~rewardkit.envs.memory.open_memory`); once per task and
  process, so the gold replay and every episode of the task start from one memory (a memory that could not be
  written, after the retries, fails every episode of its task as ``tool_sim_error`` without asking again).
- :func:`simulated_domain`: a spec domain with these in place of its rules, registered under its own name.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import threading
from collections.abc import Mapping
from typing import Any

from rewardkit.envs import Domain, register_domain
from rewardkit.envs.memory import WRITE_SCHEMA, MemorySchemaError, open_memory
from rewardkit.envs.simulated import CODES, SimCall, ToolSimError, answer_problem
from rewardkit.envs.tasks import instructions, scripted_actions
from rewardkit.loop.roles import JsonRole, RoleError

PROMPT_VERSION = 1
TOOL_SYSTEM = f"""You simulate one tool of a software system. You answer a call from the system's database (the
memory), exactly as the real tool would, and you never invent rows the memory does not hold.
Answer with one JSON object and nothing else:
- success: {{"ok": true, "result": <the tool's return value, fitting its returns schema>, "writes": [<write>, ...]}}
- refusal: {{"ok": false, "code": <one of {", ".join(CODES)}>, "message": "why"}}
A read tool's writes are []. A write tool lists every change it makes to the memory, each fitting this JSON Schema:
{json.dumps(WRITE_SCHEMA)} (insert/upsert take "values"; update takes "key", the row's primary key columns, and
"values"; delete takes "key"). The result must agree with the memory after the writes."""
MEMORY_SYSTEM = """You write the database for one test scenario of a software system: a small set of rows that fits
the schema and holds every row the scenario and its expected tool calls refer to, with realistic values, plus a few
unrelated rows. Answer with one JSON object and nothing else: table name -> list of row objects (column -> value)."""


def _memory_text(call: SimCall) -> str:
    return json.dumps(call.tables.export(call.conn), ensure_ascii=False, default=str)


class ToolModel:
    """Every call answered by ``role`` (a :class:`JsonRole`, usually named "tool"); thread-safe."""

    def __init__(self, role: JsonRole) -> None:
        self.role = role
        self.ledger = role.ledger

    def __call__(self, call: SimCall) -> Mapping[str, Any]:
        request = {
            "tool": call.tool.openai()["function"],
            "returns": call.returns,
            "memory": json.loads(_memory_text(call)),
            "calls_so_far": list(call.history),
            "call": {"name": call.tool.name, "arguments": dict(call.arguments)},
        }
        messages = [
            {"role": "system", "content": TOOL_SYSTEM},
            {"role": "user", "content": json.dumps(request, ensure_ascii=False, default=str)},
        ]
        try:
            return self.role.ask(messages, lambda answer: answer_problem(call, answer))
        except RoleError as exc:
            raise ToolSimError(str(exc)) from exc


def memory_problem(schema: str, rows: Any) -> str | None:
    """What keeps ``rows`` from being a memory of ``schema`` (SQLite's own checks), or None."""
    try:
        open_memory(schema, rows).close()
    except MemorySchemaError as exc:
        return str(exc)
    return None


class MemoryWriter:
    """A task's memory, written by ``role`` (usually named "memory") from the domain's schema and seed (an example),
    the task's scenario and its scripted actions; once per task and process."""

    def __init__(self, role: JsonRole, domain: Domain) -> None:
        assert domain.simulation is not None
        self.role, self.ledger, self.tables = role, role.ledger, domain.simulation.tables
        self._memo: dict[str, Any] = {}
        self._lock = threading.Lock()

    def __call__(self, task: Mapping[str, Any]) -> Any:
        key = hashlib.sha256(json.dumps(task, sort_keys=True, default=str).encode()).hexdigest()
        with self._lock:
            if key in self._memo:  # a memory, or the failure to write one: its every episode ends the same way
                found = self._memo[key]
                if isinstance(found, ToolSimError):
                    raise found
                return found
        request = {
            "schema": self.tables.schema,
            "example_rows": self.tables.seed_rows(),
            "scenario": instructions(task),
            # every scripted call, a declined or refused one too (marked): the rows it refers to, and the data
            # that makes it held or refused, belong in the memory
            "expected_tool_calls": scripted_actions(task),
        }
        messages = [
            {"role": "system", "content": MEMORY_SYSTEM},
            {"role": "user", "content": json.dumps(request, ensure_ascii=False, default=str)},
        ]
        try:
            rows = self.role.ask(messages, lambda found: memory_problem(self.tables.schema, found))
        except RoleError as exc:
            failed = ToolSimError(f"the memory of task {task.get('id')!r} was not written: {exc}")
            with self._lock:
                self._memo[key] = failed
            raise failed from exc
        with self._lock:
            return self._memo.setdefault(key, rows)


def simulated_domain(base: Domain, tool: ToolModel | None, memory: MemoryWriter | None) -> Domain:
    """``base`` (a domain given as a spec) with its calls answered by ``tool`` (None: by rule) and each task's
    memory written by ``memory`` (None: the task's own ``memory`` rows, or the seed), registered as
    ``sim:<base>:<fingerprint>`` so that the gold outcome and the rewards find it by name."""
    if base.simulation is None:
        raise ValueError(
            f"--tools simulated: domain {base.name!r} has Python tools; simulated tools need a domain "
            "given as a spec (a folder with domain.json: docs/simulated_tools.md)"
        )
    if tool is None and memory is None:
        return base
    simulation = base.simulation
    if tool is not None:
        simulation = dataclasses.replace(simulation, answer=tool)
    if memory is not None:
        simulation = dataclasses.replace(simulation, memory=memory)
    ident = [tool.role.fingerprint() if tool else "rule", memory.role.fingerprint() if memory else "own"]
    name = f"sim:{base.name}:{hashlib.sha256(json.dumps(ident).encode()).hexdigest()[:10]}"
    with _LOCK:  # the same models again in this process: the domain built the first time
        if name not in _SIMULATED:
            env = simulation.env
            _SIMULATED[name] = register_domain(
                dataclasses.replace(base, name=name, simulation=simulation, make_env=lambda db_path=None: env(None))
            )
        return _SIMULATED[name]


_SIMULATED: dict[str, Domain] = {}
_LOCK = threading.Lock()
