"""A domain given as a spec alone: ``domain.json`` with tool schemas, the policy and the tables' schema, no Python.

This is MUA-RL's B1 starting point: a minimal database schema plus tools and a policy. Every call is answered from
the task's memory (:mod:`rewardkit.envs.simulated`): by each tool's rule (deterministic, for CI and for replay), or by
a tool LLM (``--tools simulated --tool-model URL``). ``get_domain`` loads a folder holding ``domain.json`` (and no
``__init__.py``) with :func:`load_spec`. The keys (docs/simulated_tools.md):

- ``name``, ``language`` (default ``en``), ``policy`` and ``guidelines`` (text files, the second optional);
- ``schema``: a file of ``CREATE TABLE`` (and ``CREATE INDEX``) statements, nothing else
  (:mod:`rewardkit.envs.schema_sql`); ``seed``: a JSON file of table -> rows, the memory of a task without its own
  ``memory`` (optional: empty tables);
- ``tasks``: a JSON file of tau2 tasks, or a list of such files; ``splits``: split name -> task ids (optional: a
  task it does not list is in ``test`` or ``train`` by the hash of its id, :func:`~rewardkit.envs.tasks.placed`);
- ``tools``: a list of ``{"name", "description", "parameters", "risk", "returns", "rule"}``; ``returns`` is the JSON
  Schema of what the tool returns, ``rule`` (optional) how the deterministic simulator answers it.

Everything but the tasks is checked when the spec loads (the tasks when first read), and every problem is one
:class:`~rewardkit.envs.domain.DomainDataError` line naming the file and the key: a value of the wrong type, a key
the spec does not have, a file outside the folder, a ``$ref`` that points nowhere, two tools of one name.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError
from referencing import Registry
from referencing.exceptions import Unresolvable
from referencing.jsonschema import DRAFT202012

from rewardkit.envs.domain import Domain, DomainDataError
from rewardkit.envs.memory import MemorySchemaError, columns, open_memory, tables
from rewardkit.envs.schema_sql import check_schema_sql
from rewardkit.envs.schemas import DATA_KEYWORDS, ref_loop
from rewardkit.envs.simulated import Simulation
from rewardkit.envs.sqlite_env import Tables
from rewardkit.envs.tasks import placed
from rewardkit.envs.tool import ToolSpec
from rewardkit.files.jsonl import kind

SPEC_FILE = "domain.json"
SPEC_KEYS = ("name", "language", "policy", "guidelines", "schema", "seed", "tasks", "splits", "tools")
TOOL_KEYS = ("name", "description", "parameters", "risk", "returns", "rule")
RULE_PARTS = {
    "get": ("key",),
    "list": ("where",),
    "update": ("key", "set"),
    "insert": ("values", "id"),
    "upsert": ("values",),
}
RULE_OPS = tuple(RULE_PARTS)
ID_KEYS = ("column", "prefix", "width")
DOMAIN_NAME = re.compile(r"[a-z][a-z0-9_]{0,63}")  # as `rewardkit env new` takes it
TOOL_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")  # as OpenAI function calling takes it
LANGUAGE = re.compile(r"[a-z]{2,3}(?:[-_][A-Za-z0-9]{1,8})*")  # en, zh, pt-BR
MAX_ID_WIDTH = 20


def _not_run(*_: Any, **__: Any) -> Any:  # the simulation answers every call; the harness never calls a tool's fn
    raise AssertionError("a simulated tool has no Python function")


def _at(name: Any) -> str:
    """A key as a path segment: ``.price``, or ``['unit price']`` when it is no plain word."""
    return f".{name}" if isinstance(name, str) and name.isidentifier() else f"[{name!r:.40}]"


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON; write a number or null")


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    seen: dict[str, Any] = {}
    for key, value in pairs:
        if key in seen:
            raise ValueError(f"an object holds the key {key!r:.60} twice; keep one")
        seen[key] = value
    return seen


def read_json(path: Path, what: str) -> Any:
    """A JSON file of the spec, or one line naming it: NaN and Infinity, a key twice in one object and nesting too
    deep to read are refused too."""
    try:
        return json.loads(
            path.read_text(encoding="utf-8"), parse_constant=_refuse_constant, object_pairs_hook=_unique_keys
        )
    except RecursionError:
        raise DomainDataError(f"{path}: cannot be read as {what} (nested too deep)") from None
    except (OSError, ValueError) as exc:
        raise DomainDataError(f"{path}: cannot be read as {what} ({exc})") from None


def _unencodable(value: Any) -> str | None:
    """The path of the first string (a key or a value) that is no text: a lone surrogate, which a ``\\udXXX``
    escape gives and no UTF-8 file can hold. Iterative: the value may be nested as deep as JSON reads."""
    stack: list[tuple[str, Any]] = [("", value)]
    while stack:
        at, item = stack.pop()
        if isinstance(item, str) and _lone(item):
            return at
        if isinstance(item, list):
            stack += [(f"{at}[{i}]", child) for i, child in enumerate(item)]
        elif isinstance(item, Mapping):
            for key, child in item.items():
                if _lone(key):
                    return f"{at} (one of its keys)"
                stack.append((f"{at}{_at(key)}", child))
    return None


def _lone(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def _read_spec(path: Path) -> Mapping[str, Any]:
    """``domain.json``: an object of the spec's keys, all text, with a name and a language of the expected form."""
    spec = read_json(path, "a domain spec")
    if not isinstance(spec, Mapping):
        raise DomainDataError(f"{path}: must be a JSON object of {', '.join(SPEC_KEYS)}, got {kind(spec)}")
    unknown = [k for k in spec if k not in SPEC_KEYS]
    if unknown:
        raise DomainDataError(
            f"{path}: {unknown[0]!r:.60} is not a key of a domain spec (keys: {', '.join(SPEC_KEYS)})"
        )
    bad = _unencodable(spec)
    if bad is not None:
        raise DomainDataError(f"{path}: {bad.lstrip('.')}: holds a lone surrogate (a \\ud800-\\udfff escape), not text")
    name = spec.get("name")
    if not isinstance(name, str) or not DOMAIN_NAME.fullmatch(name):
        raise DomainDataError(
            f"{path}: name: must be lower-case letters, digits and _, starting with a letter, got {kind(name)}"
        )
    language = spec.get("language", "en")
    if not isinstance(language, str) or not LANGUAGE.fullmatch(language):
        raise DomainDataError(f"{path}: language: must be a language code (en, zh), got {kind(language)}")
    return spec


def _file(path: Path, key: str, name: Any) -> Path:
    """The file ``name`` (the value of ``key``) inside the spec's folder; one that leaves it is refused."""
    folder = path.parent
    if not isinstance(name, str) or not name.strip():
        raise DomainDataError(f"{path}: {key}: must name a file in {folder}, got {kind(name)}")
    try:
        found = (folder / name).resolve()
    except (OSError, ValueError, RuntimeError) as exc:  # a NUL byte, a loop of links
        raise DomainDataError(f"{path}: {key}: {name!r:.60} is not a usable file name ({exc})") from None
    if not found.is_relative_to(folder):
        raise DomainDataError(
            f"{path}: {key}: {name!r:.60} is outside the domain's folder {folder}; name a file inside it"
        )
    return found


def _text(path: Path, key: str, file: Path) -> str:
    try:
        return file.read_text(encoding="utf-8")
    except (OSError, ValueError) as exc:
        raise DomainDataError(f"{path}: {key}: cannot read {file} ({exc})") from None


def _files(path: Path, spec: Mapping[str, Any]) -> dict[str, Path]:
    """The spec's files by key (``schema``, ``policy``, ``seed``, ``guidelines`` when given), each in the folder."""
    files = {key: _file(path, key, spec.get(key)) for key in ("schema", "policy")}
    files |= {key: _file(path, key, spec[key]) for key in ("seed", "guidelines") if spec.get(key) is not None}
    return files


def _task_files(path: Path, spec: Mapping[str, Any]) -> list[Path]:
    """``tasks``: one file, or a list of them (the hand-written tasks, then those ``tasks generate`` wrote)."""
    names = spec.get("tasks")
    if isinstance(names, str):
        return [_file(path, "tasks", names)]
    if not isinstance(names, list) or not names:
        raise DomainDataError(
            f"{path}: tasks: must name a JSON file of tasks, or a non-empty list of them, got {kind(names)}"
        )
    files = [_file(path, f"tasks[{i}]", name) for i, name in enumerate(names)]
    for i, file in enumerate(files):
        if file in files[:i]:
            raise DomainDataError(f"{path}: tasks[{i}]: lists {names[i]!r:.60} twice; list each file once")
    return files


def _splits(path: Path, given: Any) -> dict[str, list[str]]:
    """``splits``: split name -> task ids (strings, or whole numbers read as strings); none when not given."""
    if given is None:
        return {}
    if not isinstance(given, Mapping):
        raise DomainDataError(f"{path}: splits: must be an object of split name -> list of task ids, got {kind(given)}")
    for name, ids in given.items():
        if not isinstance(ids, list):
            raise DomainDataError(f"{path}: splits{_at(name)}: must be a list of task ids, got {kind(ids)}")
        for j, task_id in enumerate(ids):
            if not isinstance(task_id, str) and (isinstance(task_id, bool) or not isinstance(task_id, int)):
                raise DomainDataError(f"{path}: splits{_at(name)}[{j}]: a task id is a string, got {kind(task_id)}")
    return {name: [str(i) for i in ids] for name, ids in given.items()}


def _tasks(path: Path, files: list[Path]) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for file in files:
        raw = read_json(file, "a JSON list of tasks")
        if not isinstance(raw, list) or not all(isinstance(t, dict) and "id" in t for t in raw):
            raise DomainDataError(f"{file}: must be a JSON list of task objects, each with an 'id'")
        for task in raw:
            if str(task["id"]) in out:
                raise DomainDataError(
                    f"{file}: task id {task['id']!r:.60} is already a task of {path.name}'s "
                    "tasks; give every task its own id"
                )
            out[str(task["id"])] = task
    return out


def _ref_problem(schema: Any) -> str | None:
    """The first ``$ref`` that resolves to nothing inside the schema (a remote one included: nothing is fetched)."""
    resolver = Registry().with_resource("", DRAFT202012.create_resource(schema)).resolver()
    stack = [(schema, resolver)]
    while stack:
        node, resolver = stack.pop()
        if isinstance(node, list):
            stack += [(item, resolver) for item in node]
            continue
        if not isinstance(node, Mapping):
            continue
        ref = node.get("$ref")
        try:
            if isinstance(node.get("$id"), str) and node is not schema:
                resolver = resolver.in_subresource(DRAFT202012.create_resource(node))
            if isinstance(ref, str):
                resolver.lookup(ref)
        except (Unresolvable, ValueError):  # ValueError: an $id or a $ref that is no URI
            return f"$ref {ref!r:.80} points to nothing in the schema (refs like '#/$defs/name' are read)"
        stack += [(value, resolver) for key, value in node.items() if key not in DATA_KEYWORDS]
    return None


def _json_schema(value: Any, at: str) -> Any:
    """``value`` as a JSON Schema (Draft 2020-12) whose every ``$ref`` resolves, or one line naming ``at``."""
    if not isinstance(value, Mapping | bool):
        raise DomainDataError(f"{at}: must be a JSON Schema (an object), got {kind(value)}")
    try:
        Draft202012Validator.check_schema(value)
        problem = _ref_problem(value) or ref_loop(value)
    except SchemaError as exc:
        problem = f"not a JSON Schema: {' '.join(exc.message.split())[:200]}"
    except RecursionError:
        problem = "nested too deep to read as a JSON Schema"
    if problem is not None:
        raise DomainDataError(f"{at}: {problem}")
    return value


def _constant_problem(value: Any) -> str | None:
    """Why ``{"value": ...}`` is no constant SQLite stores: a string, a number (64-bit when whole), a boolean or
    null."""
    if set(value) != {"value"}:
        return f"a constant is written {{'value': ...}}, got the keys {sorted(value)!r:.60}"
    constant = value["value"]
    if isinstance(constant, int) and not isinstance(constant, bool) and not -(2**63) <= constant < 2**63:
        return f"{constant!r:.40} does not fit a 64-bit SQLite integer"
    if constant is not None and not isinstance(constant, str | int | float):
        return f"a constant is a string, number, boolean or null, got {kind(constant)}"
    return None


def _part_problem(rule: Mapping[str, Any], part: str, known: list[str], tool: ToolSpec) -> str | None:
    """What is wrong with ``key``, ``where``, ``set`` or ``values``: column -> argument name or ``{"value": ...}``."""
    mapping = rule[part]
    if not isinstance(mapping, Mapping):
        return f"{part}: must be an object of column -> argument name (or {{'value': constant}}), got {kind(mapping)}"
    arguments = tool.parameters.get("properties") or {}
    for column, value in mapping.items():
        if column not in known:
            return f"{part}: no column {column!r:.60} in the table (columns: {', '.join(known)})"
        if isinstance(value, Mapping):
            problem = _constant_problem(value)
            if problem is not None:
                return f"{part}{_at(column)}: {problem}"
        elif not isinstance(value, str) or value not in arguments:
            return f"{part}{_at(column)}: {value!r:.60} is not an argument of {tool.name} (or write {{'value': ...}})"
    return None


def _id_problem(spec: Any, table: str, known: list[str]) -> str | None:
    """What is wrong with an insert's ``id``: ``{"column", "prefix", "width"}``, the new row's next id."""
    if not isinstance(spec, Mapping):
        return f"id: must be an object of {', '.join(ID_KEYS)}, got {kind(spec)}"
    unknown = [k for k in spec if k not in ID_KEYS]
    if unknown:
        return f"id: {unknown[0]!r:.60} is not a key of id (keys: {', '.join(ID_KEYS)})"
    if not isinstance(spec.get("column"), str) or spec["column"] not in known:
        return f"id.column: no column {spec.get('column')!r:.60} in table {table}"
    if not isinstance(spec.get("prefix", ""), str):
        return f"id.prefix: must be a string, got {kind(spec['prefix'])}"
    width = spec.get("width", 3)
    if isinstance(width, bool) or not isinstance(width, int) or not 1 <= width <= MAX_ID_WIDTH:
        return f"id.width: must be a whole number of digits from 1 to {MAX_ID_WIDTH}, got {kind(width)}"
    return None


def _rule_problem(rule: Any, tool: ToolSpec, conn: Any) -> str | None:
    """What is wrong with a tool's rule: one op, a table of the schema, its parts, their columns, the tool's own
    arguments."""
    if not isinstance(rule, Mapping):
        return f"must be an object with one of {', '.join(RULE_OPS)}, got {kind(rule)}"
    ops = [op for op in RULE_OPS if op in rule]
    if len(ops) != 1:
        return f"must hold exactly one of {', '.join(RULE_OPS)}, got {sorted(rule)!r:.80}"
    op, table = ops[0], rule[ops[0]]
    extra = [k for k in rule if k not in (op, *RULE_PARTS[op])]
    if extra:
        return f"{extra[0]!r:.60} is not a part of a {op} rule (it takes {', '.join(RULE_PARTS[op])})"
    if op in ("update", "insert", "upsert") and tool.risk != "write":
        return f"{op} writes, so the tool's risk must be 'write'"
    if not isinstance(table, str) or table not in tables(conn):
        return f"{op}: no table {table!r:.60} in the schema (tables: {', '.join(tables(conn))})"
    known = columns(conn, table)
    for part in (p for p in RULE_PARTS[op] if p in rule and p != "id"):
        problem = _part_problem(rule, part, known, tool)
        if problem is not None:
            return problem
    return _id_problem(rule["id"], table, known) if "id" in rule else None


def _tool(entry: Any, at: str, conn: Any) -> tuple[ToolSpec, Any, Mapping[str, Any] | None]:
    if not isinstance(entry, Mapping):
        raise DomainDataError(f"{at}: must be a tool object ({', '.join(TOOL_KEYS)}), got {kind(entry)}")
    unknown = [k for k in entry if k not in TOOL_KEYS]
    if unknown:
        raise DomainDataError(f"{at}: {unknown[0]!r:.60} is not a key of a tool (keys: {', '.join(TOOL_KEYS)})")
    name, description, risk = entry.get("name"), entry.get("description", ""), entry.get("risk")
    if not isinstance(name, str) or not TOOL_NAME.fullmatch(name):
        raise DomainDataError(f"{at}.name: must be 1 to 64 letters, digits, _ or -, got {kind(name)}")
    if not isinstance(description, str):
        raise DomainDataError(f"{at}.description: must be a string, got {kind(description)}")
    if risk not in ("read", "write"):
        raise DomainDataError(f"{at}.risk: must be 'read' or 'write', got {kind(risk)}")
    parameters = _json_schema(entry.get("parameters"), f"{at}.parameters")
    if not isinstance(parameters, Mapping) or parameters.get("type") != "object":
        raise DomainDataError(f'{at}.parameters: must be the JSON Schema of an object ({{"type": "object", ...}})')
    returns = _json_schema(entry.get("returns"), f"{at}.returns")
    try:
        tool = ToolSpec(name, description, parameters, risk, _not_run)
    except ValueError as exc:  # a write without the optional idempotency key, a name of the user's side
        raise DomainDataError(f"{at}: {exc}") from None
    rule = entry.get("rule")
    problem = None if rule is None else _rule_problem(rule, tool, conn)
    if problem is not None:
        raise DomainDataError(f"{at}.rule: {problem}")
    return tool, returns, rule


def _tools(path: Path, entries: Any, conn: Any) -> list[tuple[ToolSpec, Any, Mapping[str, Any] | None]]:
    """Every tool of ``tools``, each name once."""
    if not isinstance(entries, list) or not entries:
        raise DomainDataError(f"{path}: tools: must be a non-empty list of tool objects, got {kind(entries)}")
    found = [_tool(entry, f"{path}: tools[{i}]", conn) for i, entry in enumerate(entries)]
    first: dict[str, int] = {}
    for i, (tool, _, _) in enumerate(found):
        if tool.name in first:
            raise DomainDataError(
                f"{path}: tools[{first[tool.name]}] and tools[{i}] are both named {tool.name!r}; "
                "give each tool its own name"
            )
        first[tool.name] = i
    return found


def _memory(path: Path, files: Mapping[str, Path]) -> tuple[str, Any, Any]:
    """The schema (only table and index definitions: checked before anything runs it), the seed, and a memory of
    both to check the rules on."""
    schema = _text(path, "schema", files["schema"])
    check_schema_sql(schema, str(files["schema"]))
    seed = read_json(files["seed"], "the domain's seed rows") if "seed" in files else {}
    try:
        return schema, seed, open_memory(schema, seed)
    except MemorySchemaError as exc:
        raise DomainDataError(f"{path}: seed: {exc}") from None
    except DomainDataError as exc:  # a name the harness keeps
        raise DomainDataError(f"{files['schema']}: {exc}") from None


def load_spec(folder: str | Path) -> Domain:
    """The domain ``folder/domain.json`` describes (its tasks read when first asked for)."""
    path = Path(folder).resolve() / SPEC_FILE
    spec = _read_spec(path)
    files, task_files, given = _files(path, spec), _task_files(path, spec), _splits(path, spec.get("splits"))
    policy = _text(path, "policy", files["policy"])
    guidelines = _text(path, "guidelines", files["guidelines"]) if "guidelines" in files else None
    schema, seed, conn = _memory(path, files)
    try:
        found = _tools(path, spec.get("tools"), conn)
    finally:
        conn.close()
    tools = {tool.name: tool for tool, _, _ in found}
    simulation = Simulation(
        Tables(schema, seed), tools, {t.name: r for t, r, _ in found}, {t.name: rule for t, _, rule in found if rule}
    )
    return Domain(
        name=spec["name"],
        make_env=lambda db_path=None: simulation.env(None),
        tools=tools,
        tasks=lambda: _tasks(path, task_files),
        splits=lambda: placed(given, _tasks(path, task_files)),
        policy=lambda: policy,
        guidelines=(lambda: guidelines) if guidelines is not None else None,
        language=spec.get("language", "en"),
        data_files=(path, *files.values(), *task_files),
        simulation=simulation,
    )
