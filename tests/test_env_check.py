"""``rewardkit env check DOMAIN``: the docs' library domain passes, each broken copy fails its check, retail as it is.

Each domain is the docs' own two files (docs/domains.md, as tests/test_own_domain.py writes them) in a temporary
folder, with one defect written into a copy; the command runs in this process through ``rewardkit.cli.main``.
Nothing is mocked: the domain's SQLite database, the harness and ``task_completion`` really run.
"""

from __future__ import annotations

import importlib.util
import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from _retail_gold import said_only

from rewardkit.envs import get_domain

KINDS = ("schema", "idempotency", "gold", "outputs", "do_nothing", "say_only", "ids", "splits", "policy", "guidelines")
NEEDS_MCP = pytest.mark.skipif(importlib.util.find_spec("mcp") is None, reason="MCPToolSpec needs the mcp package")
DOMAIN_IMPORT = "from rewardkit.envs import Domain, ResultCode, Tables, ToolError, environment, tool, toolset\n"
MCP_IMPORT = (DOMAIN_IMPORT, DOMAIN_IMPORT + "from rewardkit.envs.mcp_env import MCPToolSpec\n")
KEYLESS = {"type": "object", "properties": {"book_id": {"type": "string"}, "member_id": {"type": "string"}}}
WRITES = (
    '    conn.execute("UPDATE books SET available = 0 WHERE book_id = ?", (book_id,))\n'
    '    conn.execute("INSERT INTO loans VALUES (?, ?)", (book_id, member_id))\n'
)
TEST = '"test": ["6", "7", "8"]'
LENDS = (0, 1, 2, 3, 6, 8)  # the starter's tasks that expect a write (lend_book); 4, 5 and 7 read and say
POLICY = 'policy=lambda: "You are a library assistant. Find the book by its title before you lend it.",'


def write_library(root: Path, name: str) -> Path:
    """The starter domain (``rewardkit env new``, the docs' example) in ``root/name``, registered as ``name``: a
    process registers each name once."""
    from rewardkit.envs.registry import new_domain

    new_domain(name, root / name)
    return root / name


def edit(path: Path, old: str, new: str) -> None:
    text = path.read_text(encoding="utf-8")
    assert text.count(old) == 1, f"{path.name} no longer holds {old!r} once"
    path.write_text(text.replace(old, new), encoding="utf-8")


def edit_task(task_id: str, **criteria: Any) -> Callable[[list[dict[str, Any]]], None]:
    """A change of one task's ``evaluation_criteria`` keys."""

    def change(tasks: list[dict[str, Any]]) -> None:
        next(t for t in tasks if t["id"] == task_id)["evaluation_criteria"].update(criteria)

    return change


def run(capsys: pytest.CaptureFixture[str], *args: Any) -> tuple[int, str, str]:
    from rewardkit.cli import main

    capsys.readouterr()
    code = main([*map(str, args)])
    out, err = capsys.readouterr()
    return code, out, err


def check(capsys: pytest.CaptureFixture[str], domain: Path | str, report: Path) -> tuple[int, dict[str, Any], str]:
    code, out, err = run(capsys, "env", "check", domain, "--json", report)
    assert err == "", err
    return code, json.loads(report.read_text(encoding="utf-8")), out


def test_the_starter_passes_every_check(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = write_library(tmp_path, "library_ok")
    code, report, out = check(capsys, folder, tmp_path / "report.json")
    assert code == 0 and report["passed"] and report["domain"] == str(folder), report
    assert [c["name"] for c in report["checks"]] == [
        "schema:find_book",
        "schema:lend_book",
        "idempotency:lend_book",
        *(f"gold:{i}" for i in range(9)),
        *(f"outputs:{i}" for i in range(9)),
        *(f"do_nothing:{i}" for i in range(9)),
        *(f"say_only:{i}" for i in LENDS),
        "ids",
        "splits",
        "policy",
        "guidelines",
    ]
    assert all(c["passed"] and c["detail"] for c in report["checks"])
    # 2 schema + 1 idempotency + 9 gold + 9 outputs + 9 do_nothing (every task) + 6 say_only (the lending ones:
    # saying is the whole of a read-and-say task) + ids, splits, policy, guidelines = 40
    assert "all 40 checks passed" in " ".join(out.split()) and "gold:*" in out  # one table row per kind when all pass
    _, every, _ = run(capsys, "env", "check", folder, "--all")
    assert "say_only:1" in every and "TaskCompletion scores saying '14' with no tool call 0" in every


# (case id, edits of __init__.py, change of tasks.json, the checks that fail). The gold's state change, do_nothing
# and say_only are one fact seen three ways (a gold whose writes change nothing leaves the fresh state as the gold
# state): no copy fails one of them alone, so those cases name every check that sees it.
CASES = [
    # parameters that are no JSON Schema ("text" is no type): ToolSpec refuses them, an MCP server's listing is not
    # checked when it is read (the environment still runs the harness's own ToolSpec)
    pytest.param(
        [
            MCP_IMPORT,
            (
                "tools=TOOLS,",
                'tools={**TOOLS, "find_book": MCPToolSpec("find_book", "Find a book.", '
                '{"type": "object", "properties": {"title": {"type": "text"}}}, "read")},',
            ),
        ],
        None,
        {"schema:find_book"},
        id="schema-invalid",
        marks=NEEDS_MCP,
    ),
    # a tool the model is told nothing about: the OpenAI spec's description is empty
    pytest.param(
        [
            (DOMAIN_IMPORT, DOMAIN_IMPORT + "from rewardkit.envs import ToolSpec\n"),
            ("toolset(find_book,", 'toolset(ToolSpec("find_book", "", find_book.parameters, "read", find_book.fn),'),
        ],
        None,
        {"schema:find_book"},
        id="no-description",
    ),
    # a write tool listed without the optional idempotency_key (an MCP server's listing: no check at construction)
    pytest.param(
        [
            MCP_IMPORT,
            (
                "tools=TOOLS,",
                f'tools={{**TOOLS, "lend_book": MCPToolSpec("lend_book", "Lend a book.", {KEYLESS!r}, "write")}},',
            ),
        ],
        None,
        {"idempotency:lend_book"},
        id="no-idempotency-key",
        marks=NEEDS_MCP,
    ),
    # task 1's gold lends b3, which is on loan: the gold write fails (the builder's gold_fails), so the reward
    # refuses the task and do_nothing/say_only are not scored; "on loan" is still in find_book's result
    pytest.param(
        [],
        edit_task(
            "1",
            actions=[
                {"name": "find_book", "arguments": {"title": "Ulysses"}},
                {"name": "lend_book", "arguments": {"book_id": "b3", "member_id": "m2"}},
            ],
            communicate_info=["on loan"],
        ),
        {"gold:1"},
        id="gold-write-fails",
    ),
    # task 1's gold calls a tool the domain lacks: the shared task checks (bad_evaluation_criteria) refuse it
    pytest.param([], edit_task("1", actions=[{"name": "renew_book", "arguments": {}}]), {"gold:1"}, id="unknown-tool"),
    # lend_book crashes (KeyError inside the tool): the replay raises, reported as the gold failing, no traceback
    pytest.param(
        [('return {"book_id": book_id, "member_id": member_id, "due_in_days": 14}', 'return {}["due_in_days"]')],
        None,
        {f"gold:{i}" for i in LENDS},
        id="tool-raises",
    ),
    # lend_book writes nothing: the gold state is the fresh state, and saying "14" without a call would reach it. The
    # verdict refuses such a task (no_change), for training as for the check, so its episodes are not scored
    pytest.param([(WRITES, "")], None, {f"gold:{i}" for i in LENDS}, id="write-is-a-no-op"),
    # the same, and task 0 expects nothing said: no_change comes first (before no_evidence), with the same rows
    pytest.param(
        [(WRITES, "")],
        edit_task("0", communicate_info=[]),
        {f"gold:{i}" for i in LENDS},
        id="no-op-write-nothing-to-say",
    ),
    # task 4 only reads and says nothing: doing nothing reaches its gold (no_evidence), its episodes not scored
    pytest.param([], edit_task("4", communicate_info=[]), {"gold:4"}, id="reads-nothing-to-say"),
    # task 0 expects "21 days", which no tool result and no scenario holds (lend_book says due_in_days 14)
    pytest.param([], edit_task("0", communicate_info=["21 days"]), {"outputs:0"}, id="output-never-shown"),
    # task 0 twice in tasks.json: tasks() keys by id and silently keeps one of them
    pytest.param([], lambda tasks: tasks.append(dict(tasks[0])), {"ids"}, id="duplicate-id"),
    # the test split names task 9, which does not exist
    pytest.param([(TEST, '"test": ["6", "7", "8", "9"]')], None, {"splits"}, id="split-names-missing-task"),
    # task 1 in train and in test: an evaluation on test would score a task trained on
    pytest.param([(TEST, '"test": ["1", "6", "7", "8"]')], None, {"splits"}, id="splits-overlap"),
    # task 8 in no split: nothing would ever train or evaluate on it
    pytest.param([(TEST, '"test": ["6", "7"]')], None, {"splits"}, id="task-in-no-split"),
    # a policy of blanks: the agent gets no rules
    pytest.param([(POLICY, 'policy=lambda: "  ",')], None, {"policy"}, id="empty-policy"),
    # no guidelines: an LLM user simulator would get no part to play
    pytest.param(
        [('guidelines=lambda: _text("guidelines.md"),', "guidelines=None,")], None, {"guidelines"}, id="no-guidelines"
    ),
]


@pytest.mark.parametrize(("code_edits", "tasks_edit", "failing"), CASES)
def test_a_broken_copy_fails_its_check_only(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    request: pytest.FixtureRequest,
    code_edits: list[tuple[str, str]],
    tasks_edit: Callable[[list[dict[str, Any]]], None] | None,
    failing: set[str],
) -> None:
    name = "library_" + re.sub(r"\W", "_", request.node.callspec.id)
    folder = write_library(tmp_path, name)
    for old, new in code_edits:
        edit(folder / "__init__.py", old, new)
    if tasks_edit is not None:
        tasks = json.loads((folder / "tasks.json").read_text(encoding="utf-8"))
        tasks_edit(tasks)
        (folder / "tasks.json").write_text(json.dumps(tasks), encoding="utf-8")
    code, report, out = check(capsys, folder, tmp_path / "report.json")
    failed = {c["name"]: c["detail"] for c in report["checks"] if not c["passed"]}
    assert code == 1 and not report["passed"] and set(failed) == failing, failed
    assert all(failed.values()) and all(n in out for n in failing)  # each failure has its row in the table
    assert {c["name"].partition(":")[0] for c in report["checks"]} <= set(KINDS)


def test_the_failures_say_why(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = write_library(tmp_path, "library_why")
    edit(folder / "__init__.py", TEST, '"test": ["1", "6", "7", "8", "9"]')
    _, report, _ = check(capsys, folder, tmp_path / "report.json")
    splits = next(c for c in report["checks"] if c["name"] == "splits")["detail"]
    assert splits == "test names 1 task(s) that do not exist: '9'; train and test share 1 task(s): '1'"


@pytest.mark.parametrize(
    ("make", "message"),
    [
        # @tool refuses a parameter with no JSON Schema at import: the domain does not load, a usage error
        (lambda f: edit(f / "__init__.py", "title: str)", "title: set)"), "importing"),
        # the report would overwrite the domain's tasks (its data_files) or its own code
        (lambda f: "tasks.json", "--json {folder}/tasks.json is also an input"),
        (lambda f: "__init__.py", "--json {folder}/__init__.py is also an input (DOMAIN"),
    ],
    ids=["schema-refused-at-import", "json-onto-tasks", "json-onto-code"],
)
def test_usage_errors_are_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], request: pytest.FixtureRequest, make: Any, message: str
) -> None:
    folder = write_library(tmp_path, "library_" + re.sub(r"\W", "_", request.node.callspec.id))
    target = make(folder)
    before = {p.name: p.read_bytes() for p in folder.iterdir() if p.is_file()}
    report = folder / target if isinstance(target, str) else tmp_path / "report.json"
    code, out, err = run(capsys, "env", "check", folder, "--json", report)
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1, err
    assert err.startswith("rewardkit env check: ") and message.format(folder=folder) in err
    assert {p.name: p.read_bytes() for p in folder.iterdir() if p.is_file()} == before  # nothing overwritten


def test_an_unknown_domain_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "env", "check", "nosuch")
    assert code == 2 and "unknown domain 'nosuch'" in err and len(err.strip().splitlines()) == 1


# What retail's bundled data fails, pinned (about 3 s): two gold writes fail (the builder's gold_fails: 64 and 105),
# three golds change nothing and name nothing to show (no_evidence: 25, 57, 65), and 15 tasks expect outputs that
# no gold tool result shows (sums the agent must compute, facts read by calls the gold does not make, "481.50" where
# the tools say 481.5). Everything else passes.
RETAIL_UNSHOWN = (19, 21, 24, 36, 37, 38, 39, 54, 59, 76, 89, 95, 103, 104, 108)
RETAIL_FAILS = {"gold:64", "gold:105", "gold:25", "gold:57", "gold:65", *(f"outputs:{i}" for i in RETAIL_UNSHOWN)}


def test_retail_fails_only_what_its_data_fails(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, report, out = check(capsys, "retail", tmp_path / "retail.json")
    failed = {c["name"] for c in report["checks"] if not c["passed"]}
    assert code == 1 and failed == RETAIL_FAILS, sorted(failed - RETAIL_FAILS) + sorted(RETAIL_FAILS - failed)
    kinds = {k: sum(c["name"].startswith(k + ":") for c in report["checks"]) for k in KINDS[:6]}
    # a schema check a tool, an idempotency check a write, a gold and an outputs check a task; do_nothing on each task
    # the reward scores (all but the 5 it refuses: gold_fails 64, 105; no_evidence 25, 57, 65); say_only on those but
    # the ones whose gold only reads and whose outputs are all it asks (said); then ids, splits, policy
    # and guidelines, one check each
    retail = get_domain("retail")
    scored = [t for t in retail.tasks() if f"gold:{t}" not in RETAIL_FAILS]
    # 24, 62, 67 and 68 in tau2-bench's release: the gold only reads, and its outputs are all it asks
    said = {t for t in scored if said_only(t, retail.write_tools, retail.stop_tools)}
    assert kinds == {
        "schema": len(retail.tools),
        "idempotency": len(retail.write_tools),
        "gold": len(retail.tasks()),
        "outputs": len(retail.tasks()),
        "do_nothing": len(scored),
        "say_only": len(scored) - len(said),
    }
    assert len(report["checks"]) == sum(kinds.values()) + 4
    splits = next(c for c in report["checks"] if c["name"] == "splits")
    assert splits["passed"] and f"base holds all {len(retail.tasks())}" in splits["detail"]  # besides train, test
    assert f"{len(RETAIL_FAILS)} of {len(report['checks'])} checks failed" in out
    say = {c["name"].split(":")[1] for c in report["checks"] if c["name"].startswith("say_only:")}
    assert said and say == set(scored) - said  # those are the ones it leaves out
    for task in ("25", "57", "65"):
        gold = next(c for c in report["checks"] if c["name"] == f"gold:{task}")
        assert gold["detail"].startswith("no_evidence: the gold leaves the database as it was"), gold


# A transfer task (retail 10, 12 and 50: the gold only hands over to a human, compare_args []) changes nothing, so
# doing nothing reaches its gold state. Before, env check scored the do-nothing episodes of write tasks only, and the
# reward paid each of these 1.0 unseen; now each is scored, and must be 0, a polite refusal included.
@pytest.fixture(scope="module")
def retail_checks() -> dict[str, Any]:
    from rewardkit.runs.domains.domain_check import check_domain

    return {c.name: c for c in check_domain("retail").checks}


@pytest.mark.parametrize("task", ["10", "12", "50"])
def test_do_nothing_is_scored_on_a_transfer_task(retail_checks: dict[str, Any], task: str) -> None:
    checks = retail_checks
    nothing = checks[f"do_nothing:{task}"]
    assert nothing.passed and "(ending 'Done.', or refusing politely) 0" in nothing.detail, nothing
    assert checks[f"say_only:{task}"].passed  # nothing to say: an episode saying nothing is the same, still 0
