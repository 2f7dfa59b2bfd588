"""End to end: `swift deploy` of the tiny model plays every role of B1 at once (task proposer, memory writer, tool
simulator, agent, user, judge) on the merchant spec. The plumbing runs and every count reconciles; what a random tiny
model yields (nothing usable, counted by reason) is whatever it yields."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from _deploy import swift_deploy
from test_e2e_grpo import ROOT

from rewardkit.cli import main

SPEC = ROOT / "examples" / "merchant_spec"
NAME = "tiny-b1"


def report(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


def roles(found: dict) -> dict[str, dict]:
    return {entry["role"]: entry for entry in found["ledger"]}


@pytest.mark.e2e
def test_the_tiny_model_as_every_role_of_b1(tiny_agent_model: Path, tmp_path: Path) -> None:
    with swift_deploy(tiny_agent_model, tmp_path / "deploy.log", NAME) as url:
        tasks, generated = tmp_path / "tasks.json", tmp_path / "generate.json"
        code = main(
            [
                "tasks",
                "generate",
                "--domain",
                str(SPEC),
                "--model",
                url,
                "--n",
                "2",
                "--out",
                str(tasks),
                "--report",
                str(generated),
                "--judge",
                url,
                "--attempts",
                "2",
            ]
        )
        assert code == 0
        made = report(generated)
        # Every blueprint asked for is kept or rejected under one reason; the proposer was asked at least twice.
        assert made["requested"] == 2 == made["kept"] + sum(made["rejected"].values())
        assert roles(made)["proposer"]["requests"] >= 2
        runs = {
            # The memory LLM writes each task's memory; the tool LLM answers on the seed's; the agent and the user
            # talk on rule-answered tools; the judge reviews the gold agent's trajectories.
            "memory": ["--tools", "simulated", "--memory-model", url, "--agent", "gold"],
            "tool": ["--tools", "simulated", "--tool-model", url, "--agent", "gold"],
            "talk": ["--tools", "simulated", "--agent", url, "--user", url, "--max-turns", "2", "--max-tokens", "32"],
            "judge": ["--tools", "simulated", "--agent", "gold", "--judge", url],
        }
        for name, flags in runs.items():
            out, where = tmp_path / f"{name}.jsonl", tmp_path / f"{name}.json"
            code = main(
                [
                    "synth",
                    "agent",
                    "--domain",
                    str(SPEC),
                    *flags,
                    "--limit",
                    "2",
                    "--no-progress",
                    "--out",
                    str(out),
                    "--report",
                    str(where),
                ]
            )
            assert code == 0, name
    found = {name: report(tmp_path / f"{name}.json") for name in runs}
    for name, one in found.items():
        assert one["read"] == 2 == one["kept"] + sum(one["rejected"].values()), name
        assert sum(one["faults"].values()) == sum(one["rejected"].values()), name
    # The tiny model writes no memory that fits the schema, and no tool answer that fits its returns schema: each
    # task ends as tool_sim_error, the tools' fault, before the agent is asked anything; 3 answers per memory.
    for name in ("memory", "tool"):
        assert found[name]["rejected"] == {"tool_sim_error": 2} and found[name]["faults"]["tool"] == 2
        assert roles(found[name])[name]["invalid"] >= 2
    assert roles(found["memory"])["memory"]["requests"] == 6  # 2 tasks x 3 attempts, written once per task
    # The tiny agent and user talk (their words are whatever they are) until the turns run out.
    assert roles(found["talk"])["agent"]["requests"] >= 2 and roles(found["talk"])["user"]["requests"] >= 2
    # The gold agent passes the rules on both tasks; each trajectory gets the tiny judge's verdict or a judge_error.
    judged = found["judge"]
    assert len(judged["judged"]) == 2 and roles(judged)["judge"]["requests"] >= 2
    assert judged["kept"] + judged["rejected"].get("judge_rejected", 0) + judged["rejected"].get("judge_error", 0) == 2
