"""A domain given as a spec alone: ``domain.json`` with tool schemas, the policy and the tables' schema, no Python.

This is MUA-RL's B1 starting point: a minimal database schema plus tools and a policy. Every call is answered from
the task's memory (:mod:`rewardkit.envs.simulated`): by each tool's rule (deterministic, for CI and for replay), or by
a tool LLM (``--tools simulated --tool-model URL``). ``get_domain`` loads a folder holding ``domain.json`` (and no
``__init__.py``) with :func:`load_spec`. The keys (docs/simulated_tools.md):

- ``name``, ``language`` (default ``en``), ``policy`` and ``guidelines`` (text files, the second optional);
- ``schema``: a file of ``CREATE TABLE`` statements; ``seed``: a JSON file of table -> rows, the memory of a task
  without its own ``memory`` (optional: empty tables);
- ``tasks``: a JSON file of tau2 tasks, or a list of such files; ``splits``: split name -> task ids (optional: a
  fifth of the tasks in ``test`` by the hash of their ids, :func:`held_out`, the rest in ``train``);
- ``tools``: a list of ``{"name", "description", "parameters", "risk", "returns", "rule"}``; ``returns`` is the JSON
  Schema of what the tool returns, ``rule`` (optional) how the deterministic simulator answers it.

Every problem is a :class:`~rewardkit.envs.domain.DomainDataError` naming the file and the key.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError

from rewardkit.envs.domain import Domain, DomainDataError
from rewardkit.envs.memory import MemoryError_, columns, open_memory, tables
from rewardkit.envs.simulated import Simulation
from rewardkit.envs.sqlite_env import Tables, read_rows
from rewardkit.envs.tool import ToolSpec

SPEC_FILE = "domain.json"
RULE_OPS = ("get", "list", "update", "insert", "upsert")


def _not_run(*_: Any, **__: Any) -> Any:  # the simulation answers every call; the harness never calls a tool's fn
    raise AssertionError("a simulated tool has no Python function")


def _text(folder: Path, spec: Mapping[str, Any], key: str, required: bool = True) -> str | None:
    name = spec.get(key)
    if name is None and not required:
        return None
    if not isinstance(name, str):
        raise DomainDataError(f"{folder / SPEC_FILE}: {key}: must name a file in {folder}, got {name!r}")
    try:
        return (folder / name).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise DomainDataError(f"{folder / SPEC_FILE}: {key}: cannot read {folder / name} ({exc})") from None


def _rule_problem(rule: Any, tool: ToolSpec, conn: Any) -> str | None:
    """What is wrong with a tool's rule: one op, a table of the schema, its columns, the tool's own arguments."""
    if not isinstance(rule, Mapping):
        return "must be an object"
    ops = [op for op in RULE_OPS if op in rule]
    if len(ops) != 1:
        return f"must hold exactly one of {', '.join(RULE_OPS)}, got {sorted(rule)}"
    op, table = ops[0], rule[ops[0]]
    if op in ("update", "insert", "upsert") and tool.risk != "write":
        return f"{op} writes, so the tool's risk must be 'write'"
    if table not in tables(conn):
        return f"{op}: no table {table!r} in the schema"
    known, arguments = set(columns(conn, table)), set(tool.parameters.get("properties") or {})
    for part in ("key", "where", "set", "values"):
        for column, value in (rule.get(part) or {}).items():
            if column not in known:
                return f"{part}: no column {column!r} in table {table}"
            if not isinstance(value, Mapping) and value not in arguments:
                return f"{part}.{column}: {value!r} is not an argument of {tool.name} (or write {{'value': ...}})"
    if "id" in rule and rule["id"].get("column") not in known:
        return f"id.column: no column {rule['id'].get('column')!r} in table {table}"
    return None


def _tool(entry: Any, at: str, conn: Any) -> tuple[ToolSpec, Mapping[str, Any], Mapping[str, Any] | None]:
    if not isinstance(entry, Mapping) or not isinstance(entry.get("name"), str):
        raise DomainDataError(f"{at}: must be a tool object with a string 'name'")
    if entry.get("risk") not in ("read", "write") or not isinstance(entry.get("parameters"), Mapping):
        raise DomainDataError(f"{at}: {entry['name']}: needs 'risk' (read or write) and 'parameters' (a JSON Schema)")
    try:
        tool = ToolSpec(entry.get("name"), entry.get("description", ""), entry.get("parameters"), entry.get("risk"),
                        _not_run)  # fmt: skip
        Draft202012Validator.check_schema(entry.get("returns"))
    except (ValueError, TypeError, AttributeError, SchemaError) as exc:
        message = getattr(exc, "message", None) or str(exc)
        raise DomainDataError(f"{at}: {message} (a tool needs name, description, parameters, risk and returns, "
                              "the JSON Schema of what it returns)") from None  # fmt: skip
    rule = entry.get("rule")
    problem = None if rule is None else _rule_problem(rule, tool, conn)
    if problem is not None:
        raise DomainDataError(f"{at}.rule: {problem}")
    return tool, entry["returns"], rule


def _json(folder: Path, spec: Mapping[str, Any], key: str) -> Any:
    try:
        return json.loads(_text(folder, spec, key) or "")
    except ValueError as exc:
        raise DomainDataError(f"{folder / SPEC_FILE}: {key}: {folder / spec[key]} is not JSON ({exc})") from None


def _task_files(spec: Mapping[str, Any]) -> list[str]:
    """``tasks``: one file, or a list of them (the hand-written tasks, then those ``tasks generate`` wrote)."""
    names = spec.get("tasks")
    return [names] if isinstance(names, str) else names if isinstance(names, list) else [names]


def _tasks(folder: Path, spec: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for name in _task_files(spec):
        raw = _json(folder, {"tasks": name}, "tasks")
        if not isinstance(raw, list) or not all(isinstance(t, dict) and "id" in t for t in raw):
            raise DomainDataError(f"{folder / name}: must be a JSON list of task objects, each with an 'id'")
        for task in raw:
            if str(task["id"]) in out:
                raise DomainDataError(f"{folder / name}: task id {task['id']!r} is already a task of {SPEC_FILE}'s "
                                      "tasks; give every task its own id")  # fmt: skip
            out[str(task["id"])] = task
    return out


def held_out(task_id: str, share: float = 0.2) -> bool:
    """Whether a task is in the ``test`` split of a spec without ``splits``: by the hash of its id, so adding tasks
    never moves one (a fifth held out)."""
    return int(hashlib.sha256(task_id.encode()).hexdigest()[:8], 16) / 16**8 < share


def _hashed_splits(tasks: Mapping[str, Any]) -> dict[str, list[str]]:
    return {"train": [t for t in tasks if not held_out(t)], "test": [t for t in tasks if held_out(t)]}


def load_spec(folder: str | Path) -> Domain:
    """The domain ``folder/domain.json`` describes (its tasks read when first asked for)."""
    folder = Path(folder).resolve()
    path = folder / SPEC_FILE
    try:
        spec = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise DomainDataError(f"{path}: cannot be read as a domain spec ({exc})") from None
    if not isinstance(spec, Mapping) or not isinstance(spec.get("name"), str):
        raise DomainDataError(f"{path}: must be a JSON object with a 'name'")
    schema = _text(folder, spec, "schema") or ""
    seed = read_rows(folder / spec["seed"]) if spec.get("seed") else {}
    try:
        conn = open_memory(schema, seed)
    except MemoryError_ as exc:
        raise DomainDataError(f"{path}: seed: {exc}") from None
    except Exception as exc:  # sqlite3 errors of the schema itself
        raise DomainDataError(f"{path}: schema: {folder / spec['schema']}: {exc}") from None
    if not isinstance(spec.get("tools"), list) or not spec["tools"]:
        raise DomainDataError(f"{path}: tools: must be a non-empty list of tool objects")
    found = [_tool(entry, f"{path}: tools[{i}]", conn) for i, entry in enumerate(spec["tools"])]
    conn.close()
    tools = {tool.name: tool for tool, _, _ in found}
    simulation = Simulation(
        Tables(schema, seed), tools, {t.name: r for t, r, _ in found}, {t.name: rule for t, _, rule in found if rule}
    )
    given = spec.get("splits")
    splits = (lambda: dict(given)) if isinstance(given, Mapping) else (lambda: _hashed_splits(_tasks(folder, spec)))
    policy, guidelines = _text(folder, spec, "policy") or "", _text(folder, spec, "guidelines", required=False)
    files = tuple(folder / spec[k] for k in ("schema", "seed", "policy", "guidelines") if spec.get(k))
    files += tuple(folder / name for name in _task_files(spec) if isinstance(name, str))
    return Domain(
        name=spec["name"],
        make_env=lambda db_path=None: simulation.env(None),
        tools=tools,
        tasks=lambda: _tasks(folder, spec),
        splits=splits,
        policy=lambda: policy,
        guidelines=(lambda: guidelines) if guidelines is not None else None,
        language=spec.get("language", "en"),
        data_files=(path, *files),
        simulation=simulation,
    )
