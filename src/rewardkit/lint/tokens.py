"""``rewardkit lint tokens``: where the loss falls, with ms-swift's own template and encoder.

Each row goes through what ``swift sft`` does to it: ms-swift's dataset preprocessor (``AutoPreprocessor``,
the step ``load_dataset`` runs: agent ``tool_call``/``tool`` messages, a ``tools`` column, ``messages``,
query/response and alpaca rows all become ``messages``), then ``template.encode`` in train mode with
``loss_scale`` (``default``: every agent turn, reply or tool call, is trained; nothing else). The
multi-turn GRPO trainer encodes a finished rollout with the same ``template.encode`` (``encode_sample``), so
a rollout's messages are checked the same way. A label of -100 is no loss.

Per row, three rules (each a :class:`Problem`):

- ``user_loss`` / ``tool_loss`` / ``system_loss``: a token of a user, tool-result or system message carries loss;
- ``agent_no_loss``: an agent turn (a run of assistant and ``tool_call`` messages) carries none, unless every
  message in it says ``"loss": false``;
- ``no_tool_result``: a tool call is not answered by a ``tool`` message before the next agent text or user turn,
  so what follows it (often a tool result moved into an assistant turn) is trained as the agent's.

ms-swift is imported inside the functions only.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rewardkit.envs.tool_calls import tool_calls

AGENT = ("assistant", "tool_call")
CONTEXT = ("system", "user", "tool")


class TokenLintError(ValueError):
    """The model directory or the data cannot be used (a usage error: exit 2)."""


@dataclass(frozen=True)
class Problem:
    rule: str  # user_loss | tool_loss | system_loss | agent_no_loss | no_tool_result | encode_error
    message: int | None  # index in the preprocessed messages, None for the whole row
    detail: str


@dataclass
class RowTokens:
    """One encoded row: its tokens' text pieces, which carry loss, and what is wrong."""

    index: int  # 0-based row of the data file
    pieces: list[str] = field(default_factory=list)  # decoded text of each token, in order
    loss: list[bool] = field(default_factory=list)
    roles: list[str] = field(default_factory=list)  # per token: the role of the message it lies in, or "template"
    problems: list[Problem] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return not self.problems

    def counts(self) -> dict[str, list[int]]:
        """Role -> [tokens, tokens with loss]."""
        out: dict[str, list[int]] = {}
        for role, lost in zip(self.roles, self.loss, strict=True):
            cell = out.setdefault(role, [0, 0])
            cell[0] += 1
            cell[1] += lost
        return out


def load_template(
    model: str | Path,
    *,
    template_type: str | None = None,
    loss_scale: str = "default",
    agent_template: str | None = None,
    max_length: int | None = None,
) -> Any:
    """ms-swift's template for ``model`` in train mode, as ``swift sft`` builds it (``get_processor``,
    ``get_template``)."""
    path = Path(model)
    if not path.is_dir():
        raise TokenLintError(f"--model {model}: not a directory (a local model or tokenizer directory)")
    from swift.model import get_processor
    from swift.template import get_template

    try:
        processor = get_processor(str(path))
    except Exception as exc:  # any loader failure is the directory's fault here
        raise TokenLintError(f"--model {model}: ms-swift cannot load its tokenizer ({exc})") from exc
    kwargs: dict[str, Any] = {"loss_scale": loss_scale, "template_type": template_type}
    kwargs["agent_template"] = agent_template
    if max_length is not None:
        kwargs["max_length"] = max_length
    template = get_template(processor, **kwargs)
    template.set_mode("train")
    return template


def preprocess(rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The rows as ms-swift's ``load_dataset`` hands them to the encoder (in memory: no dataset cache is written)."""
    import datasets
    from swift.dataset.preprocessor import AutoPreprocessor

    dataset = datasets.Dataset.from_list([dict(r) for r in rows])
    done = AutoPreprocessor()(dataset, num_proc=1, load_from_cache_file=False, strict=True)
    return [dict(r) for r in done]


def token_pieces(tokenizer: Any, ids: Sequence[int]) -> list[str]:
    """The text of each token, so that ``"".join`` is the decoded row. A token that ends inside a UTF-8
    character gets "" and the next one the whole character."""
    pieces: list[str] = []
    pending: list[int] = []
    for token in ids:
        pending.append(token)
        text = tokenizer.decode(pending, skip_special_tokens=False, clean_up_tokenization_spaces=False)
        if text.endswith("\ufffd") and len(pending) < 4:
            pieces.append("")
            continue
        pieces.append(text)
        pending = []
    return pieces


def _locate(text: str, content: str, start: int) -> tuple[int, int] | None:
    at = text.find(content, start) if content else -1
    return (at, at + len(content)) if at >= 0 else None


def _no_result(messages: Sequence[Mapping[str, Any]]) -> list[Problem]:
    """Tool calls that no ``tool`` message answers before the next agent text or user turn."""
    out = []
    for i, m in enumerate(messages):
        calls = m.get("role") == "tool_call" or (m.get("role") == "assistant" and tool_calls([m]))
        if not calls:
            continue
        nxt = next((j for j in range(i + 1, len(messages)) if messages[j].get("role") != "tool_call"), None)
        if nxt is None or messages[nxt].get("role") == "tool":
            continue
        role = messages[nxt].get("role")
        out.append(
            Problem(
                "no_tool_result",
                nxt,
                f"the tool call of message {i} gets no tool result: message {nxt} "
                f"({role}) follows it and is trained as the agent's (a tool result moved into an "
                f"{role} turn?)",
            )
        )
    return out


def analyse(
    index: int, messages: Sequence[Mapping[str, Any]], ids: Sequence[int], labels: Sequence[int], tokenizer: Any
) -> RowTokens:
    """Attribute every token to a message by locating each context message's text in the decoded row, in order;
    agent turns are the stretches between them."""
    row = RowTokens(index, token_pieces(tokenizer, ids), [label != -100 for label in labels])
    text = "".join(row.pieces)
    starts, pos = [], 0
    for piece in row.pieces:
        starts.append(pos)
        pos += len(piece)
    spans: dict[int, tuple[int, int]] = {}  # context message index -> its chars in text
    cursor = 0
    for i, m in enumerate(messages):
        content = m.get("content")
        if m.get("role") in CONTEXT and isinstance(content, str) and content.strip():
            found = _locate(text, content, cursor)
            if found is not None:
                spans[i], cursor = found, found[1]
    row.roles = ["template"] * len(ids)
    for i, (lo, hi) in spans.items():
        role = str(messages[i]["role"])
        hit = [t for t in range(len(ids)) if starts[t] < hi and starts[t] + len(row.pieces[t]) > lo]
        for t in hit:
            row.roles[t] = role
        lost = [t for t in hit if row.loss[t]]
        if lost:
            shown = "".join(row.pieces[t] for t in lost)[:60]
            row.problems.append(
                Problem(
                    f"{role}_loss",
                    i,
                    f"{len(lost)} of {len(hit)} tokens of the {role} message {i} carry loss: {shown!r}",
                )
            )
    row.problems += _agent_turns(messages, spans, row, starts, len(text))
    row.problems += _no_result(messages)
    return row


def _agent_turns(
    messages: Sequence[Mapping[str, Any]],
    spans: Mapping[int, tuple[int, int]],
    row: RowTokens,
    starts: Sequence[int],
    end: int,
) -> list[Problem]:
    """Each run of agent messages must carry loss somewhere between the context messages around it."""
    out: list[Problem] = []
    i = 0
    while i < len(messages):
        if messages[i].get("role") not in AGENT:
            i += 1
            continue
        j = i
        while j < len(messages) and messages[j].get("role") in AGENT:
            j += 1
        before = [spans[k][1] for k in spans if k < i]
        after = [spans[k][0] for k in spans if k >= j]
        lo, hi = (max(before) if before else 0), (min(after) if after else end)
        region = [t for t in range(len(starts)) if lo <= starts[t] < hi]
        for t in region:
            if row.roles[t] == "template":
                row.roles[t] = "agent"
        opted_out = all(messages[k].get("loss") is False for k in range(i, j))
        if not opted_out and not any(row.loss[t] for t in region):
            roles = ", ".join(str(messages[k]["role"]) for k in range(i, j))
            out.append(Problem("agent_no_loss", i, f"the agent turn of messages {i}-{j - 1} ({roles}) carries no loss"))
        i = j
    return out


def lint_rows(template: Any, rows: Sequence[Mapping[str, Any]]) -> list[RowTokens]:
    """Every row preprocessed and encoded as ``swift sft`` does it, then analysed."""
    out = []
    for index, row in enumerate(preprocess(rows)):
        messages = [m for m in row.get("messages") or [] if isinstance(m, Mapping)]
        try:
            encoded = template.encode(row)
        except Exception as exc:  # a row the template refuses is reported, not raised
            bad = RowTokens(index)
            bad.problems.append(Problem("encode_error", None, f"{type(exc).__name__}: {str(exc)[:200]}"))
            out.append(bad)
            continue
        out.append(analyse(index, messages, encoded["input_ids"], encoded["labels"], template.tokenizer))
    return out


def summary(results: Sequence[RowTokens]) -> dict[str, Any]:
    """The JSON report: per rule the rows that break it, per role the tokens and loss tokens."""
    roles: dict[str, list[int]] = {}
    for r in results:
        for role, (n, lost) in r.counts().items():
            cell = roles.setdefault(role, [0, 0])
            cell[0] += n
            cell[1] += lost
    return {
        "rows": len(results),
        "passed": all(r.passed for r in results),
        "failed_rows": [r.index for r in results if not r.passed],
        "tokens": {role: {"tokens": n, "loss": lost} for role, (n, lost) in sorted(roles.items())},
        "problems": [
            {"row": r.index, "rule": p.rule, "message": p.message, "detail": p.detail}
            for r in results
            for p in r.problems
        ],
    }
