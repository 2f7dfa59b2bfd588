"""One run specification: the CLI's flags map onto a RunSpec and back, the agent chain builds the same
RunSpec its old command lines gave, runs/ and pipelines/ never touch argparse, and every infrastructure
ending (``EXCLUDED``, ``env_error`` included) earns the ``--resume`` hint of ``synth agent`` and ``eval agent``,
except in a run whose every episode lost its environment: that run fails, naming the environment servers.
"""

from __future__ import annotations

import ast
import dataclasses
import json
from pathlib import Path

import pytest
from sim_server import free_port

from rewardkit.cli import build_parser, main
from rewardkit.cli.synth import _run_spec
from rewardkit.envs.termination import EXCLUDED
from rewardkit.recipes import recipe_path
from rewardkit.runs.episodes.spec import RunSpec

ROOT = Path(__file__).resolve().parents[1]
HINT = "episode(s) hit an infrastructure error; rerun with --resume to retry them"
PROMPT = recipe_path("agent/tiny_system_prompt.txt")
OUTPUTS = {"synth": ["--out", "sft.jsonl"], "eval": ["--out-dir", "d"]}


def parsed(command: str, *options: str) -> RunSpec:
    return _run_spec(build_parser().parse_args([command, "agent", *options, *OUTPUTS[command]]))


TINY_LOOP = RunSpec(
    domain="retail",
    agent="gold",
    split="train",
    tasks=("24", "50"),
    tools=False,
    system_prompt=PROMPT,
    max_tokens=128,
    max_turns=4,
)
EVERY_FIELD = RunSpec(
    domain="retail",
    agent="http://127.0.0.1:1/v1",
    agent_model="m",
    temperature=0.7,
    agent_retries=0,
    agent_timeout=5.5,
    user="http://127.0.0.1:2/v1",
    user_model="u",
    user_retries=1,
    user_timeout=2.0,
    user_cache=Path("c.sqlite"),
    mcp="python server.py",
    split="test",
    limit=3,
    trials=2,
    rule="mua-rl",
    workers=2,
)


@pytest.mark.parametrize(
    ("command", "spec"),
    [
        ("synth", RunSpec(domain="retail", agent="gold", split="train")),
        ("eval", RunSpec(domain="retail", agent="gold", split="test", trials=4)),
        ("synth", TINY_LOOP),
        ("eval", EVERY_FIELD),
    ],
    ids=["synth-defaults", "eval-defaults", "tiny-loop", "every-field"],
)
def test_the_options_of_a_spec_parse_back_to_it(command: str, spec: RunSpec) -> None:
    assert parsed(command, *spec.options()) == spec


def test_the_cli_defaults_are_the_spec_defaults() -> None:
    # --split and --trials are the two defaults that differ between synth and eval.
    assert parsed("synth", "--agent", "gold") == RunSpec(domain="retail", agent="gold", split="train", trials=1)
    assert parsed("eval", "--agent", "gold") == RunSpec(domain="retail", agent="gold", split="test", trials=4)


@pytest.mark.parametrize(("tasks", "expected"), [("10, 57,", ("10", "57")), (" 3 ", ("3",))])
def test_tasks_are_split_on_commas_and_none_means_all(tasks: str, expected: tuple[str, ...] | None) -> None:
    assert parsed("synth", "--agent", "gold", "--tasks", tasks).tasks == expected
    assert parsed("synth", "--agent", "gold").tasks is None  # no --tasks: the whole split
    assert RunSpec(domain="retail", agent="gold", split="train", tasks=list(expected or [])).tasks == expected
    assert RunSpec(domain="retail", agent="gold", split="train", tasks=[]).tasks is None  # the API's "every task"


# "" and "," once meant the whole split, silently; an option that names no task is now an error.
@pytest.mark.parametrize("tasks", ["", ",", " , ", "\t"])
def test_a_tasks_option_without_ids_is_an_error(tasks: str) -> None:
    from rewardkit.runs.episodes.episode_log import RunError

    with pytest.raises(RunError, match=r"^--tasks .* names no task id; give comma-separated ids"):
        parsed("synth", "--agent", "gold", "--tasks", tasks)


def test_the_agent_chain_builds_the_spec_its_command_lines_gave(tmp_path: Path) -> None:
    from rewardkit.pipelines.agent import AgentPipeline, Options
    from rewardkit.pipelines.stages import Context

    ctx = Context(workdir=tmp_path)
    prompt = str(tmp_path / "data" / "system_prompt.txt")  # the data stage writes the preset's prompt there
    loop = ["--max-tokens", "128", "--max-turns", "4", "--system-prompt", prompt, "--no-tools"]
    chain = AgentPipeline(Options(eval_tasks=2))
    synth = chain.run_spec(ctx, agent="gold", user="scripted", split="train", tasks=["24", "50"])
    assert synth == parsed(
        "synth", "--agent", "gold", "--user", "scripted", "--split", "train", "--tasks", "24,50", *loop
    )
    evaluation = chain.run_spec(ctx, agent="m", user="scripted", split="test", limit=2, trials=1)
    assert evaluation == parsed(
        "eval", "--agent", "m", "--user", "scripted", *loop, "--split", "test", "--limit", "2", "--trials", "1"
    )


@pytest.mark.parametrize(
    ("preset", "overrides", "loop"),
    [
        ("tiny", {}, {"max_turns": 4, "max_tokens": 128}),  # tiny_grpo.yaml: max_turns 4, max_completion_length 128
        ("full", {}, {"max_turns": 30, "max_tokens": 2048}),  # grpo_multiturn.yaml: MUA-RL's 30 turns
        ("tiny", {"max_turns": 6}, {"max_turns": 6, "max_tokens": 128}),  # a lever's override reaches the evaluation
    ],
)
def test_the_chain_runs_the_loop_its_grpo_recipe_runs(
    tmp_path: Path, preset: str, overrides: dict[str, int], loop: dict[str, int]
) -> None:
    from rewardkit.pipelines.agent import AgentPipeline, Options
    from rewardkit.pipelines.chain import read_recipe
    from rewardkit.pipelines.stages import Context

    full = {"model": "Qwen/Qwen3-8B", "agent": "http://teacher", "user": "http://user"} if preset == "full" else {}
    chain = AgentPipeline(Options(preset=preset, **full))
    recipe = {**read_recipe(recipe_path(chain.preset.grpo)), **overrides}
    spec = chain.run_spec(Context(workdir=tmp_path), recipe=recipe, agent="m", split="train")
    assert {"max_turns": spec.max_turns, "max_tokens": spec.max_tokens} == loop


@pytest.mark.parametrize(
    ("recipe", "message"),
    [
        ({"max_completion_length": 128}, r"max_turns: None; .* must set max_turns to a positive integer"),
        ({"max_turns": 4, "max_completion_length": 0}, r"max_completion_length: 0; .* a positive integer"),
        ({"max_turns": True, "max_completion_length": 128}, r"max_turns: True; "),
    ],
)
def test_a_grpo_recipe_that_leaves_the_loop_to_defaults_is_refused(
    tmp_path: Path, recipe: dict[str, object], message: str
) -> None:
    from rewardkit.pipelines.agent import AgentPipeline, Options
    from rewardkit.pipelines.stages import Context, PipelineError

    with pytest.raises(PipelineError, match=r"^recipes/agent/tiny_grpo\.yaml: " + message):
        AgentPipeline(Options()).run_spec(Context(workdir=tmp_path), recipe=recipe, agent="m")


# The starter's task 4 only reads and says "on loan". Told to say "one" instead, an episode that only says "Done."
# says it too (case-insensitive), so the reward pays doing nothing there: the chain trains on the other tasks.
def test_the_agent_chain_leaves_out_a_task_doing_nothing_completes_and_says_so(tmp_path: Path) -> None:
    import io

    from rewardkit.envs.registry import new_domain
    from rewardkit.pipelines.agent import AgentPipeline, Options
    from rewardkit.pipelines.stages import Context

    folder = tmp_path / "library_paid"
    new_domain("library_paid", folder)
    tasks = json.loads((folder / "tasks.json").read_text(encoding="utf-8"))
    next(t for t in tasks if t["id"] == "4")["evaluation_criteria"]["communicate_info"] = ["one"]
    (folder / "tasks.json").write_text(json.dumps(tasks), encoding="utf-8")
    ctx = Context(workdir=tmp_path, echo=io.StringIO())
    # the train split's tasks with one gold action are 2, 3, 4 and 5 (0 and 1 find the book, then lend it)
    assert AgentPipeline(Options(domain=str(folder))).train_tasks(ctx) == ["2", "3", "5"]
    assert "[data] left out task(s) 4: an episode that does nothing completes them" in ctx.echo.getvalue()


def test_the_agent_data_stage_synthesises_in_process(tmp_path: Path) -> None:
    import io

    from rewardkit.pipelines.agent import AgentPipeline, Options
    from rewardkit.pipelines.stages import Context, run_stages

    chain, ctx = AgentPipeline(Options()), Context(workdir=tmp_path, echo=io.StringIO())
    [data] = run_stages(chain.stages()[:1], ctx).values()
    log = ctx.echo.getvalue()
    n = len(data["tasks"])
    assert n == len(chain.train_tasks()) > 0 and data["kept"] == data["grpo_rows"] == n  # gold completes every task
    assert (
        f"[data] rewardkit synth agent --agent gold --max-tokens 128 --user scripted --domain retail --split train "
        f"--tasks "
        f"{','.join(data['tasks'])}" in log
    )
    # The tiny preset's one-line prompt names the domain the chain runs on; the GRPO rows carry it too.
    prompt = (tmp_path / "data" / "system_prompt.txt").read_text(encoding="utf-8")
    assert prompt == "You are a retail customer service agent. Use the tools.\n"
    rows = [json.loads(line) for line in (tmp_path / "data" / "grpo.jsonl").read_text(encoding="utf-8").splitlines()]
    assert {r["domain"] for r in rows} == {"retail"} and {r["messages"][0]["content"] for r in rows} == {prompt}
    assert f"[data] read {n}  kept {n} ({n} of {n} tasks)  rejected: none" in log
    report = json.loads((tmp_path / "data" / "synth_report.json").read_text(encoding="utf-8"))
    assert (
        report["run"] == build_plan_meta(chain.run_spec(ctx, agent="gold", split="train", tasks=data["tasks"]))["run"]
    )


def build_plan_meta(spec: RunSpec) -> dict:
    from rewardkit.runs.episodes.spec import build_plan

    return build_plan(spec)[1]


@pytest.mark.parametrize("folder", ["src/rewardkit/runs", "src/rewardkit/pipelines"])
def test_runs_and_pipelines_never_import_argparse(folder: str) -> None:
    files = sorted((ROOT / folder).glob("*.py"))
    assert files
    for path in files:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
            names += [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            assert "argparse" not in names, path
            assert "rewardkit.cli" not in names and not any(n.startswith("rewardkit.cli.") for n in names), path


# -- the --resume hint ---------------------------------------------------------------------------------------
@pytest.fixture
def unreachable_tools(monkeypatch: pytest.MonkeyPatch) -> None:
    """The retail domain with a tools' server that cannot be reached: every episode ends in env_error."""
    import rewardkit.runs.episodes.spec as spec_module

    def unreachable(db_path: object) -> object:
        raise ConnectionError("tools' server at 127.0.0.1:1 refused the connection")

    real = spec_module.get_domain
    monkeypatch.setattr(spec_module, "get_domain", lambda name: dataclasses.replace(real(name), make_env=unreachable))


@pytest.mark.parametrize("command", ["synth", "eval"])
@pytest.mark.parametrize("broken", ["tools", "env_servers", None], ids=["tools-down", "env-servers-down", "healthy"])
def test_a_run_whose_every_episode_lost_its_environment_fails_naming_the_servers(
    command: str, broken: str | None, request: pytest.FixtureRequest, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Its one episode ended env_error (the tools' server, or the OpenEnv server it ran on, down from the start):
    # nothing was scored, so exit 0 with a --resume hint would pass for a run. It fails, the report still written.
    options = []
    if broken == "tools":
        request.getfixturevalue("unreachable_tools")
    elif broken == "env_servers":
        config = tmp_path / "config.yaml"
        config.write_text(f"rollout:\n  env_servers: [http://127.0.0.1:{free_port()}]\n", encoding="utf-8")
        options = ["--config", str(config)]
    out = ["--out", str(tmp_path / "sft.jsonl"), "--report", str(tmp_path / "r.json")]
    argv = (
        ["synth", "agent", "--tasks", "10", *out]
        if command == "synth"
        else ["eval", "agent", "--split", "test", "--limit", "1", "--trials", "1", "--out-dir", str(tmp_path / "d")]
    )
    assert main([*argv, "--agent", "gold", "--no-progress", *options]) == (2 if broken else 0)
    err = capsys.readouterr().err
    assert HINT not in err, err  # broken: no rerun helps before the servers are fixed; healthy: nothing to retry
    failed = f"rewardkit {command} agent: all 1 episode(s) ended env_error: the environment servers"
    assert (failed in err) is bool(broken), err
    if command == "synth":
        report = json.loads((tmp_path / "r.json").read_text(encoding="utf-8"))
        assert report["rejected"] == ({"env_error": 1} if broken else {})
    else:
        summary = json.loads((tmp_path / "d" / "summary.json").read_text(encoding="utf-8"))
        assert summary["episodes"]["infra_error"] == int(bool(broken))
        assert summary["termination"].get("env_error", 0) == int(bool(broken))


def test_every_excluded_ending_counts_as_infrastructure() -> None:
    from rewardkit.runs.episodes.synthesis import infrastructure_errors

    rejected = {t.value: 1 for t in EXCLUDED} | {"task_failed": 5, "duplicate": 2}
    # the user simulator's failure and its flagged mistake, the agent's endpoint, the tools' server, a simulated tool
    assert infrastructure_errors({"rejected": rejected}) == len(EXCLUDED) == 5
    assert infrastructure_errors({"rejected": {"task_failed": 5}}) == 0
