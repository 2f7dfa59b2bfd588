"""Where a run's config values come from: the declared default, the file, or a flag the user gave (the flag wins).

Through the real code paths: the CLI's parser, RunSpec -> run_config -> load_run_config, the scheduler, and whole
``synth agent`` / ``eval agent`` runs whose simulated user and loop limits come from the file.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest
import yaml
from sim_server import SimServer

from rewardkit.cli import build_parser, main
from rewardkit.cli.synth import _run_spec
from rewardkit.config import ConfigError
from rewardkit.loop.config import load_run_config
from rewardkit.runs.episodes.episode_log import RunError
from rewardkit.runs.episodes.spec import run_config

FILE = "FILE"  # the origin is the config file's path
OPENAI = {"kind": "openai", "base_url": "http://127.0.0.1:1/v1", "model": "m"}

CASES = [  # (file's sections, flags given, dotted key, value, origin)
    pytest.param({}, [], "user_sim.timeout_s", None, "default", id="default"),
    pytest.param({"user_sim": {"timeout_s": 5}}, [], "user_sim.timeout_s", 5.0, FILE, id="file-only"),
    pytest.param({}, ["--user-timeout", "7"], "user_sim.timeout_s", 7.0, "--user-timeout", id="flag-only"),
    pytest.param(
        {"user_sim": {"timeout_s": 5}},
        ["--user-timeout", "7"],
        "user_sim.timeout_s",
        7.0,
        "--user-timeout",
        id="both-flag-wins",
    ),
    pytest.param({"user_sim": {"retries": 0}}, [], "user_sim.retries", 0, FILE, id="retries-file"),
    pytest.param(
        {"user_sim": {"retries": 0}},
        ["--user-retries", "2"],
        "user_sim.retries",
        2,
        "--user-retries",
        id="retries-both",
    ),
    pytest.param({}, [], "rollout.max_turns", 30, "default", id="max-turns-default"),
    pytest.param({"rollout": {"max_turns": 4}}, [], "rollout.max_turns", 4, FILE, id="max-turns-file"),
    pytest.param(
        {"rollout": {"max_turns": 4}}, ["--max-turns", "9"], "rollout.max_turns", 9, "--max-turns", id="max-turns-both"
    ),
    pytest.param(
        {"rollout": {"token_budget": 99}},
        ["--max-turns", "3"],
        "rollout.token_budget",
        99,
        FILE,
        id="a-key-without-flag-stays-the-files",
    ),
    pytest.param(
        {"user_sim": OPENAI},
        ["--user", "scripted"],
        "user_sim.kind",
        "scripted",
        "--user",
        id="user-scripted-over-the-files-endpoint",
    ),
    pytest.param({"user_sim": OPENAI}, [], "user_sim.model", "m", FILE, id="model-file"),
    pytest.param({"user_sim": OPENAI}, ["--user-model", "n"], "user_sim.model", "n", "--user-model", id="model-both"),
    pytest.param(
        {"user_sim": {"backoff_s": 0.25}},
        ["--user-timeout", "7"],
        "user_sim.backoff_s",
        0.25,
        FILE,
        id="no-flag-for-it",
    ),
    pytest.param({}, ["--user-cache", "c.db"], "user_sim.cache", "c.db", "--user-cache", id="cache-flag"),
]


def write(tmp_path: Path, sections: dict[str, Any]) -> Path:
    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump(sections), encoding="utf-8")
    return path


def cli_config(command: str, *options: str) -> Any:
    """The config a ``synth agent`` / ``eval agent`` command line runs with, as the command builds it."""
    outputs = ["--out", "sft.jsonl"] if command == "synth" else ["--out-dir", "d"]
    return run_config(_run_spec(build_parser().parse_args([command, "agent", "--agent", "gold", *options, *outputs])))


@pytest.mark.parametrize(("sections", "flags", "key", "value", "origin"), CASES)
@pytest.mark.parametrize("named", ["--config", "$REWARDKIT_CONFIG"])
@pytest.mark.parametrize("command", ["synth", "eval"])
def test_a_value_comes_from_one_source_and_a_flag_wins(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    command: str,
    named: str,
    sections: dict[str, Any],
    flags: list[str],
    key: str,
    value: Any,
    origin: str,
) -> None:
    path = write(tmp_path, sections)
    if named == "--config":
        flags = [*flags, "--config", str(path)]
    else:
        monkeypatch.setenv("REWARDKIT_CONFIG", str(path))
    cfg = cli_config(command, *flags)
    section, name = key.split(".")
    got = getattr(getattr(cfg, section), name)
    assert got == value and type(got) is type(value)
    assert cfg.origin(key) == (str(path) if origin == FILE else origin)


def test_a_user_url_sets_the_endpoint_and_its_one_model(tmp_path: Path) -> None:
    path = write(tmp_path, {"user_sim": {**OPENAI, "timeout_s": 5}})
    with SimServer(models=["sim"]) as server:
        cfg = cli_config("synth", "--user", server.base_url, "--config", str(path))
    user = cfg.user_sim
    assert (user.kind, user.base_url, user.model, user.timeout_s) == ("openai", server.base_url, "sim", 5.0)
    assert [cfg.origin(f"user_sim.{k}") for k in ("kind", "base_url", "model")] == ["--user"] * 3
    assert cfg.origin("user_sim.timeout_s") == str(path)


def test_a_flag_value_is_checked_naming_the_flag() -> None:
    with pytest.raises(ConfigError, match=r"^--user-timeout: user_sim\.timeout_s: 'x' is not of type 'number'"):
        load_run_config(flags={"user_sim.timeout_s": ("--user-timeout", "x")})
    cfg = load_run_config()
    with pytest.raises(KeyError, match=r"'user_sim\.timout_s' is no setting of this config"):
        cfg.origin("user_sim.timout_s")


def test_a_model_the_file_names_is_checked_naming_the_file(tmp_path: Path) -> None:
    from rewardkit.runs.episodes.spec import build_plan

    with SimServer(models=["sim"]) as server:
        path = write(tmp_path, {"user_sim": {**OPENAI, "base_url": server.base_url, "model": "nope"}})
        spec = _run_spec(
            build_parser().parse_args(
                ["synth", "agent", "--agent", "gold", "--config", str(path), "--out", "sft.jsonl"]
            )
        )
        with pytest.raises(RunError) as info:
            build_plan(spec)
    assert str(info.value) == (
        f"user_sim.base_url ({path}) {server.base_url}: serves no model 'nope' (it serves "
        f"['sim']); fix user_sim.model ({path})"
    )


def run(command: str, tmp_path: Path, path: Path, *flags: str) -> dict[str, Any]:
    """A whole run on one task, in process; its report (synth) or summary.json (eval)."""
    common = [
        "agent",
        "--agent",
        "gold",
        "--split",
        "train",
        "--tasks",
        "50",
        "--trials",
        "1",
        "--no-progress",
        "--config",
        str(path),
        *flags,
    ]
    if command == "synth":
        report = tmp_path / "report.json"
        assert main(["synth", *common, "--out", str(tmp_path / "sft.jsonl"), "--report", str(report)]) == 0
        return json.loads(report.read_text(encoding="utf-8"))
    assert main(["eval", *common, "--out-dir", str(tmp_path / "eval")]) == 0
    return json.loads((tmp_path / "eval" / "summary.json").read_text(encoding="utf-8"))


@pytest.mark.parametrize("command", ["synth", "eval"])
def test_synth_and_eval_run_the_files_user_and_limits(tmp_path: Path, command: str) -> None:
    with SimServer(models=["sim"]) as server:
        user = {"kind": "openai", "base_url": server.base_url, "model": "sim", "retries": 0}
        path = write(tmp_path, {"user_sim": user, "rollout": {"max_turns": 2, "token_budget": 999}})
        report = run(command, tmp_path, path, "--user-timeout", "5")
        assert server.requests  # the file's simulator played the user
    assert (report["user"]["kind"], report["user"]["base_url"], report["user"]["model"]) == (
        "openai",
        server.base_url,
        "sim",
    )
    assert report["limits"] == {"max_turns": 2, "token_budget": 999, "error_budget": 10}
    settings = report["settings"]
    assert settings["user_sim.base_url"] == {"value": server.base_url, "from": str(path)}
    assert settings["user_sim.timeout_s"] == {"value": 5.0, "from": "--user-timeout"}
    assert settings["rollout.token_budget"] == {"value": 999, "from": str(path)}
    assert settings["rollout.error_budget"] == {"value": 10, "from": "default"}
    assert set(settings) >= {"user_sim.kind", "user_sim.concurrency", "rollout.max_failed_share"}


@pytest.mark.compat
def test_the_scheduler_reads_the_file_under_ms_swift_max_turns(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from rewardkit.plugins import scheduler as plugin

    path = write(tmp_path, {"rollout": {"max_turns": 6, "token_budget": 100}})
    monkeypatch.setenv("REWARDKIT_CONFIG", str(path))
    lines: list[str] = []
    handler = logging.Handler()
    handler.emit = lambda record: lines.append(record.getMessage())  # type: ignore[method-assign]
    plugin.logger.addHandler(handler)
    try:
        sched = plugin.SimulatedUserScheduler(max_turns=3)
    finally:
        plugin.logger.removeHandler(handler)
    assert (sched.max_turns, sched.limits.token_budget, sched.limits.error_budget) == (3, 100, 10)
    [line] = [x for x in lines if x.startswith("simulated_user config:")]
    assert f"rollout.max_turns=3 (--max_turns); rollout.token_budget=100 ({path}); every other setting" in line
