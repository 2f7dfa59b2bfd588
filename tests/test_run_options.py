"""Run options that no run could use fail before anything runs, in one line naming the option (exit 2).

Numbers: a timeout must be a finite number > 0 (0 fails every call, NaN and inf broke a worker), the
temperature a finite number >= 0, counts whole numbers. Model names: a name the endpoint does not list
stops the run before any episode; one it cannot check (no model list) stops it at the first 404.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from sim_server import SimServer, free_port

from rewardkit.cli import main
from rewardkit.loop.endpoint import check_model
from rewardkit.runs.episodes.episode_log import RunError
from rewardkit.runs.episodes.spec import RunSpec, build_plan

GOLD = {"domain": "retail", "agent": "gold", "split": "train", "tasks": ("50",)}


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("agent_timeout", math.nan, "--agent-timeout must be a finite number > 0, got nan"),
        ("agent_timeout", math.inf, "--agent-timeout must be a finite number > 0, got inf"),
        ("agent_timeout", -1.0, "--agent-timeout must be a finite number > 0, got -1.0"),
        ("agent_timeout", 0, "--agent-timeout must be a finite number > 0, got 0"),  # every call would fail
        ("user_timeout", math.nan, "--user-timeout must be a finite number > 0, got nan"),
        ("user_timeout", 0.0, "--user-timeout must be a finite number > 0, got 0.0"),
        ("temperature", math.nan, "--temperature must be a finite number >= 0, got nan"),
        ("temperature", -0.5, "--temperature must be a finite number >= 0, got -0.5"),
        ("max_tokens", math.nan, "--max-tokens must be a whole number >= 1, got nan"),
        ("max_tokens", 0, "--max-tokens must be at least 1, got 0"),
        ("agent_retries", 1.5, "--agent-retries must be a whole number >= 0, got 1.5"),
    ],
)
def test_unusable_numbers_are_refused_by_the_spec(field: str, value: float, message: str) -> None:
    with pytest.raises(RunError) as info:
        build_plan(RunSpec(**GOLD, **{field: value}))
    assert str(info.value) == message


@pytest.mark.parametrize(("field", "value"), [("temperature", 0.0), ("temperature", 1.5), ("agent_timeout", 0.5)])
def test_usable_numbers_pass(field: str, value: float) -> None:
    build_plan(RunSpec(**GOLD, **{field: value}))  # greedy decoding and short timeouts are fine


@pytest.mark.parametrize(
    ("flag", "value", "message"),
    [
        ("--agent-timeout", "nan", "--agent-timeout must be a finite number > 0, got nan"),
        ("--agent-timeout", "-3", "--agent-timeout must be a finite number > 0, got -3.0"),
        ("--user-timeout", "inf", "--user-timeout must be a finite number > 0, got inf"),
        ("--temperature", "nan", "--temperature must be a finite number >= 0, got nan"),
        ("--max-tokens", "0", "--max-tokens must be at least 1, got 0"),
    ],
)
@pytest.mark.parametrize("command", ["synth", "eval"])
def test_the_cli_says_it_in_one_line_and_exits_2(
    command: str, flag: str, value: str, message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = ["--out", str(tmp_path / "sft.jsonl")] if command == "synth" else ["--out-dir", str(tmp_path / "d")]
    assert main([command, "agent", "--agent", "gold", "--tasks", "50", "--split", "train", flag, value, *out]) == 2
    err = capsys.readouterr().err
    assert err == f"rewardkit {command} agent: {message}\n"
    assert not any(tmp_path.rglob("*.jsonl"))  # nothing ran


# --- model names ------------------------------------------------------------------------------------------
def test_an_agent_model_the_endpoint_does_not_serve_stops_the_run_before_any_episode() -> None:
    with SimServer(models=["qwen"]) as server, pytest.raises(RunError) as info:
        build_plan(RunSpec(**{**GOLD, "agent": server.base_url}, agent_model="qwn"))
    served = "serves no model 'qwn' (it serves ['qwen']); fix --agent-model"
    assert str(info.value) == f"agent endpoint {server.base_url}: {served}"
    assert server.count == 0  # no chat request was made


def test_a_user_model_the_endpoint_does_not_serve_stops_the_run_before_any_episode() -> None:
    with SimServer(models=["sim"]) as server, pytest.raises(RunError) as info:
        build_plan(RunSpec(**GOLD, user=server.base_url, user_model="simm"))
    assert str(info.value) == f"--user {server.base_url}: serves no model 'simm' (it serves ['sim']); fix --user-model"
    assert server.count == 0


def test_a_served_model_and_an_endpoint_that_cannot_list_pass_the_check() -> None:
    with SimServer(models=["m"]) as server:
        check_model(server.base_url, "m", "fix it")  # served: nothing to say
    with SimServer(models=["m"], list_models=False) as server:
        check_model(server.base_url, "x", "fix it")  # cannot list: the first 404 decides
    # down: the run's infrastructure failure (every episode agent_error, rerun by --resume), not a config error
    check_model(f"http://127.0.0.1:{free_port()}/v1", "x", "fix it")


def test_an_unknown_model_found_mid_run_stops_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # Before: every episode became agent_error, the run exited 0 and advised --resume.
    with SimServer(models=["m"], list_models=False) as server:
        argv = [
            "eval",
            "agent",
            "--agent",
            server.base_url,
            "--agent-model",
            "x",
            "--split",
            "train",
            "--tasks",
            "50,24",
            "--trials",
            "1",
            "--out-dir",
            str(tmp_path / "d"),
            "--no-progress",
        ]
        assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"rewardkit eval agent: agent endpoint {server.base_url}: HTTP 404 for model 'x'")
    assert err.count("\n") == 1 and "hit an infrastructure error" not in err
    log = tmp_path / "d" / "episodes.jsonl"
    assert not log.exists() or "agent_error" not in log.read_text(encoding="utf-8")  # no episode was blamed on it
