"""Leave episodes whose user simulator failed out of GRPO, for real.

ms-swift turns a ``None`` reward into 0 in the weighted sum, so a failed episode would
count as a wrong answer and move its group's mean and std. Two small wrappers around
names that ``swift.rlhf_trainers.grpo_trainer`` imports (same names on 4.4 and 4.6):

- ``compute_advantages``: a row whose every weighted reward is None (NaN) is *excluded*.
  Its group's statistics are computed over the other rows only (exactly, by calling the
  original on the kept rows with ``num_generations = len(kept)``), and its advantage is 0;
- ``collate_to_grpo_micro_batch``: the completion mask of an episode that ended in an
  excluded termination is zeroed, so neither the policy-gradient nor the KL term touches
  its tokens, and it does not count in token-normalised losses.

The rewards return None exactly for those episodes (``rollout_infos["termination"]``).
"""

from __future__ import annotations

from typing import Any

import torch

from rewardkit.envs.episode_record import EpisodeRecord

_MARK = "_rewardkit_exclusion"


def excluded_rows(rewards_per_func: torch.Tensor, reward_weights: torch.Tensor) -> torch.Tensor:
    """Rows whose every weighted reward is NaN (weight-0 metric rewards do not count)."""
    weighted = reward_weights != 0
    if not bool(weighted.any()):
        return torch.zeros(rewards_per_func.shape[0], dtype=torch.bool, device=rewards_per_func.device)
    return torch.isnan(rewards_per_func[:, weighted]).all(dim=1)


def _group_mean_filled(rewards: torch.Tensor, excluded: torch.Tensor, k: int) -> torch.Tensor:
    """Excluded rows take their group's mean over kept rows (0 if none is kept): group means stay exact."""
    filled = rewards.clone()
    for start in range(0, rewards.shape[0], k):
        rows = slice(start, start + k)
        keep = ~excluded[rows]
        group = filled[rows]
        means = torch.nan_to_num(torch.nanmean(group[keep], dim=0), nan=0.0) if keep.any() else 0.0
        group[~keep] = means
    return filled


def advantages_excluding(original: Any) -> Any:
    def compute_advantages(rewards_per_func: torch.Tensor, reward_weights: torch.Tensor, num_generations: int, **kw):
        excluded = excluded_rows(rewards_per_func, reward_weights)
        if not bool(excluded.any()):
            return original(rewards_per_func, reward_weights, num_generations, **kw)
        k = num_generations
        filled = _group_mean_filled(rewards_per_func, excluded, k)
        advantages, weighted = original(filled, reward_weights, k, **kw)
        advantages = advantages.clone()
        exact = kw.get("scale_rewards", "group") in ("group", "none")
        for start in range(0, rewards_per_func.shape[0], k):
            idx = torch.arange(start, start + k, device=excluded.device)
            keep = idx[~excluded[idx]]
            if exact and len(keep) not in (0, k):
                sub_kw = dict(kw)
                if kw.get("kl_values") is not None:
                    sub_kw["kl_values"] = kw["kl_values"][keep]
                sub, _ = original(filled[keep], reward_weights, len(keep), **sub_kw)
                advantages[keep] = sub
        advantages[excluded] = 0.0
        return advantages, weighted

    setattr(compute_advantages, _MARK, True)
    return compute_advantages


def is_excluded(sample: Any) -> bool:
    record = EpisodeRecord.read(getattr(sample, "rollout_infos", None))
    return record is not None and record.excluded


def collate_excluding(original: Any) -> Any:
    def collate_to_grpo_micro_batch(samples: list[Any], *args: Any, **kw: Any):
        model_inputs, batch = original(samples, *args, **kw)
        drop = [is_excluded(s) for s in samples]
        if any(drop):
            mask = batch.completion_mask
            if mask.shape[0] == len(samples):
                mask[torch.tensor(drop, device=mask.device)] = 0
            else:  # padding-free: one packed row, samples laid end to end
                ends = torch.cumsum(torch.as_tensor(batch.seq_lengths), 0).tolist()
                for i, gone in enumerate(drop):  # seq_lengths may carry padding entries after the samples
                    if gone:
                        mask[..., (ends[i - 1] if i else 0) : ends[i]] = 0
        return model_inputs, batch

    setattr(collate_to_grpo_micro_batch, _MARK, True)
    return collate_to_grpo_micro_batch


def install() -> None:
    """Wrap the trainer's two functions once per process."""
    from swift.rlhf_trainers import grpo_trainer

    wrappers = (("compute_advantages", advantages_excluding), ("collate_to_grpo_micro_batch", collate_excluding))
    for name, wrap in wrappers:
        current = getattr(grpo_trainer, name, None)
        if current is None:
            raise RuntimeError(
                f"swift.rlhf_trainers.grpo_trainer has no {name}: this ms-swift version cannot leave failed "
                "simulator episodes out of training; use ms-swift 4.4.x-4.6.x"
            )
        if not getattr(current, _MARK, False):
            setattr(grpo_trainer, name, wrap(current))
