"""rewardkit.runs.training.step_check: did each GRPO update make its favoured rollouts more likely?

End to end: real `swift rlhf` on the tiny model with a reward that always varies within a group (the share of the
letter e in the completion), a checkpoint after every step. Trained on it, the updates follow the reward; trained on
its negation (weight -1) and checked against the reward, they go the wrong way, while still following the trainer's
own (logged) advantages.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import numpy as np
import pytest
from test_e2e_grpo import CPU_FLAGS, EXAMPLES, ROOT, SWIFT, tiny_model  # noqa: F401 (a fixture)

from rewardkit.pipelines.tiny_model import offline_env
from rewardkit.runs.training.audit import AuditError, Run, Step, load_run
from rewardkit.runs.training.audit_report import write_audit
from rewardkit.runs.training.step_check import (
    advantage_rule,
    momentum,
    per_sequence_mean,
    policy_text,
    reward_advantages,
    step_check,
    step_signs,
    update_cosines,
)

LETTER_E = """
from swift.rewards import ORM, orms

class LetterE(ORM):
    def __call__(self, completions, **kwargs):
        return [c.count("e") / max(len(c), 1) for c in completions]

orms["letter_e"] = LetterE
"""

THINK = "<think>\n\n</think>\n\n"  # 19 characters
USER = "<|im_start|>user\nhi<|im_end|>\n"  # 30
ASSISTANT = "<|im_start|>assistant\n"  # 22
# (prompt, completion, the text, the policy's spans in it)
TEXTS = [
    # ms-swift logs the empty think block at the end of the prompt and again at the start of the completion: once;
    # the turn runs from 30 + 22 = 52 to 52 + 19 + 3 = 74
    (USER + ASSISTANT + THINK, THINK + "yes", USER + ASSISTANT + THINK + "yes", [(52, 74)]),
    # a multi-turn conversation: both assistant turns (22-26, and 22 + 4 + 11 + 30 + 22 = 89 to 93), not the user's
    (
        ASSISTANT + "call<|im_end|>\n" + USER + ASSISTANT,
        "done",
        ASSISTANT + "call<|im_end|>\n" + USER + ASSISTANT + "done",
        [(22, 26), (89, 93)],
    ),
    # no ChatML: the completion is the policy's
    ("Q: 1+1?\nA:", " 2", "Q: 1+1?\nA: 2", [(10, 12)]),
]


@pytest.mark.parametrize(("prompt", "completion", "text", "spans"), TEXTS)
def test_policy_text_joins_once_and_finds_the_policys_turns(
    prompt: str, completion: str, text: str, spans: list
) -> None:
    assert policy_text(prompt, completion) == (text, spans)


# Two groups of 2, two rewards at weights (1, 0.5); rows (r1, r2) -> totals 1, 0 | 0.5, 1.5.
RULE_SCORES = np.array([[1.0, 0.0], [0.0, 0.0], [0.0, 1.0], [0.5, 2.0]])
S = 0.5**0.5  # the sample std of two values 1 apart
# (rule, the advantages): deviations from the group mean +-0.5 | -0.5, +0.5
RULES = [
    (("grpo", "group"), [0.5 / (S + 1e-4), -0.5 / (S + 1e-4), -0.5 / (S + 1e-4), 0.5 / (S + 1e-4)]),
    (("grpo", "none"), [0.5, -0.5, -0.5, 0.5]),
    # totals 1, 0, 0.5, 1.5: mean 0.75, sample std sqrt((0.0625 + 0.5625 + 0.0625 + 0.5625) / 3) = 0.6455
    (("grpo", "batch"), [x / (1.25**0.5 / 3**0.5 + 1e-4) for x in (0.5, -0.5, -0.5, 0.5)]),
    (("rloo", "none"), [1.0, -1.0, -1.0, 1.0]),  # x K/(K-1) = 2
    # each reward standardised in its group (std S): group 1 r1 +-0.5/S = +-S, r2 constant -> 0; group 2 r1 -+S,
    # r2 -+S; summed at (1, 0.5): S, -S | -1.5S, 1.5S; batch mean 0, sample std sqrt(6.5 S^2 / 3) = S sqrt(13/6)
    (("grpo", "gdpo"), [x / (13 / 6) ** 0.5 for x in (1.0, -1.0, -1.5, 1.5)]),
]


@pytest.mark.parametrize(("rule", "want"), RULES)
def test_reward_advantages_follow_the_runs_rule(rule: tuple[str, str], want: list[float]) -> None:
    step = Step(1, RULE_SCORES, None, ["a"] * 4, [""] * 4)
    assert reward_advantages(step, np.array([1.0, 0.5]), 2, rule) == pytest.approx(want, rel=1e-6)


@pytest.mark.parametrize("estimator", ["grpo", "rloo", "reinforce_plus_plus"])
@pytest.mark.parametrize("scale", ["group", "batch", "none", "gdpo"])
def test_reward_advantages_equal_ms_swifts(estimator: str, scale: str) -> None:
    # ms-swift's own function on 3 groups of 4 rollouts x 3 rewards, one None (NaN) and one constant reward.
    import torch
    from swift.rl_core.advantage import compute_advantages

    scores = np.random.default_rng(0).random((12, 3))
    scores[5, 1], scores[:4, 2] = np.nan, 0.5
    weights = np.array([0.2, -0.3, 0.5])
    want, _ = compute_advantages(torch.tensor(scores), torch.tensor(weights), 4, estimator, scale)
    got = reward_advantages(Step(1, scores, None, ["a"] * 12, [""] * 12), weights, 4, (estimator, scale))
    assert got == pytest.approx(want.numpy(), rel=1e-6, abs=1e-9)


# (args.json's estimator and scaling, the rule the check recomputes)
ADVANTAGE_RULES = [
    ({}, ("grpo", "group")),  # ms-swift's defaults
    ({"scale_rewards": "gdpo"}, ("grpo", "gdpo")),
    ({"advantage_estimator": "rloo"}, ("rloo", "none")),
    ({"advantage_estimator": "reinforce_plus_plus", "scale_rewards": None}, ("reinforce_plus_plus", "batch")),
]


@pytest.mark.parametrize(("args", "rule"), ADVANTAGE_RULES)
def test_the_advantage_rule_is_the_runs(tmp_path: Path, args: dict, rule: tuple[str, str]) -> None:
    assert advantage_rule(Run(tmp_path, ("r",), np.ones(1), 2, [], args)) == rule


def test_a_rule_the_check_cannot_recompute_is_refused_by_name(tmp_path: Path) -> None:
    with pytest.raises(AuditError, match=r"args.json: advantage_estimator 'ppo'.*rloo"):
        advantage_rule(Run(tmp_path, ("r",), np.ones(1), 2, [], {"advantage_estimator": "ppo"}))


def test_a_step_that_changed_nothing_is_no_evidence() -> None:
    # The lr-1e-12 control: every d is 0 -> no group counts, A*d 0, no agreement to speak of.
    got = step_signs(np.array([1.0, -1.0, 0.5, -0.5]), np.zeros(4), 2)
    assert got == {"objective": 0.0, "agree": None, "groups": 0, "groups_right": 0}
    # One group moved the right way (1*0.2 + -1*-0.1 = 0.3 > 0), one the wrong way (0.5*-0.4 + -0.5*0.4 = -0.4).
    got = step_signs(np.array([1.0, -1.0, 0.5, -0.5]), np.array([0.2, -0.1, -0.4, 0.4]), 2)
    assert (got["groups"], got["groups_right"], got["agree"]) == (2, 1, 0.5)
    assert got["objective"] == pytest.approx((0.2 + 0.1 - 0.2 - 0.2) / 4)


# (args.json's loss_type, whether d is the mean over the rollout's tokens rather than their sum)
LOSS_TYPES = [
    ("grpo", True),  # ms-swift's default: each sequence's token mean, then the batch's mean
    (None, True),  # not written: ms-swift's default
    ("sapo", True),
    ("bnpo", False),  # every token of the batch alike: a long rollout weighs more
    ("dapo", False),
    ("dr_grpo", False),
]


@pytest.mark.parametrize(("loss_type", "mean"), LOSS_TYPES)
def test_d_is_weighed_as_the_runs_loss_weighs_tokens(tmp_path: Path, loss_type: str | None, mean: bool) -> None:
    args = {} if loss_type is None else {"loss_type": loss_type}
    assert per_sequence_mean(Run(tmp_path, ("r",), np.ones(1), 2, [], args)) is mean


def test_a_loss_the_check_cannot_weigh_is_refused_by_name(tmp_path: Path) -> None:
    with pytest.raises(AuditError, match=r"args.json: loss_type 'real'.*bnpo"):
        per_sequence_mean(Run(tmp_path, ("r",), np.ones(1), 2, [], {"loss_type": "real"}))


def _checkpoint(folder: Path, tensors: dict[str, list[float]], shards: int = 1) -> Path:
    """A checkpoint of named tensors, in one safetensors file or split over shards with their index."""
    import torch
    from safetensors.torch import save_file

    folder.mkdir(parents=True)
    names = sorted(tensors)
    if shards == 1:
        save_file({n: torch.tensor(tensors[n], dtype=torch.bfloat16) for n in names}, folder / "model.safetensors")
        return folder
    weight_map = {}
    for i in range(shards):
        shard = f"model-{i + 1:05d}-of-{shards:05d}.safetensors"
        part = names[i::shards]
        save_file({n: torch.tensor(tensors[n]) for n in part}, folder / shard)
        weight_map.update(dict.fromkeys(part, shard))
    (folder / "model.safetensors.index.json").write_text(json.dumps({"weight_map": weight_map}), encoding="utf-8")
    return folder


# (the weights after steps t-2, t-1 and t, as {"a": ..., "b": ...}; the cosine of the update t against t-1)
MOMENTUM = [
    # the same update twice: (1, 0, 1) then (1, 0, 1) -> 1
    ([[0, 0], [0]], [[1, 0], [1]], [[2, 0], [2]], 1.0),
    # turned back: (1, 0, 1) then (-1, 0, -1) -> -1
    ([[0, 0], [0]], [[1, 0], [1]], [[0, 0], [0]], -1.0),
    # a right angle across tensors: (1, 0, 0) then (0, 1, 0) -> 0
    ([[0, 0], [0]], [[1, 0], [0]], [[1, 1], [0]], 0.0),
    # (1, 0, 1) then (1, 1, 0): 1 / (sqrt 2 * sqrt 2) = 0.5
    ([[0, 0], [0]], [[1, 0], [1]], [[2, 1], [1]], 0.5),
    # the second step did not move: no direction -> None
    ([[0, 0], [0]], [[1, 0], [1]], [[1, 0], [1]], None),
]


@pytest.mark.parametrize(("before", "middle", "after", "cosine"), MOMENTUM)
@pytest.mark.parametrize("shards", [1, 2])
def test_update_cosine_reads_every_tensor_of_three_checkpoints(
    tmp_path: Path, before: list, middle: list, after: list, cosine: float | None, shards: int
) -> None:
    saved = {
        i: _checkpoint(tmp_path / str(i), {"a": w[0], "b": w[1]}, shards) for i, w in enumerate((before, middle, after))
    }
    got = update_cosines(saved)[0]
    assert got == (None if cosine is None else pytest.approx(cosine, abs=1e-9))


def test_every_consecutive_triple_is_read_in_one_pass(tmp_path: Path) -> None:
    # Steps 1-4 and 6-8 saved, 5 missing: updates 1->2->3->4 give cosines at steps 3 and 4, 6->7->8 at step 8.
    # Weights along one line (1, 2, 3, 4) then back (4, 3 at 6 and 7) and on (8 at 8): each update against the last.
    weights = {1: 0.0, 2: 1.0, 3: 2.0, 4: 4.0, 6: 4.0, 7: 3.0, 8: 5.0}
    saved = {n: _checkpoint(tmp_path / str(n), {"a": [w]}) for n, w in weights.items()}
    # 3: (+1) after (+1) -> 1; 4: (+2) after (+1) -> 1; 8: (+2) after (-1) -> -1; 5, 6 and 7 lack two predecessors
    assert momentum(saved) == {3: 1.0, 4: 1.0, 8: -1.0}
    assert update_cosines({n: saved[n] for n in (1, 2, 3, 4)}) == [1.0, 1.0]


def test_a_checkpoint_without_safetensors_is_named(tmp_path: Path) -> None:
    saved = {i: _checkpoint(tmp_path / str(i), {"a": [float(i)]}) for i in range(2)}
    (tmp_path / "bin").mkdir()
    with pytest.raises(AuditError, match=r"bin: no model.safetensors.*--save_safetensors true"):
        update_cosines({**saved, 2: tmp_path / "bin"})


def _train(model: Path, out: Path, weight: str) -> Path:
    plugin = out.parent / f"letter_e_{weight}.py"
    plugin.write_text(LETTER_E, encoding="utf-8")
    cmd = [
        SWIFT,
        "rlhf",
        "--rlhf_type",
        "grpo",
        "--external_plugins",
        str(plugin),
        "--reward_funcs",
        "letter_e",
        "--reward_weights",
        weight,
        "--model",
        str(model),
        "--dataset",
        str(EXAMPLES / "grpo_tiny.jsonl"),
        "--learning_rate",
        "1e-4",
        "--beta",
        "0",
        "--max_steps",
        "3",
        "--num_generations",
        "8",
        "--per_device_train_batch_size",
        "16",
        "--temperature",
        "1.0",
        "--max_completion_length",
        "32",
        "--save_steps",
        "1",
        "--save_only_model",
        "true",
        "--save_strategy",
        "steps",
        "--output_dir",
        str(out),
        "--log_completions",
        "true",
        *CPU_FLAGS,
    ]
    env = {**os.environ, **offline_env()}
    env.pop("REWARDKIT_CONFIG", None)
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=900, check=False)
    (out.parent / f"swift_{weight}.log").write_text(proc.stdout + proc.stderr)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
    return out


@pytest.mark.e2e
def test_the_step_check_tells_a_normal_run_from_an_inverted_one(tiny_model: Path, tmp_path: Path) -> None:  # noqa: F811
    normal_run = load_run(_train(tiny_model, tmp_path / "normal", "1"))
    normal = step_check(normal_run)
    inverted = load_run(_train(tiny_model, tmp_path / "inverted", "-1"))
    against_reward = step_check(inverted, np.array([1.0]))  # the reward the user meant
    assert [s["step"] for s in normal["steps"]] == [1, 2, 3] and normal["skipped"] == []
    assert normal["reward"]["verdict"] == "right" and normal["reward"]["objective"] > 0
    assert normal["logged"]["verdict"] == "right"
    assert against_reward["reward"]["verdict"] == "wrong" and against_reward["reward"]["objective"] < 0
    assert against_reward["logged"]["verdict"] == "right"  # the path follows its advantages; the weight is the bug
    # steps 2 and 3 have two updates to compare; Adam carries part of each update into the next
    assert [s.get("momentum") is not None for s in normal["steps"]] == [False, True, True]
    assert -1.0 <= normal["momentum"] <= 1.0
    _, text = write_audit(normal_run, tmp_path / "audit", extra={"step_check": normal})
    assert f"mean cosine {normal['momentum']:+.2f}" in text and "| cos(update, last) |" in text
    print(json.dumps({"normal": normal["reward"], "inverted": against_reward["reward"]}))
