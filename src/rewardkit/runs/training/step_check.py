"""The step check: did each GRPO update make the rollouts it favoured more likely, and the others less?

For a logged step ``t``, the weights before it (``checkpoint-(t-1)``, or the run's starting model for the first
step) and after it (``checkpoint-t``) score each of the step's rollouts: ``d_i`` is the change of its
log-likelihood over the policy's own tokens (every assistant turn of a ChatML conversation; for another template,
the completion), weighed as the run's ``loss_type`` weighs them: the mean over the rollout's tokens where the loss
averages each sequence first (``grpo``, ms-swift's default, and ``sapo``), their sum where it averages over all the
batch's tokens (``bnpo``, ``dr_grpo``, ``dapo``, ``cispo``, ``fipo``). An update that follows an advantage ``A``
makes ``sum_i A_i d_i`` positive: to first order it is the change of GRPO's objective on that batch. Per step the
check reports that sum (as a mean), the share of rollouts whose ``d`` has the sign of their ``A``, and the groups
whose own sum is positive; over the run, a sign test on the groups (a one-sided binomial test against a coin).

Two advantages are checked. The **logged** ones, the trainer's own: an update that does not follow them points at
the training path (the loss, its mask, the optimiser). The ones of the **reward**, recomputed from the logged
reward columns at the weights you name (by default the run's) by the run's own rule (``advantage_estimator`` and
``scale_rewards``, GDPO's per-reward normalisation included): an update that follows the trainer's advantages but
not these is training on something else (an inverted weight, a reward that does not say what you mean).

Each step also reports how much of its update is the last one's: the cosine between ``w_t - w_(t-1)`` and
``w_(t-1) - w_(t-2)``. Adam carries a momentum (``adam_beta1``, 0.9 by default), so when that cosine is near 1 the
step moved mostly where the earlier batches pointed, and a step that goes the wrong way on its own batch says more
about those batches than about this one's loss.

It needs a checkpoint after every step it checks (``--save_steps 1``, full weights, ``--save_only_model true``);
steps without both checkpoints are skipped, and named.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import numpy as np
from safetensors import safe_open

from rewardkit.rewards.groups import totals
from rewardkit.runs.training.audit import GDPO_EPS, AuditError, Run, Step, gdpo_normalised

ASSISTANT = re.compile(r"<\|im_start\|>assistant\n(.*?)(?:<\|im_end\|>|$)", re.S)  # ChatML's assistant turns
STD_EPS = 1e-4  # ms-swift's: (r - mean) / (std + 1e-4), std the sample standard deviation (torch's)
# ms-swift's loss types by how they weigh a rollout's tokens: averaged within each sequence, or summed over the batch
PER_SEQUENCE_MEAN = ("grpo", "sapo")
PER_TOKEN = ("bnpo", "dr_grpo", "dapo", "cispo", "fipo")
# ms-swift's advantage estimators, each with the reward scaling it takes when scale_rewards is unset
DEFAULT_SCALE = {"grpo": "group", "rloo": "none", "reinforce_plus_plus": "batch"}
SCALES = ("group", "batch", "none", "gdpo")


def per_sequence_mean(run: Run) -> bool:
    """Whether the run's loss averages each rollout's tokens before the batch (``args.json``'s ``loss_type``)."""
    loss_type = run.args.get("loss_type") or "grpo"
    if loss_type not in PER_SEQUENCE_MEAN + PER_TOKEN:
        raise AuditError(
            f"{run.folder / 'args.json'}: loss_type {loss_type!r} is not a policy-gradient loss the step "
            f"check can weigh; it reads {', '.join(PER_SEQUENCE_MEAN + PER_TOKEN)}"
        )
    return loss_type in PER_SEQUENCE_MEAN


def advantage_rule(run: Run) -> tuple[str, str]:
    """The run's ``advantage_estimator`` and ``scale_rewards``, with ms-swift's defaults for an unset scaling."""
    estimator = run.args.get("advantage_estimator") or "grpo"
    scale = run.args.get("scale_rewards") or DEFAULT_SCALE.get(estimator)
    if estimator not in DEFAULT_SCALE or scale not in SCALES:
        raise AuditError(
            f"{run.folder / 'args.json'}: advantage_estimator {estimator!r} with scale_rewards {scale!r} is not "
            f"a rule the step check can recompute; it reads the estimators {', '.join(DEFAULT_SCALE)} and the "
            f"scalings {', '.join(SCALES)}"
        )
    return estimator, scale


def checkpoints(run: Run) -> dict[int, Path]:
    """Step -> the weights after it (0: the starting model, from ``args.json``'s ``model``)."""
    model = run.args.get("model")
    found = {0: Path(model)} if isinstance(model, str) and model else {}
    for path in run.folder.glob("checkpoint-*"):
        number = path.name.removeprefix("checkpoint-")
        if number.isdigit() and (path / "adapter_config.json").is_file():
            raise AuditError(
                f"{path}: a LoRA adapter; the step check reads full weights: train with --tuner_type "
                "full, or merge each adapter (swift export --merge_lora true) first"
            )
        if number.isdigit():
            found[int(number)] = path
    return {k: v for k, v in found.items() if (v / "config.json").is_file()}


def weight_tensors(folder: Path) -> dict[str, Path]:
    """Tensor name -> the safetensors file of ``folder`` that holds it (one file, or shards with their index)."""
    index = folder / "model.safetensors.index.json"
    if index.is_file():
        shards = json.loads(index.read_text(encoding="utf-8"))["weight_map"]
        return {name: folder / shard for name, shard in shards.items()}
    single = folder / "model.safetensors"
    if not single.is_file():
        raise AuditError(
            f"{folder}: no model.safetensors (or its index); the step check reads safetensors weights: "
            "train with --save_safetensors true (ms-swift's default)"
        )
    with safe_open(str(single), framework="pt") as f:
        return {name: single for name in f.keys()}  # noqa: SIM118 (safe_open has no iteration)


def update_cosines(folders: Sequence[Path]) -> list[float | None]:
    """For consecutive checkpoints, the cosine between each update and the one before it (``folders[i] ->
    folders[i + 1]`` against ``folders[i - 1] -> folders[i]``), over the tensors they all share; None where either
    update is zero. Each tensor of each checkpoint is read once, one tensor name at a time: two of its versions and
    one update in memory."""
    maps = [weight_tensors(folder) for folder in folders]
    shared = sorted(set.intersection(*(set(m) for m in maps)))
    if not shared:
        raise AuditError(f"{', '.join(map(str, folders))}: no tensor name in common; the checkpoints are not one model")
    pairs = len(folders) - 2
    dot, norm = np.zeros(max(pairs, 0)), np.zeros(len(folders) - 1)  # norm[i]: the squared size of update i
    with ExitStack() as stack:  # each file opened once, its tensors read one at a time
        files = {
            path: stack.enter_context(safe_open(str(path), framework="pt")) for m in maps for path in set(m.values())
        }
        for name in shared:
            # numpy cannot hold bfloat16: through torch, as float64
            weight, update = files[maps[0][name]].get_tensor(name).double().numpy().reshape(-1), None
            for i, m in enumerate(maps[1:]):
                after = files[m[name]].get_tensor(name).double().numpy().reshape(-1)
                step = after - weight
                norm[i] += float(np.dot(step, step))
                if update is not None:
                    dot[i - 1] += float(np.dot(update, step))
                weight, update = after, step
    return [
        float(dot[i] / (norm[i] * norm[i + 1]) ** 0.5) if norm[i] > 0 and norm[i + 1] > 0 else None
        for i in range(pairs)
    ]


def momentum(saved: Mapping[int, Path]) -> dict[int, float | None]:
    """Step -> the cosine between its update and the one before it, for every step saved with its two predecessors;
    each run of consecutive checkpoints is read in one pass (:func:`update_cosines`)."""
    numbers, out = sorted(saved), {}
    start = 0
    for end in range(1, len(numbers) + 1):
        if end == len(numbers) or numbers[end] != numbers[end - 1] + 1:
            chain = numbers[start:end]
            if len(chain) >= 3:
                out.update(zip(chain[2:], update_cosines([saved[n] for n in chain]), strict=True))
            start = end
    return out


@np.errstate(invalid="ignore", divide="ignore")  # a group whose reward is all None: its GDPO term is 0
def reward_advantages(
    step: Step, weights: np.ndarray, size: int, rule: tuple[str, str] = ("grpo", "group")
) -> np.ndarray:
    """The step's advantages from its reward columns at ``weights``, by ms-swift's ``rule`` (estimator, scaling).
    ``grpo`` takes each total minus its group's mean (``rloo`` the same times ``K/(K-1)``), then divides by the
    group's (``group``) or the batch's (``batch``) sample standard deviation of the totals plus 1e-4, or not at all
    (``none``); ``reinforce_plus_plus`` takes the deviations' standard deviation instead of the totals'. ``gdpo``
    standardises each reward within its group first (a constant or all-None reward counts 0), sums them at the
    weights, and standardises that sum over the batch."""
    estimator, scale = rule
    grouped = totals(step.scores, weights).reshape(-1, size)
    centred = grouped - grouped.mean(axis=1, keepdims=True)
    if estimator == "rloo" and size > 1:
        centred = centred * size / (size - 1)
    if scale == "gdpo" and estimator != "reinforce_plus_plus":
        summed = (gdpo_normalised(step.groups(size)) * weights).sum(axis=2).reshape(-1)
        return (summed - summed.mean()) / (summed.std(ddof=1) + GDPO_EPS)
    if scale not in ("group", "batch"):
        return centred.reshape(-1)
    spread_of = centred if estimator == "reinforce_plus_plus" else grouped
    if scale == "batch":
        spread = spread_of.std(ddof=1) if spread_of.size > 1 else 0.0
    else:
        spread = spread_of.std(axis=1, ddof=1, keepdims=True) if size > 1 else np.zeros_like(grouped[:, :1])
    return (centred / (spread + STD_EPS)).reshape(-1)


def policy_text(prompt: str, completion: str) -> tuple[str, list[tuple[int, int]]]:
    """The conversation as one text, and the character spans of the policy's tokens in it. ms-swift logs the
    completion with the prefix the template already put at the end of the prompt (an empty think block): it is
    written once."""
    overlap = next(
        (n for n in range(min(len(prompt), len(completion), 256), 0, -1) if prompt.endswith(completion[:n])), 0
    )
    text = prompt + completion[overlap:]
    spans = [m.span(1) for m in ASSISTANT.finditer(text)]
    return text, spans or [(len(prompt), len(text))]


def load_policy(model: Path) -> tuple[Any, Any]:
    """A checkpoint's tokenizer and its causal LM in float32, for :func:`policy_logprobs`."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    lm = AutoModelForCausalLM.from_pretrained(str(model), dtype=torch.float32).eval()
    return AutoTokenizer.from_pretrained(str(model)), lm


def policy_logprobs(
    policy: tuple[Any, Any], texts: Sequence[tuple[str, list[tuple[int, int]]]], mean: bool
) -> np.ndarray:
    """The log-probabilities of each text's policy tokens under ``policy`` (:func:`load_policy`): their sum, or
    with ``mean`` their mean."""
    import torch

    tokenizer, lm = policy
    out = []
    for text, spans in texts:
        encoded = tokenizer(text, return_offsets_mapping=True, add_special_tokens=False)
        ids = torch.tensor([encoded["input_ids"]])
        policy = torch.tensor([any(a <= start < b for a, b in spans) for start, _ in encoded["offset_mapping"]])
        with torch.no_grad():
            logprobs = torch.log_softmax(lm(ids).logits[0, :-1].float(), dim=-1)
        token_logprobs = logprobs.gather(-1, ids[0, 1:, None])[:, 0]
        chosen = token_logprobs[policy[1:]]
        out.append(float(chosen.mean() if mean and len(chosen) else chosen.sum()))
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
    saved, mean, rule = checkpoints(run), per_sequence_mean(run), advantage_rule(run)
    cosines_by_step = momentum(saved)
    held: dict[int, tuple[Any, Any]] = {}  # the checkpoints in memory: a step's "after" is the next step's "before"

    def policy(number: int) -> tuple[Any, Any]:
        if number not in held:
            for old in [n for n in held if n < number - 1]:
                del held[old]
            held[number] = load_policy(saved[number])
        return held[number]

    steps, skipped = [], []
    for step in run.steps:
        if step.step not in saved or step.step - 1 not in saved:
            skipped.append(step.step)
            continue
        texts = [policy_text(p, c) for p, c in zip(step.prompts, step.completions, strict=True)]
        change = policy_logprobs(policy(step.step), texts, mean) - policy_logprobs(policy(step.step - 1), texts, mean)
        advantages = reward_advantages(step, weights, run.group_size, rule)
        row = {"step": step.step, "reward": step_signs(advantages, change, run.group_size)}
        if step.step in cosines_by_step:
            row["momentum"] = cosines_by_step[step.step]
        if step.advantages is not None:
            row["logged"] = step_signs(step.advantages, change, run.group_size)
        steps.append(row)
    if not steps:
        raise AuditError(
            f"{run.folder}: no logged step has a checkpoint before and after it; train with "
            "--save_steps 1 --save_only_model true to check the steps"
        )
    cosines = [s["momentum"] for s in steps if s.get("momentum") is not None]
    return {
        "weights": [float(w) for w in weights],
        "momentum": float(np.mean(cosines)) if cosines else None,
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
    return {
        "objective": float(np.mean([r["objective"] for r in rows])),
        "groups": groups,
        "groups_right": right,
        "p_right": p,
        "p_wrong": p_wrong,
        "verdict": verdict,
    }
