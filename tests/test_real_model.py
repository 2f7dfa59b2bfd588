"""The real small model: converted from its GGUF file once, served by ``swift deploy``, and playing the customer in a
real run (``eval agent --user real-model``), its faults counted by kind and never the agent's 0."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from transformers import AutoTokenizer

from rewardkit.cli import main
from rewardkit.loop.user_review import KINDS
from rewardkit.pipelines.real_model import END_OF_TURN, build_real_model, default_folder, gguf_file, is_built
from rewardkit.pipelines.stages import PipelineError


def test_a_folder_that_is_not_a_conversion_is_never_written_over(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("mine", encoding="utf-8")
    assert not is_built(tmp_path, gguf_file())
    with pytest.raises(PipelineError, match=rf"^{tmp_path}: exists and is not a converted model; remove it"):
        build_real_model(tmp_path)
    assert (tmp_path / "notes.txt").read_text(encoding="utf-8") == "mine"


@pytest.mark.e2e
def test_the_real_model_plays_the_customer_in_one_command(tmp_path: Path) -> None:
    # The conversion (30-80 s, kept in the user's cache folder) ends its turns at <|im_end|>, not the GGUF's
    # <|im_start|>: a served model stops by itself.
    folder = build_real_model()
    assert folder == default_folder().resolve() and is_built(folder, gguf_file())
    tokenizer = AutoTokenizer.from_pretrained(folder)
    assert tokenizer.eos_token == END_OF_TURN
    assert json.loads((folder / "generation_config.json").read_text())["eos_token_id"] == tokenizer.eos_token_id

    out = tmp_path / "eval"
    args = ["eval", "agent", "--agent", "gold", "--user", "real-model", "--split", "train", "--tasks", "0,1"]
    args += ["--trials", "1", "--max-turns", "10", "--user-max-tokens", "24", "--no-progress", "--out-dir", str(out)]
    assert main(args) == 0
    episodes = [json.loads(line) for line in (out / "episodes.jsonl").read_text().splitlines()]
    assert len(episodes) == 2
    for episode in episodes:
        # The model answered every turn (no user_sim_error); whatever it got wrong is a user fault of a known kind,
        # and an episode it spoiled is never scored 0 for the agent (the gold agent reached the goal in each).
        assert episode["termination"] != "user_sim_error", episode.get("error")
        assert {flag["kind"] for flag in episode["user_flags"]} <= set(KINDS)
        assert episode["reward"] == 1.0 or episode["user_flags"], episode
    summary = json.loads((out / "summary.json").read_text())
    flagged = sum(bool(e["user_flags"]) for e in episodes)
    assert summary["user_review"]["flagged"] == flagged
    assert sum(summary["user_review"]["kinds"].values()) == sum(len(e["user_flags"]) for e in episodes)
    user = summary["user"]  # the server the run started, on a free local port
    assert (user["kind"], user["model"]) == ("openai", "smollm2") and user["base_url"].startswith("http://127.0.0.1:")


# (the options beside --user real-model, what the one line says): each fails before any model is converted or served
EARLY = [
    (["--user-max-tokens", "0"], "--user-max-tokens must be at least 1, got 0"),
    (["--user-model", "x"], "--user-model 'x': --user real-model serves its own model; leave it out"),
    (["--user-timeout", "-1"], "--user-timeout must be a finite number > 0, got -1.0"),
]


@pytest.mark.parametrize(("options", "said"), EARLY)
def test_a_bad_option_fails_before_the_model_is_served(
    options: list[str], said: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["eval", "agent", "--agent", "gold", "--user", "real-model", "--limit", "1", "--trials", "1", *options]
    assert main([*args, "--no-progress", "--out-dir", str(tmp_path / "eval")]) == 2
    err = capsys.readouterr().err
    assert said in err and "serving" not in err


def test_a_file_is_no_folder_for_the_model(tmp_path: Path) -> None:
    (tmp_path / "f").write_text("x", encoding="utf-8")
    with pytest.raises(PipelineError, match=rf"^{tmp_path}/f: is a file, not a folder"):
        build_real_model(tmp_path / "f")
    with pytest.raises(PipelineError, match=rf"^{tmp_path}/f/sub: {tmp_path}/f is a file, not a folder"):
        build_real_model(tmp_path / "f" / "sub")
