"""``rewardkit env tools|replay|serve|check|new``: inspect a tool environment, replay calls on a fresh database, serve
it, check a domain before training on it, start one.

``add_parsers(sub)`` adds ``env``; its handlers are ``cmd_env_tools``, ``cmd_env_replay``, ``cmd_env_serve``
(a domain's tools over the Model Context Protocol, docs/mcp.md; needs the optional ``mcp`` package) and
``cmd_env_check`` (docs/domains.md#check-a-domain-rewardkit-env-check) and ``cmd_env_new``.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sqlite3
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from rewardkit.cli.lint import _count, _number
from rewardkit.envs.access import TOKEN_ENV
from rewardkit.files.jsonl import dumps
from rewardkit.files.outputs import OutputError, atomic_write_text, check_outputs
from rewardkit.serve import MAX_IDLE_S

DOMAIN_HELP = "a built-in domain (retail), an installed package's (entry point), or a domain folder's path"


class _Usage(Exception):
    """A bad task id, actions file or database: exit 2 with the message."""


def add_parsers(sub: argparse._SubParsersAction) -> None:
    env = sub.add_parser("env", help="inspect and replay the tool environments")
    actions = env.add_subparsers(dest="action", required=True)
    tools = actions.add_parser("tools", help="list a domain's tools")
    tools.add_argument("--domain", default="retail", help=DOMAIN_HELP)
    tools.add_argument("--json", action="store_true", help="print the OpenAI function specs (the tools column)")
    tools.set_defaults(func=cmd_env_tools)
    replay = actions.add_parser("replay", help="replay a task's gold actions or an actions file on a fresh copy")
    replay.add_argument("--domain", default="retail", help=DOMAIN_HELP)
    what = replay.add_mutually_exclusive_group(required=True)
    what.add_argument("--task", help="task id: replay its gold actions (declined and refused entries left out)")
    what.add_argument("--actions", type=Path, help='JSON list of {"name", "arguments"} objects')
    replay.add_argument("--db", type=Path, help="database JSON to start from (default: the vendored db.json)")
    replay.add_argument("--export", type=Path, required=True, metavar="OUT.json", help="write the final state here")
    replay.set_defaults(func=cmd_env_replay)
    serve = actions.add_parser("serve", help="serve a domain to agents and trainers (one private database per session)")
    serve.add_argument("--domain", default="retail", help=DOMAIN_HELP)
    protocol = serve.add_mutually_exclusive_group(required=True)
    protocol.add_argument("--mcp", action="store_true", help="its tools over the Model Context Protocol")
    protocol.add_argument(
        "--openenv",
        action="store_true",
        help="whole episodes (the simulated user, the reward) as an OpenEnv environment (needs openenv)",
    )
    serve.add_argument(
        "--transport", choices=("stdio", "http"), default="stdio", help="MCP only: stdio (default) or streamable HTTP"
    )
    serve.add_argument("--host", default="127.0.0.1", help="HTTP: the address to listen on (default 127.0.0.1)")
    serve.add_argument(
        "--port", type=_port, default=None, help="HTTP: the port (default 8765 for MCP, its URL ending in /mcp; 8000)"
    )
    serve.add_argument(
        "--token",
        default=os.environ.get(TOKEN_ENV),
        help=f"HTTP: required of every request (Bearer header or /TOKEN/ path prefix), and for any non-loopback "
        f"--host (default ${TOKEN_ENV})",
    )
    serve.add_argument("--max-sessions", type=_count(1), default=None, help="OpenEnv: sessions at once (default 64)")
    serve.add_argument(
        "--idle-s",
        type=_number(0.0, MAX_IDLE_S, low_open=True),
        default=None,
        help="OpenEnv: close a session idle this long (600)",
    )
    serve.set_defaults(func=cmd_env_serve)
    check = actions.add_parser("check", help="check a domain before training on it: exit 0 all pass, 1 one fails")
    check.add_argument("domain", metavar="DOMAIN", help=DOMAIN_HELP)
    check.add_argument("--json", type=Path, metavar="REPORT", help='write {"domain", "passed", "checks"} here')
    check.add_argument("--all", action="store_true", help="print every check (default: failures, one row per kind)")
    check.add_argument(
        "--tasks",
        type=Path,
        metavar="TASKS.json",
        help="check these tasks (a tasks generate output) instead of the domain's",
    )
    check.set_defaults(func=cmd_env_check)
    new = actions.add_parser("new", help="write a minimal domain (a lending library) to start yours from")
    new.add_argument("name", metavar="NAME", help="the domain's name (lower-case letters, digits, _)")
    new.add_argument("--out", type=Path, required=True, metavar="DIR", help="a new (or empty) folder to write into")
    new.set_defaults(func=cmd_env_new)


def _port(text: str) -> int:
    try:
        port = int(text)
    except ValueError:
        port = -1
    if not 0 < port < 65536:
        raise argparse.ArgumentTypeError(f"{text!r} is not a TCP port (1-65535)")
    return port


# A sentence ends at 。！？, or at . ! ? before a capital, a digit or the line's end; not at the last dot of an
# abbreviation written with dots ("e.g.", "i.e."), and not at a dot before a small letter ("etc. and").
_SENTENCE_END = re.compile(r"[。！？]|(?<!\.\w)[.!?](?=\s+[A-Z0-9\"'(\[]|\s*$)")


def _first_sentence(text: str) -> str:
    """The first sentence of the first line of ``text``; the whole line when no sentence ends in it."""
    line = text.strip().splitlines()[0].strip() if text.strip() else ""
    end = _SENTENCE_END.search(line)
    return line[: end.end()] if end is not None else line


def cmd_env_tools(args: argparse.Namespace) -> int:
    from rewardkit.envs import get_domain

    domain = get_domain(args.domain)
    specs = domain.tools
    if args.json:
        print(json.dumps(domain.tool_specs(), ensure_ascii=False, indent=2))
        return 0
    width = max(map(len, specs))
    for name, spec in specs.items():
        required = ", ".join(spec.parameters.get("required", [])) or "-"
        print(f"{name:<{width}}  {spec.risk:<5}  ({required})  {_first_sentence(spec.description)}")
    return 0


def _gold_actions(domain: str, task_id: str) -> tuple[list[Any], bool]:
    """The task's gold actions (the calls that make its gold state), and whether its user approves what they ask
    approval for."""
    from rewardkit.envs import get_domain
    from rewardkit.envs.tasks import approves, gold_actions

    tasks = get_domain(domain).tasks()
    if task_id not in tasks:
        raise _Usage(f"no task {task_id!r} in the {domain} tasks ({len(tasks)} tasks, ids like {next(iter(tasks))!r})")
    task = tasks[task_id]
    return (gold_actions(task) if task.get("evaluation_criteria") else []), approves(task)


def _file_actions(path: Path) -> list[Any]:
    from rewardkit.envs.tool_calls import ToolCall

    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise _Usage(f"actions file {path} not found") from None
    # ValueError: bad JSON, UTF-8, or an int over 4300 digits. JSON nested too deep (RecursionError) is left to the
    # CLI's own handler, which names the input file in one line, and shows the traceback under --debug.
    except (OSError, ValueError) as exc:
        raise _Usage(f"actions file {path} is not readable JSON: {getattr(exc, 'strerror', None) or exc}") from None
    if not isinstance(data, list):
        raise _Usage(f'actions file {path} must hold a JSON list of {{"name", "arguments"}} objects')
    calls = []
    for i, item in enumerate(data):
        if not isinstance(item, Mapping) or not isinstance(item.get("name"), str):
            raise _Usage(f"actions file {path}: item {i} must be an object with a string 'name'")
        arguments = item.get("arguments")
        # A malformed call is data, not a usage error: the environment answers it like a model's bad call.
        if arguments is None or isinstance(arguments, Mapping):
            calls.append(ToolCall(item["name"], arguments or {}))
        else:
            calls.append(ToolCall(item["name"], {}, "arguments must be a JSON object"))
    return calls


def _message(value: Any) -> str:
    error = value.get("error") if isinstance(value, Mapping) else None
    return str(error.get("message", "")) if isinstance(error, Mapping) else ""


def cmd_env_replay(args: argparse.Namespace) -> int:
    from rewardkit.envs import get_domain, make_env
    from rewardkit.envs.domain import DomainDataError

    try:
        # The export may be no input (the domain's own data included), and must be writable: checked before
        # anything is read.
        inputs = [("--actions", args.actions) if args.actions else None, ("--db", args.db) if args.db else None]
        check_outputs([*inputs, *get_domain(args.domain).input_files()], [("--export", args.export)])
        calls, approve = _gold_actions(args.domain, args.task) if args.task else (_file_actions(args.actions), False)
        if args.db is not None and not args.db.is_file():
            raise _Usage(f"database {args.db} not found")
        try:
            env = make_env(args.domain, args.db)
        except (OSError, ValueError, KeyError, TypeError, RecursionError, sqlite3.Error) as exc:
            if args.db is None:  # the domain's own database: its message names the file
                raise _Usage(f"the {args.domain} database is not usable: {exc}") from None
            raise _Usage(f"database {args.db} is not a valid {args.domain} db ({type(exc).__name__}: {exc})") from None
    except (_Usage, OutputError, DomainDataError) as exc:
        print(f"rewardkit env replay: {exc}", file=sys.stderr)
        return 2
    with env:
        results = []
        for call in calls:
            seen = len(env.audit())
            results += env.replay([call], approve=approve)
            *held, entry = env.audit()[seen:]  # a call its user approved: its refusal and the approval, then its run
            for row in held:
                print(f"{row['seq']:>3}  {row['tool']:<32} {row['code']}  ({row['side']})")
            line = f"{entry['seq']:>3}  {entry['tool']:<32} {results[-1].code.value}"
            print(line if results[-1].ok else f"{line}  {_message(results[-1].value)}")
        try:
            atomic_write_text(args.export, dumps(env.export(), indent=2) + "\n", "--export")
        except OutputError as exc:
            print(f"rewardkit env replay: {exc}", file=sys.stderr)
            return 2
        failed = sum(not r.ok for r in results)
        print(f"{len(results)} calls, {failed} failed; state -> {args.export}")
        print(f"state_hash {env.state_hash()}")
    return 0


def cmd_env_serve(args: argparse.Namespace) -> int:
    from rewardkit.envs import get_domain
    from rewardkit.envs.access import check_bind

    if args.openenv:
        return _serve_openenv(args)
    if args.transport == "http":
        check_bind(args.host, args.token)  # before anything loads: a refused bind says so at once
    try:
        from rewardkit.envs.mcp_server import serve
    except ImportError as exc:  # not installed, or mcp 1 (a stack that holds openenv)
        if (exc.name or "").split(".")[0] not in ("mcp", "mcp_types", "uvicorn"):
            raise
        print(
            "rewardkit env serve: the MCP server needs the mcp package, 2.3 or later: pip install 'rewardkit[mcp]'",
            file=sys.stderr,
        )
        return 2
    try:
        serve(get_domain(args.domain), args.transport, args.host, args.port or 8765, args.token)
    except KeyboardInterrupt:
        return 130  # stopped by the user: no traceback
    return 0


def _serve_openenv(args: argparse.Namespace) -> int:
    from rewardkit.envs.access import TokenGate, check_bind

    check_bind(args.host, args.token)
    try:
        import uvicorn

        from rewardkit.serve.openenv_server import IDLE_S, MAX_MESSAGE, MAX_SESSIONS, create_app
    except ModuleNotFoundError as exc:
        if (exc.name or "").split(".")[0] not in ("openenv", "uvicorn", "fastapi"):
            raise
        print("rewardkit env serve --openenv: needs openenv: pip install 'rewardkit[openenv]'", file=sys.stderr)
        return 2
    app = create_app(args.domain, args.max_sessions or MAX_SESSIONS, args.idle_s or IDLE_S)
    if args.token is not None:
        app = TokenGate(app, args.token)
    port = args.port or 8000
    print(f"serving {args.domain} as an OpenEnv environment at http://{args.host}:{port} (ws: /ws)", file=sys.stderr)
    try:
        # A frame uvicorn buffers: a few times the largest message answered (past it the socket closes, 1009).
        ws_max = 4 * MAX_MESSAGE
        uvicorn.run(app, host=args.host, port=port, log_level="warning", access_log=False, ws_max_size=ws_max)
    except KeyboardInterrupt:
        return 130
    return 0


def _domain_sources(ref: str) -> list[tuple[str, Path]]:
    """The domain's own module when ``ref`` is its path (a folder's ``__init__.py``): an input, like its data."""
    path = Path(ref)
    module = path / "__init__.py" if path.is_dir() else path
    return [("DOMAIN", module)] if module.is_file() else []


def cmd_env_check(args: argparse.Namespace) -> int:
    from rich.console import Console

    from rewardkit.envs import get_domain
    from rewardkit.lint.render import checks_table
    from rewardkit.runs.domains.domain_check import check_domain
    from rewardkit.runs.tasks.task_file import read_tasks
    from rewardkit.testing.report import safe_text

    domain = get_domain(args.domain)  # DomainError: one line, exit 2
    report_path = ("--json", args.json) if args.json is not None else None
    given = [("--tasks", args.tasks)] if args.tasks is not None else []
    check_outputs([*domain.input_files(), *_domain_sources(args.domain), *given], [report_path])
    tasks = read_tasks(args.tasks, "--tasks") if args.tasks is not None else None
    report = check_domain(args.domain, tasks)
    failed = len(report.failed())
    verdict = f"{failed} of {len(report.checks)} checks failed" if failed else f"all {len(report.checks)} checks passed"
    Console(width=max(120, Console().width)).print(
        checks_table(report.table_rows(every=args.all), safe_text(f"{args.domain}: {verdict}"))
    )
    if args.json is not None:
        atomic_write_text(args.json, dumps(report.as_dict(), indent=2) + "\n", "--json")
    return 0 if report.passed else 1


def cmd_env_new(args: argparse.Namespace) -> int:
    from rewardkit.envs.registry import new_domain

    for path in new_domain(args.name, args.out):
        print(path)
    print(f"next: rewardkit env check {args.out}", file=sys.stderr)
    return 0
