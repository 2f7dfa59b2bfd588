"""End to end: `eval agent` samples the policy that GRPO's rollouts sample.

A sampled evaluation measures what GRPO trained only if, for the same checkpoint and task, its episodes come from
the same distribution as the rollouts of real `swift rlhf` (the simulated_user scheduler, ms-swift's template and
sampling, learning rate 0 so the weights stay the checkpoint's). The statistic is each episode's first agent reply,
scored under the checkpoint: its mean log-probability per token given the opening. Any difference in how the two
draw tokens (temperature, top-k, top-p) or in what they condition on (system prompt, chat template, the user's
opening) moves that distribution; a Mann-Whitney test compares the two samples. The same test on the old
evaluation, which sampled from the whole vocabulary while ms-swift's transformers engine samples from the 50
likeliest tokens, rejects equality: the test can tell.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from _tiny_agent import OPEN_TASK, SYSTEM, short_rows
from scipy.stats import mannwhitneyu
from test_e2e_grpo import ROOT, SWIFT

from rewardkit.loop.sampling import Sampling, rollout_sampling
from rewardkit.pipelines.chain import read_recipe
from rewardkit.pipelines.tiny_model import offline_env
from rewardkit.recipes import recipe_path
from rewardkit.runs.episodes.evaluation import evaluate_run
from rewardkit.runs.episodes.spec import RunSpec

RECIPE = "agent/tiny_multiturn.yaml"
ROLLOUTS = 32  # 2 steps x 16: two rows of the one task per step, 8 rollouts each
MAX_TOKENS = 96  # the recipe's max_completion_length
# Hotter than the recipe: the taught model is so sure of its first call at 1.0 that cutting the tail changes little.
TEMPERATURE = 2.0
# A probe reward, loaded after the real plugins: it writes every rollout's conversation.
PROBE = """
import json, os
from swift.rewards import ORM, orms

class RolloutProbe(ORM):
    def __call__(self, completions, messages, **kwargs):
        with open(os.environ["RK_PROBE"], "a") as f:
            for conversation in messages:
                f.write(json.dumps(conversation) + "\\n")
        return [0.0] * len(completions)

orms["rollout_probe"] = RolloutProbe
"""


def _rollouts(model: Path, tmp_path: Path) -> list[list[dict]]:
    data = tmp_path / "rows.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in short_rows([OPEN_TASK, OPEN_TASK])), encoding="utf-8")
    probe, log = tmp_path / "probe.py", tmp_path / "probe.jsonl"
    probe.write_text(PROBE, encoding="utf-8")
    cmd = [
        SWIFT,
        "rlhf",
        f"recipes/{RECIPE}",
        "--external_plugins",
        "rewards/__init__.py",
        "plugins/simulated_user.py",
        str(probe),
        "--reward_funcs",
        "task_completion",
        "rollout_probe",
        "--reward_weights",
        "1",
        "0",
        "--learning_rate",
        "0",
        "--temperature",
        str(TEMPERATURE),
        "--num_generations",
        "8",
        "--per_device_train_batch_size",
        "16",
        "--model",
        str(model),
        "--dataset",
        str(data),
        "--output_dir",
        str(tmp_path / "grpo"),
    ]
    proc = subprocess.run(
        cmd,
        cwd=ROOT,
        env={**os.environ, **offline_env(), "RK_PROBE": str(log)},
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    (tmp_path / "swift.log").write_text(proc.stdout + proc.stderr)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
    return [json.loads(line) for line in log.read_text().splitlines()]


def _evaluated(model: Path, sampling: Sampling, out: Path) -> list[list[dict]]:
    prompt = out.parent / "system.txt"
    prompt.write_text(SYSTEM, encoding="utf-8")
    spec = RunSpec(
        domain="retail",
        agent=str(model),
        user="scripted",
        split="train",
        tasks=(OPEN_TASK,),
        trials=ROLLOUTS,
        temperature=sampling.temperature,
        top_k=sampling.top_k,
        top_p=sampling.top_p,
        max_tokens=MAX_TOKENS,
        max_turns=4,
        system_prompt=prompt,
        tools=False,
        workers=ROLLOUTS,
    )
    evaluate_run(spec, out, progress=False)
    return [json.loads(line)["messages"] for line in (out / "episodes.jsonl").read_text().splitlines()]


def _first_reply_logprobs(model: Path, conversations: list[list[dict]]) -> list[float]:
    """Mean log-probability per token of each conversation's first agent reply given its system prompt and opening,
    under ``model``, encoded by ms-swift's template (labels: the reply's tokens only)."""
    import torch
    from swift.model import get_processor
    from swift.template import TemplateInputs, get_template
    from transformers import AutoModelForCausalLM

    template = get_template(get_processor(str(model)))
    template.set_mode("train")
    lm = AutoModelForCausalLM.from_pretrained(str(model), torch_dtype=torch.float32).eval()
    out = []
    for conversation in conversations:
        system, opening, reply = conversation[:3]
        assert (system["role"], opening["role"], reply["role"]) == ("system", "user", "assistant")
        messages = [{"role": m["role"], "content": m["content"]} for m in (system, opening, reply)]
        encoded = template.encode(TemplateInputs.from_dict({"messages": messages}))
        ids, labels = torch.tensor([encoded["input_ids"]]), torch.tensor(encoded["labels"][1:])
        with torch.no_grad():
            logprobs = torch.log_softmax(lm(ids).logits[0, :-1].float(), dim=-1)
        scored = labels != -100
        out.append(float(logprobs[scored].gather(-1, labels[scored, None]).mean()))
    return out


@pytest.mark.e2e
def test_eval_agent_samples_the_distribution_grpo_rollouts_sample(tiny_agent_model: Path, tmp_path: Path) -> None:
    sampling = rollout_sampling({**read_recipe(recipe_path(RECIPE)), "temperature": TEMPERATURE})
    assert sampling == Sampling(TEMPERATURE, 50, 1.0)  # transformers' top-k, as the recipe has use_vllm: false
    rollouts = _rollouts(tiny_agent_model, tmp_path)
    assert len(rollouts) == ROLLOUTS
    assert {c[1]["content"] for c in rollouts} == {
        c[1]["content"]
        for c in _evaluated(  # the same opening
            tiny_agent_model, Sampling(), tmp_path / "greedy"
        )
    }
    grpo = _first_reply_logprobs(tiny_agent_model, rollouts)
    same = _first_reply_logprobs(tiny_agent_model, _evaluated(tiny_agent_model, sampling, tmp_path / "eval"))
    whole = _first_reply_logprobs(
        tiny_agent_model, _evaluated(tiny_agent_model, Sampling(TEMPERATURE), tmp_path / "all")
    )
    # Equal distributions: no evidence against at 1%. The whole vocabulary: rejected far beyond chance.
    assert mannwhitneyu(grpo, same).pvalue > 0.01, (sorted(grpo), sorted(same))
    assert mannwhitneyu(grpo, whole).pvalue < 1e-4, (sorted(grpo), sorted(whole))
