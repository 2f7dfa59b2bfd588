"""The step check: did each GRPO update make the rollouts it favoured more likely, and the others less?

For a logged step ``t``, the weights before it (``checkpoint-(t-1)``, or the run's starting model for the first
step) and after it (``checkpoint-t``) score each of the step's rollouts: ``d_i`` is the change of its
log-likelihood over the policy's own tokens (every assistant turn of a ChatML conversation; for another template,
the completion). An update that follows an advantage ``A`` makes ``sum_i A_i d_i`` positive: to first order it is
the change of GRPO's objective on that batch. Per step the check reports that sum (as a mean), the share of rollouts
whose ``d`` has the sign of their ``A``, and the groups whose own sum is positive; over the run, a sign test on the
groups (a one-sided binomial test against a coin).

Two advantages are checked. The **logged** ones, the trainer's own: an update that does not follow them points at
the training path (the loss, its mask, the optimiser). The ones of the **reward**, recomputed from the logged
reward columns at the weights you name (by default the run's), normalised within each group as ms-swift does: an
update that follows the trainer's advantages but not these is training on something else (an inverted weight, a
reward that does not say what you mean).

It needs a checkpoint after every step it checks (``--save_steps 1``, full weights, ``--save_only_model true``);
steps without both checkpoints are skipped, and named.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from rewardkit.rewards.groups import totals
from rewardkit.runs.audit import AuditError, Run, Step

ASSISTANT = re.compile(r"<\|im_start\|>assistant\n(.*?)(?:<\|im_end\|>|$)", re.S)  # ChatML's assistant turns
STD_EPS = 1e-4  # ms-swift's: (r - mean) / (std + 1e-4), std the sample standard deviation (torch's)


def checkpoints(run: Run) -> dict[int, Path]:
    """Step -> the weights after it (0: the starting model, from ``args.json``'s ``model``)."""
    model = json.loads((run.folder / "args.json").read_text(encoding="utf-8")).get("model")
    found = {0: Path(model)} if isinstance(model, str) and model else {}
    for path in run.folder.glob("checkpoint-*"):
        number = path.name.removeprefix("checkpoint-")
        if number.isdigit() and (path / "adapter_config.json").is_file():
            raise AuditError(f"{path}: a LoRA adapter; the step check reads full weights: train with --tuner_type "
                             "full, or merge each adapter (swift export --merge_lora true) first")  # fmt: skip
        if number.isdigit():
            found[int(number)] = path
    return {k: v for k, v in found.items() if (v / "config.json").is_file()}


def reward_advantages(step: Step, weights: np.ndarray, size: int) -> np.ndarray:
    """The step's advantages from its reward columns at ``weights``: each total minus its group's mean, over the
    group's standard deviation plus ms-swift's epsilon."""
    groups = totals(step.scores, weights).reshape(-1, size)
    centred = groups - groups.mean(axis=1, keepdims=True)
    spread = groups.std(axis=1, ddof=1, keepdims=True) if size > 1 else np.zeros_like(groups[:, :1])
    return (centred / (spread + STD_EPS)).reshape(-1)


def policy_text(prompt: str, completion: str) -> tuple[str, list[tuple[int, int]]]:
    """The conversation as one text, and the character spans of the policy's tokens in it. ms-swift logs the
    completion with the prefix the template already put at the end of the prompt (an empty think block): it is
    written once."""
    overlap = next((n for n in range(min(len(prompt), len(completion), 256), 0, -1)
                    if prompt.endswith(completion[:n])), 0)  # fmt: skip
    text = prompt + completion[overlap:]
    spans = [m.span(1) for m in ASSISTANT.finditer(text)]
    return text, spans or [(len(prompt), len(text))]


def policy_logprobs(model: Path, texts: Sequence[tuple[str, list[tuple[int, int]]]]) -> np.ndarray:
    """The sum of the log-probabilities of each text's policy tokens under ``model``."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(model))
    lm = AutoModelForCausalLM.from_pretrained(str(model), dtype=torch.float32).eval()
    out = []
    for text, spans in texts:
        encoded = tokenizer(text, return_offsets_mapping=True, add_special_tokens=False)
        ids = torch.tensor([encoded["input_ids"]])
        policy = torch.tensor([any(a <= start < b for a, b in spans) for start, _ in encoded["offset_mapping"]])
        with torch.no_grad():
            logprobs = torch.log_softmax(lm(ids).logits[0, :-1].float(), dim=-1)
        token_logprobs = logprobs.gather(-1, ids[0, 1:, None])[:, 0]
        out.append(float(token_logprobs[policy[1:]].sum()))
    return np.array(out)


def step_signs(advantages: np.ndarray, change: np.ndarray, size: int) -> dict[str, Any]:
    """One step's signs: the first-order change of GRPO's objective (mean ``A*d``), the share of moving rollouts whose
    ``d`` has the sign of their advantage, and the groups whose ``sum(A*d)`` is positive among those where it is not 0.
    A group counts when it has an advantage and its likelihoods moved (a step that changed nothing, such as the
    lr-1e-12 control's, is no evidence either way)."""
    moving = (np.abs(advantages) > 1e-9) & (change != 0)
    by_group = (advantages * change).reshape(-1, size).sum(axis=1)
    counted = by_group != 0
    return {
        "objective": float(np.mean(advantages * change)),
        "agree": float(np.mean(np.sign(change[moving]) == np.sign(advantages[moving]))) if moving.any() else None,
        "groups": int(counted.sum()),
        "groups_right": int((by_group[counted] > 0).sum()),
    }


def step_check(run: Run, weights: np.ndarray | None = None) -> dict[str, Any]:
    """Every step with both checkpoints: the signs against the logged advantages and the reward's at ``weights``
    (default: the run's), and over the run the sign test on the groups."""
    from scipy.stats import binomtest

    weights = run.weights if weights is None else weights
    saved = checkpoints(run)
    steps, skipped = [], []
    for step in run.steps:
        if step.step not in saved or step.step - 1 not in saved:
            skipped.append(step.step)
            continue
        texts = [policy_text(p, c) for p, c in zip(step.prompts, step.completions, strict=True)]
        change = policy_logprobs(saved[step.step], texts) - policy_logprobs(saved[step.step - 1], texts)
        row = {"step": step.step, "reward": step_signs(reward_advantages(step, weights, run.group_size), change,
                                                      run.group_size)}  # fmt: skip
        if step.advantages is not None:
            row["logged"] = step_signs(step.advantages, change, run.group_size)
        steps.append(row)
    if not steps:
        raise AuditError(f"{run.folder}: no logged step has a checkpoint before and after it; train with "
                         "--save_steps 1 --save_only_model true to check the steps")  # fmt: skip
    return {
        "weights": [float(w) for w in weights],
        "steps": steps,
        "skipped": skipped,
        **{kind: _verdict([s[kind] for s in steps if kind in s], binomtest) for kind in ("reward", "logged")},
    }


def _verdict(rows: Sequence[Mapping[str, Any]], binomtest: Any) -> dict[str, Any] | None:
    if not rows:
        return None
    groups, right = sum(r["groups"] for r in rows), sum(r["groups_right"] for r in rows)
    p = float(binomtest(right, groups, 0.5, alternative="greater").pvalue) if groups else None
    p_wrong = float(binomtest(right, groups, 0.5, alternative="less").pvalue) if groups else None
    verdict = "unclear"
    if p is not None and p < 0.05:
        verdict = "right"
    elif p_wrong is not None and p_wrong < 0.05:
        verdict = "wrong"
    return {"objective": float(np.mean([r["objective"] for r in rows])), "groups": groups, "groups_right": right,
            "p_right": p, "p_wrong": p_wrong, "verdict": verdict}  # fmt: skip
