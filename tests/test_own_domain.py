"""A domain written outside rewardkit, as docs/domains.md writes it, found by its path everywhere.

The test writes the docs' own two files into a temporary folder, then runs the commands the page runs (in this
process, through ``rewardkit.cli.main``) and scores a gold episode with ``task_completion`` from a row whose
``domain`` cell is the folder's path. Nothing is mocked: the domain's SQLite database and the harness really run.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from rewardkit.envs import get_domain
from rewardkit.envs.registry import DomainError

DOCS = Path(__file__).parents[1] / "docs" / "domains.md"
BLOCK = re.compile(r"```(?:python|json|text)\n# file: (\S+)\n(.*?)```", re.DOTALL)


@pytest.fixture(scope="module")
def library(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The docs' example domain, written file by file into a folder outside the package. The blocks are the
    starter's files, as ``rewardkit env new library`` writes them: the page shows what the command gives."""
    from rewardkit.envs.registry import STARTER, STARTER_FILES

    root = tmp_path_factory.mktemp("own")
    blocks = BLOCK.findall(DOCS.read_text(encoding="utf-8"))
    assert [name for name, _ in blocks] == [f"library/{f}" for f in STARTER_FILES]
    assert [text for _, text in blocks] == [(STARTER / f).read_text(encoding="utf-8") for f in STARTER_FILES]
    for name, text in blocks:
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text, encoding="utf-8")
    return root / "library"


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    from rewardkit.cli import main

    capsys.readouterr()
    code = main([*map(str, args)])
    out, err = capsys.readouterr()
    return code, out, err


def test_the_domain_is_found_by_its_path(library: Path) -> None:
    domain = get_domain(str(library))
    assert domain.name == "library" and set(domain.tools) == {"find_book", "lend_book"}
    assert get_domain("library") is domain  # registered under its own name once loaded
    assert domain.write_tools == {"lend_book"}


def test_the_docs_commands_run_on_it(library: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "env", "tools", "--domain", library)
    assert code == 0 and "find_book" in out and "lend_book" in out
    code, _, err = run(capsys, "env", "replay", "--domain", library, "--task", "0", "--export", tmp_path / "out.json")
    # The gold lends b1 (Dune) to m7: the export shows the loan and the book unavailable.
    state = json.loads((tmp_path / "out.json").read_text())
    assert code == 0, err
    assert state["loans"] == [{"book_id": "b1", "member_id": "m7"}] and state["books"][0]["available"] == 0
    code, _, err = run(
        capsys, "build", "tau2-grpo", "--domain", library, "--split", "train", "--out", tmp_path / "r.jsonl"
    )
    rows = [json.loads(line) for line in (tmp_path / "r.jsonl").read_text().splitlines()]
    assert code == 0 and len(rows) == 6 and {r["domain"] for r in rows} == {str(library)}, err  # train: 0-5
    out_file = tmp_path / "sft.jsonl"
    args = ["synth", "agent", "--domain", library, "--agent", "gold", "--user", "scripted", "--split", "train"]
    code, _, err = run(capsys, *args, "--out", out_file, "--no-progress")
    assert code == 0, err
    assert len(out_file.read_text().splitlines()) == 6  # every gold episode completes its task: all six are kept
    code, out, err = run(capsys, "env", "check", library)
    # The headline names the domain's folder, so a long temporary path can wrap it: read the words, not the lines.
    # 2 schema + 1 idempotency + 9 gold + 9 outputs + 9 do_nothing + 6 say_only (the lending tasks) + 4 = 40
    assert code == 0 and "all 40 checks passed" in " ".join(out.split()), out + err
    out_dir = tmp_path / "eval"
    args = ["eval", "agent", "--domain", library, "--agent", "gold", "--user", "scripted", "--split", "test"]
    code, out, err = run(capsys, *args, "--trials", "2", "--out-dir", out_dir, "--no-progress")
    summary = json.loads((out_dir / "summary.json").read_text(encoding="utf-8"))
    # 3 test tasks x 2 trials, the gold agent: pass^1 = pass^2 = 1; its calls: 2 + 1 + 1 per trial, all OK.
    assert code == 0 and [p["value"] for p in summary["pass_hat_k"]] == [1.0, 1.0], out + err
    assert summary["operations"] == {"calls": 8, "ok": 8, "success_rate": 1.0}


def test_task_completion_reads_the_domain_from_the_row(library: Path) -> None:
    from rewardkit.rewards import TaskCompletion

    task = get_domain(str(library)).tasks()["0"]
    call = '<tool_call>\n{"name": "%s", "arguments": %s}\n</tool_call>'
    gold = [{"role": "user", "content": "I want Dune"}]
    for action in task["evaluation_criteria"]["actions"]:
        gold += [
            {"role": "assistant", "content": call % (action["name"], json.dumps(action["arguments"]))},
            {"role": "tool", "content": "{}"},
        ]
    done = [*gold, {"role": "assistant", "content": "Done: it is yours for 14 days."}]
    nothing = [gold[0], {"role": "assistant", "content": "Done: it is yours for 14 days."}]
    rows = {"messages": [done, nothing], "task": [task, task], "domain": [str(library)] * 2}
    # The gold reaches the gold state and says "14": 1.0; saying it without lending leaves the state unchanged: 0.
    assert TaskCompletion()(["", ""], **rows) == [1.0, 0.0]


@pytest.mark.parametrize(
    ("ref", "message"),
    [
        ("nosuch", "unknown domain 'nosuch'; known domains: "),  # not a name, no path
        ("./missing-domain", "missing-domain not found (a domain folder holds an __init__.py)"),
        ("{tmp}/empty", "defines neither DOMAIN nor load_domain()"),
        ("{tmp}/broken", "importing {tmp}/broken/__init__.py raised ZeroDivisionError"),
        ("{tmp}/wrong.py", "defines int, not a rewardkit.envs.Domain"),
    ],
    ids=["unknown", "missing", "no-domain", "raises", "wrong-type"],
)
def test_a_domain_that_cannot_be_found_or_loaded_says_why(tmp_path: Path, ref: str, message: str) -> None:
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "__init__.py").write_text("X = 1\n")
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / "__init__.py").write_text("1 / 0\n")
    (tmp_path / "wrong.py").write_text("DOMAIN = 3\n")
    with pytest.raises(DomainError, match=re.escape(message.format(tmp=tmp_path))):
        get_domain(ref.format(tmp=tmp_path))


def test_an_unknown_domain_is_one_line_and_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "env", "tools", "--domain", "nosuch")
    assert code == 2 and "unknown domain 'nosuch'" in err and len(err.strip().splitlines()) == 1


def test_episodes_through_ms_swifts_scheduler_hooks(library: Path) -> None:
    """The ``simulated_user`` scheduler on rows whose ``domain`` is the folder's path, driven as ms-swift drives it."""
    from swift.infer_engine.protocol import ChatCompletionResponseChoice, ChatMessage, RolloutInferRequest
    from swift.rollout.agent_loop import invoke_async_hook

    from rewardkit.data_builders.tau2 import Tau2Options, build_tau2_grpo
    from rewardkit.loop.config import RolloutLimits
    from rewardkit.loop.user_sim.scripted import ScriptedSimulator
    from rewardkit.plugins.scheduler import SimulatedUserScheduler
    from rewardkit.rewards import TaskCompletion

    rows, _ = build_tau2_grpo(Tau2Options(split="train", multi_turn=True, domain=str(library)))
    row = next(r for r in rows if json.loads(r["task"])["id"] == "0")
    sched = SimulatedUserScheduler(max_turns=6, simulator=ScriptedSimulator(), limits=RolloutLimits(max_turns=6))
    req = RolloutInferRequest(messages=[dict(m) for m in row["messages"]], data_dict=row, uuid="lib0")
    invoke_async_hook(sched.on_trajectory_start([req]))
    turns = [
        '<tool_call>\n{"name": "find_book", "arguments": {"title": "Dune"}}\n</tool_call>',
        '<tool_call>\n{"name": "lend_book", "arguments": {"book_id": "b1", "member_id": "m7"}}\n</tool_call>',
        "Dune is lent to you for 14 days.",
    ]
    result: dict = {}
    for turn, text in enumerate(turns, 1):
        req.messages.append({"role": "assistant", "content": text})
        choice = ChatCompletionResponseChoice(
            index=0, message=ChatMessage(role="assistant", content=text), finish_reason="stop", token_ids=[1, 2]
        )
        result = invoke_async_hook(sched.on_turn_end(req, choice, turn))
        if result["done"]:
            break
        sched.step(req, choice, turn)
    infos = result.get("rollout_infos") or {}
    assert result["done"] and infos["tool_calls"] == 2, result
    assert [a["tool"] for a in infos["audit"]] == ["find_book", "lend_book"]  # the harness ran both on the copy
    score = TaskCompletion()(
        [""], messages=[req.messages], task=[row["task"]], domain=[row["domain"]], rollout_infos=[infos]
    )
    assert score == [1.0]


def test_an_installed_package_is_found_by_its_entry_point(
    library: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A package installed the way pip leaves one: its code and a dist-info folder with the entry point, on sys.path.
    package = tmp_path / "books_pkg"
    package.mkdir()
    code = (library / "__init__.py").read_text(encoding="utf-8").replace('name="library"', 'name="books"')
    (package / "__init__.py").write_text(code, encoding="utf-8")
    (package / "tasks.json").write_text((library / "tasks.json").read_text(encoding="utf-8"), encoding="utf-8")
    info = tmp_path / "books_pkg-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: books-pkg\nVersion: 0.1\n", encoding="utf-8")
    (info / "entry_points.txt").write_text("[rewardkit.domains]\nbooks = books_pkg:DOMAIN\n", encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    domain = get_domain("books")
    assert domain.name == "books" and set(domain.tools) == {"find_book", "lend_book"}
    from rewardkit.envs import domain_names

    assert "books" in domain_names()


def test_a_config_names_the_domain_for_every_process(library: Path, tmp_path: Path) -> None:
    """Rows may name the domain by its name when ``$REWARDKIT_CONFIG``'s ``domain`` says where it lives: a fresh
    process (a trainer rank, a rollout server), in another working directory, loads it from the config."""
    import os
    import subprocess
    import sys

    config = tmp_path / "config.yaml"
    config.write_text(f"domain: {library}\n", encoding="utf-8")
    code = (
        "import json; from rewardkit.envs import get_domain; from rewardkit.rewards import TaskCompletion\n"
        "task = get_domain('library').tasks()['4']\n"  # a read-only task: the gold state is the start state
        "said = [{'role': 'user', 'content': 'Is Ulysses in?'}, {'role': 'assistant', 'content': 'It is on loan.'}]\n"
        "print(TaskCompletion()([''], messages=[said], task=[task], domain=['library']))"
    )
    env = {**os.environ, "REWARDKIT_CONFIG": str(config)}
    proc = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert proc.returncode == 0 and proc.stdout.strip() == "[1.0]", proc.stderr
    config.write_text(f"domain: {os.path.relpath(library, tmp_path)}\n", encoding="utf-8")  # from the config's folder
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    proc = subprocess.run([sys.executable, "-c", code], cwd=elsewhere, env=env, capture_output=True, text=True)
    assert proc.returncode == 0 and proc.stdout.strip() == "[1.0]", proc.stderr
    config.write_text("domain: ./nowhere\n", encoding="utf-8")
    proc = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True)
    # The config and its key named, and the path as it was looked for: from the config's folder.
    assert f"DomainError: {config}: domain: domain {tmp_path / 'nowhere'}: " in proc.stderr


def test_the_rows_and_the_chain_name_a_path_absolute(library: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from rewardkit.data_builders.tau2 import Tau2Options, build_tau2_grpo
    from rewardkit.envs import portable_ref

    monkeypatch.chdir(library.parent)
    assert portable_ref("./library") == str(library) and portable_ref("retail") == "retail"
    rows, _ = build_tau2_grpo(Tau2Options(domain="./library", split="train"))
    assert {r["domain"] for r in rows} == {str(library)}  # any process finds it, whatever its working directory
    assert get_domain("./library") is get_domain(str(library))  # one domain, however its path is written


def test_the_agent_chain_runs_on_it(library: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`recipe run agent --domain ./library`: the data stage synthesises on it, the tiny prompt names it, and the
    GRPO runs' config names its absolute path."""
    import io

    import yaml

    from rewardkit.pipelines.agent import AgentPipeline, Options
    from rewardkit.pipelines.stages import Context, run_stages

    monkeypatch.chdir(library.parent)
    chain, ctx = AgentPipeline(Options(domain="./library")), Context(workdir=tmp_path, echo=io.StringIO())
    [data] = run_stages(chain.stages()[:1], ctx).values()
    # The tiny preset trains on the train tasks with one gold action: 2, 3 (lend_book), 4, 5 (find_book).
    assert data["domain"] == str(library) and data["tasks"] == ["2", "3", "4", "5"]
    assert data["kept"] == data["grpo_rows"] == 4
    prompt = (tmp_path / "data" / "system_prompt.txt").read_text(encoding="utf-8")
    assert prompt == "You are a library customer service agent. Use the tools.\n"
    rows = [json.loads(line) for line in (tmp_path / "data" / "grpo.jsonl").read_text().splitlines()]
    assert {r["domain"] for r in rows} == {str(library)} and {r["messages"][0]["content"] for r in rows} == {prompt}
    config = yaml.safe_load(chain.grpo_config(ctx).read_text(encoding="utf-8"))
    assert config["domain"] == str(library) and config["user_sim"] == {"kind": "scripted"}
