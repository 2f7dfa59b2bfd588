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
steps without both checkpoints are skipped, and named. Every checkpoint's files are read and compared before any
model is loaded (:func:`checked_weights`): a damaged or half-written one is named, file and tensor, not met an hour
in as a safetensors or numpy error.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from contextlib import ExitStack
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
from safetensors import SafetensorError, safe_open

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
INDEX = "model.safetensors.index.json"
# How to fix a checkpoint that cannot be read: the step check skips the steps whose checkpoints are missing.
DAMAGED = "the checkpoint is damaged or half-written: save it again, or remove its folder to skip the steps it serves"


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


class Tensor(NamedTuple):
    """A tensor of a checkpoint: the safetensors file that holds it, and its dtype and shape as the file declares."""

    file: Path
    dtype: str
    shape: tuple[int, ...]


def weight_tensors(folder: Path) -> dict[str, Tensor]:
    """Tensor name -> where ``folder`` holds it (one ``model.safetensors``, or shards with their index), from the
    files' headers. A file that cannot be read (missing, empty, truncated, not safetensors), an index that is not
    ms-swift's, or a tensor the index places in a shard that lacks it is an :class:`AuditError` naming it."""
    index = folder / INDEX
    if index.is_file():
        shards = _weight_map(index)
        headers = {shard: _header(folder / shard) for shard in sorted(set(shards.values()))}
        for name, shard in shards.items():
            if name not in headers[shard]:
                raise AuditError(f"{folder / shard}: no tensor {name!r}, which {index.name} places there; {DAMAGED}")
        return {name: headers[shard][name] for name, shard in shards.items()}
    single = folder / "model.safetensors"
    if not single.is_file():
        raise AuditError(
            f"{folder}: no model.safetensors (or its index); the step check reads safetensors weights: "
            "train with --save_safetensors true (ms-swift's default); a checkpoint still being written: remove its "
            "folder to skip the steps it serves"
        )
    return _header(single)


def _weight_map(index: Path) -> dict[str, str]:
    """An index's ``weight_map``: tensor name -> its shard's file name."""
    try:
        shards = json.loads(index.read_text(encoding="utf-8")).get("weight_map")
    except (OSError, ValueError, AttributeError) as exc:  # unreadable, not UTF-8, not JSON, not an object
        raise AuditError(f"{index}: not a safetensors index ({type(exc).__name__}: {exc}); {DAMAGED}") from None
    if not isinstance(shards, dict) or not all(isinstance(v, str) for v in shards.values()):
        raise AuditError(f"{index}: 'weight_map' must map each tensor name to its shard's file name; {DAMAGED}")
    for shard in shards.values():  # a path (../checkpoint-1/…, /…) would read another checkpoint's weights as its own
        if shard in ("", ".", "..") or Path(shard).name != shard or "\\" in shard:
            raise AuditError(f"{index}: shard {shard!r} is not a file name in {index.parent}; {DAMAGED}")
    return shards


def _header(path: Path) -> dict[str, Tensor]:
    """The tensors a safetensors file declares. ``safe_open`` checks the whole header against the file's size, so a
    truncated, padded or overwritten file fails here."""
    try:
        with safe_open(str(path), framework="pt") as f:
            slices = {name: f.get_slice(name) for name in f.keys()}  # noqa: SIM118 (safe_open has no iteration)
            return {name: Tensor(path, s.get_dtype(), tuple(s.get_shape())) for name, s in slices.items()}
    except (SafetensorError, OSError) as exc:
        raise AuditError(f"{path}: not a readable safetensors file ({exc}); {DAMAGED}") from None


def checked_weights(saved: Mapping[int, Path]) -> dict[int, dict[str, Tensor]]:
    """Step -> the tensors of its checkpoint (:func:`weight_tensors`), checked to be one model's before any is read.
    The run's checkpoints, one trainer's saves, hold the same tensors with the same dtype and shape. The starting
    model (step 0) was written elsewhere: it may hold its tensors in another dtype, and tensors the trainer does not
    save (a tied weight saved once), but those it shares with the run have the run's shapes, and it shares some."""
    maps = {n: weight_tensors(folder) for n, folder in sorted(saved.items())}
    run = [n for n in maps if n > 0]
    for n in run[1:]:
        _same_model(saved[run[0]], maps[run[0]], saved[n], maps[n], whole=True)
    if 0 in maps and run:
        _same_model(saved[run[0]], maps[run[0]], saved[0], maps[0], whole=False)
    return maps


def _same_model(
    first: Path, reference: Mapping[str, Tensor], folder: Path, other: Mapping[str, Tensor], whole: bool
) -> None:
    """The checkpoint ``folder`` against the run's ``first``: every shared tensor's shape, and with ``whole`` the
    names and dtypes too."""
    if whole and set(other) != set(reference):
        if missing := sorted(set(reference) - set(other)):
            raise AuditError(f"{folder}: no tensor {missing[0]!r}, which {first} holds; {DAMAGED}")
        extra = sorted(set(other) - set(reference))[0]
        raise AuditError(f"{other[extra].file}: tensor {extra!r} is not in {first}; {DAMAGED}")
    shared = [name for name in reference if name in other]
    if not shared:
        raise AuditError(f"{folder}, {first}: no tensor name in common; the checkpoints are not one model")
    for name in shared:
        mine, theirs = other[name], reference[name]
        if mine.shape != theirs.shape or (whole and mine.dtype != theirs.dtype):
            raise AuditError(
                f"{mine.file}: tensor {name!r} is {mine.dtype} {list(mine.shape)}, but {theirs.dtype} "
                f"{list(theirs.shape)} in {theirs.file}; {DAMAGED}"
            )


def update_cosines(saved: Mapping[int, Path]) -> list[float | None]:
    """For consecutive checkpoints (step -> folder, in order), the cosine between each update and the one before it
    (the update into the third checkpoint against the one into the second, and so on), over the tensors they all
    share; None where either update is zero. Each tensor of each checkpoint is read once, one tensor name at a time:
    two of its versions and one update in memory."""
    maps = list(checked_weights(saved).values())
    shared = sorted(set.intersection(*(set(m) for m in maps)))
    pairs = len(maps) - 2
    dot, norm = np.zeros(max(pairs, 0)), np.zeros(len(maps) - 1)  # norm[i]: the squared size of update i
    with ExitStack() as stack:  # each file opened once, its tensors read one at a time
        files = {
            t.file: stack.enter_context(safe_open(str(t.file), framework="pt"))
            for m in maps
            for t in {m[name] for name in shared}
        }
        for name in shared:
            # numpy cannot hold bfloat16: through torch, as float64
            weight, update = files[maps[0][name].file].get_tensor(name).double().numpy().reshape(-1), None
            for i, m in enumerate(maps[1:]):
                after = files[m[name].file].get_tensor(name).double().numpy().reshape(-1)
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
                out.update(zip(chain[2:], update_cosines({n: saved[n] for n in chain}), strict=True))
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

    try:
        lm = AutoModelForCausalLM.from_pretrained(str(model), dtype=torch.float32).eval()
        return AutoTokenizer.from_pretrained(str(model)), lm
    except (OSError, ValueError) as exc:  # a config.json or tokenizer file transformers cannot read
        reason = " ".join(str(exc).split())
        raise AuditError(f"{model}: transformers cannot load it ({type(exc).__name__}: {reason}); {DAMAGED}") from exc


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
    checked_weights(saved)  # a damaged checkpoint fails now, not after the models before it are scored
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
