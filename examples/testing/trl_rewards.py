"""The reward contract kit on a peer's rewards: TRL's own ``trl.rewards``, installed beside ms-swift.

    python examples/testing/trl_rewards.py

Runs :func:`rewardkit.testing.check_reward` on ``think_format_reward`` (TRL's conversational format reward) and on
the reward ``get_soft_overlong_punishment`` builds, each on two rows shaped as TRL passes them, and prints each
report. docs/testing.md quotes the output; tests/test_kit_on_trl.py checks what it finds.
"""

from __future__ import annotations

from typing import Any

from trl.rewards import get_soft_overlong_punishment, think_format_reward

from rewardkit.testing import Report, check_reward


def said(text: str) -> list[dict[str, str]]:
    return [{"role": "assistant", "content": text}]


# TRL's conversational completions: a think block, then the answer.
THINK_ROWS = [
    {"completion": said("<think>\nThe user wants 6 times 7.\n</think>\n42")},
    {"completion": said("<think>\nAdd 2 and 2.\n</think>\nThe sum is 4.")},
]
# The overlong punishment reads the completion's token ids: 8 and 10 tokens, under the 12 it starts to punish at.
OVERLONG_ROWS = [
    {"completion": "short answer", "completion_ids": list(range(8))},
    {"completion": "another one", "completion_ids": list(range(10))},
]
FORMAT_ONLY = "a format reward: it checks the think layout, not what is said"


def reports() -> dict[str, Report]:
    """Each TRL reward's report; the format reward declares the content probes it is blind to by design."""
    overlong = get_soft_overlong_punishment(max_completion_len=16, soft_punish_cache=4)
    blind: dict[str, Any] = {"other_gold": FORMAT_ONLY, "constant": FORMAT_ONLY}
    return {
        "think_format_reward": check_reward(think_format_reward, THINK_ROWS, gameable=blind),
        # It scores 0 down to -1 as the length passes 12 tokens; the text never changes its score.
        "soft_overlong_punishment": check_reward(
            overlong, OVERLONG_ROWS, range=(-1.0, 0.0), gameable={"*": "it reads completion_ids, never the text"}
        ),
    }


if __name__ == "__main__":
    for report in reports().values():
        print(report.summary())
