"""A few of a GRPO step's multi-turn episodes as the experiment trackers show them: the transcript, each reward's
score, the task-completion reward's checks and why it scored what it did.

The live diagnostics (``plugins/diagnostics.py``) pick them at a logging step (:func:`sample_episodes`, spread over
the step's episodes) and send them to each tracker of ms-swift's ``--report_to``: TensorBoard gets :func:`markdown`
as a text summary, wandb :func:`table` as a ``wandb.Table``. The line that says why is the episode viewer's
(:func:`~rewardkit.envs.episode_record.why_scored`); the checks are the reward's own (``TaskCompletion.row_checks``).

>>> spread(8, 3), spread(2, 4), spread(5, 0)
([0, 3, 7], [0, 1], [])
>>> infos = [{"termination": "user_stop", "turns": 2, "transcript": "user: hi\\nassistant: done ###STOP###"}]
>>> (shown,) = sample_episodes(5, infos, {"TaskCompletion": [1.0]}, 4, ("TaskCompletion", lambda i: [("said", True)]))
>>> shown.why, shown.checks
('complete: every check passed', (('said', True),))
>>> print(markdown([shown]))
### step 5, episode 0: TaskCompletion 1; user_stop, 2 turns
<BLANKLINE>
**why:** complete: every check passed
<BLANKLINE>
- ✓ said
<BLANKLINE>
**transcript:**
<BLANKLINE>
    user: hi
    assistant: done ###STOP###
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from rewardkit.envs.episode_record import EpisodeRecord, why_scored

MARK = {True: "✓", False: "✗"}  # a check met, or not
TAG = "rewardkit/episodes"  # the TensorBoard text tag and the wandb table's key
MAX_CHARS = 20_000  # of a transcript shown: its head and its tail, the middle cut

# The reward that explains its score (its name among the trainer's rewards) and its checks of the i-th episode.
Explainer = tuple[str, Callable[[int], Sequence[tuple[str, bool]]]]


@dataclass(frozen=True)
class SampledEpisode:
    """One episode of a step as the trackers show it."""

    step: int
    index: int  # its place among the step's episodes, in GRPO's group order
    rewards: Mapping[str, float | None]  # each reward's score of it, by the trainer's reward name (None: no score)
    record: EpisodeRecord
    checks: tuple[tuple[str, bool], ...] | None  # the explaining reward's checks; None: none explains, or left out
    why: str | None  # one line: why it scored what it did; None where no reward of the run explains


def spread(n: int, k: int) -> list[int]:
    """``k`` indices of ``n`` items spread over them, the first and the last included (all of them if ``k >= n``)."""
    if k >= n:
        return list(range(n))
    if k <= 1:
        return [0] * k
    return [i * (n - 1) // (k - 1) for i in range(k)]


def _score(value: Any) -> float | None:
    try:
        score = float(value)
    except (TypeError, ValueError):  # None, or a reward's value that is not a number
        return None
    return None if math.isnan(score) else score


def sample_episodes(
    step: int,
    infos: Sequence[Any],
    rewards: Mapping[str, Sequence[Any]],
    count: int,
    explain: Explainer | None = None,
) -> list[SampledEpisode]:
    """``count`` of a step's episodes (``infos``: their ``rollout_infos``; a row without a live record is passed
    over), spread over them. ``rewards``: each reward's scores of the same rows, in the same order (a reward that
    scored other rows is left out); ``explain``: the reward whose checks say why it scored what it did."""
    records = [EpisodeRecord.read(info) for info in infos]
    live = [i for i, r in enumerate(records) if r is not None and r.termination is not None]
    scored = {name: values for name, values in rewards.items() if len(values) == len(infos)}
    out = []
    for i in (live[j] for j in spread(len(live), count)):
        record = records[i]
        assert record is not None  # live
        scores = {name: _score(values[i]) for name, values in scored.items()}
        checks = why = None
        if explain is not None and explain[0] in scores:
            name, checks_of = explain
            checks = None if record.excluded else tuple(checks_of(i))
            why = why_scored(record.termination, scores[name], checks)
        out.append(SampledEpisode(step, i, scores, record, checks, why))
    return out


def _number(value: float | None) -> str:
    return "none" if value is None else f"{value:g}"


def shown(text: Any, limit: int = MAX_CHARS) -> str:
    """``text`` as a tracker can take it: text, valid UTF-8 (a lone surrogate replaced), at most ``limit``
    characters (the head and the tail, the middle's length said).

    >>> shown("ab\\ud800"), shown("x" * 30, 10)
    ('ab?', 'xxxxx\\n… 20 characters cut …\\nxxxxx')
    """
    text = text if isinstance(text, str) else str(text)
    if len(text) > limit:
        half = limit // 2
        text = f"{text[:half]}\n… {len(text) - 2 * half} characters cut …\n{text[-half:]}"
    return text.encode("utf-8", "replace").decode("utf-8")


def _line(text: Any) -> str:
    """One line of a heading: a value's text with its whitespace (newlines included) collapsed."""
    return " ".join(shown(text, 200).split())


def markdown(episodes: Sequence[SampledEpisode]) -> str:
    """The sample as one Markdown text (TensorBoard renders its text summaries so): per episode a heading with its
    scores and ending, the line that says why, the checks met (✓) or not (✗), and the transcript as a code block,
    indented after a paragraph of its own, so that nothing in it can end the block or be read as Markdown."""
    parts = []
    for e in episodes:
        scores = ", ".join(f"{_line(name)} {_number(value)}" for name, value in e.rewards.items())
        ending = f"{_line(e.record.termination)}, {e.record.turns} turns"
        parts.append(f"### step {e.step}, episode {e.index}: {scores or 'no scores'}; {ending}")
        if e.why is not None:
            parts.append(f"**why:** {_line(e.why)}")
        if e.checks:
            parts.append("\n".join(f"- {MARK[ok]} {_line(name)}" for name, ok in e.checks))
        # A paragraph first: an indented block right after a list would be read as the list's own text.
        lines = shown(e.record.transcript).splitlines()
        parts += ["**transcript:**", "\n".join(f"    {line}" for line in lines) or "    (no transcript)"]
    return "\n\n".join(parts)


def table(episodes: Sequence[SampledEpisode]) -> tuple[list[str], list[list[Any]]]:
    """The sample as a table's columns and rows (a ``wandb.Table``'s): the step, the episode, each reward's score
    (``reward/<name>``), the ending, the turns, why, the checks (one a line, ✓ or ✗) and the transcript."""
    names = list(dict.fromkeys(name for e in episodes for name in e.rewards))
    columns = ["step", "episode", *(f"reward/{n}" for n in names), "termination", "turns", "why", "checks"]
    rows = [
        [
            e.step,
            e.index,
            *(e.rewards.get(n) for n in names),
            e.record.termination,
            e.record.turns,
            e.why or "",
            "\n".join(f"{MARK[ok]} {shown(name)}" for name, ok in e.checks or ()),
            shown(e.record.transcript),
        ]
        for e in episodes
    ]
    return [*columns, "transcript"], rows
