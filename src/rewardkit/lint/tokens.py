"""``rewardkit lint tokens``: where the loss falls, with ms-swift's own template and encoder.

The flags and each row are checked first (:mod:`rewardkit.lint.token_checks`: a bad one is a usage error, a row
named ``FILE:LINE``). Then each row goes through what ``swift sft`` does to it: ms-swift's dataset preprocessor
(``AutoPreprocessor``, the step ``load_dataset`` runs: agent ``tool_call``/``tool`` messages, a ``tools`` column and
role aliases become standard ``messages``), then ``template.encode`` in train mode with ``loss_scale``
(``default``: every agent turn, reply or tool call, is trained; nothing else). The multi-turn GRPO trainer encodes
a finished rollout with the same ``template.encode`` (``encode_sample``), so a rollout's messages are checked the
same way. A label of -100 is no loss. Which tokens are which message's comes from the encoder too, never from a
search for the message's text (:mod:`rewardkit.lint.attribution`).

Per row, these rules (each a :class:`Problem`):

- ``user_loss`` / ``tool_loss`` / ``system_loss``: a token of a user, tool-result or system message carries loss;
- ``agent_no_loss``: an agent turn (a run of assistant and ``tool_call`` messages) carries none, unless every
  message in it says ``"loss": false``;
- ``no_tool_result``: a tool call is not answered by a ``tool`` message before the next agent text or user turn,
  so what follows it (often a tool result moved into an assistant turn) is trained as the agent's;
- ``no_agent_turn``: the row has no assistant or ``tool_call`` message, so nothing in it would be trained;
- ``unattributed``: the two encodings cannot be aligned to the messages, so the token rules cannot be checked;
- ``encode_error``: the template refuses the row (too long for ``max_length``, roles out of order).

ms-swift is imported inside the functions only.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rewardkit.envs.tool_calls import tool_calls
from rewardkit.lint.attribution import Span, context_spans, role_of
from rewardkit.lint.token_checks import TokenLintError, check_options, prepared

AGENT = ("assistant", "tool_call")


@dataclass(frozen=True)
class Problem:
    rule: str  # one of the module's rules: user_loss, tool_loss, ..., unattributed, encode_error
    message: int | None  # index in the preprocessed messages, None for the whole row
    detail: str


@dataclass
class RowTokens:
    """One encoded row: its tokens' text pieces, which carry loss, and what is wrong."""

    index: int  # 0-based row of the data file
    pieces: list[str] = field(default_factory=list)  # decoded text of each token, in order
    loss: list[bool] = field(default_factory=list)
    roles: list[str] = field(default_factory=list)  # per token: its message's role, "agent", "template", ...
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


@contextlib.contextmanager
def quiet() -> Iterator[None]:
    """ms-swift's INFO and WARNING lines (its template settings), transformers' warnings and datasets' progress bars
    off while ms-swift works for ``lint tokens``: the report is the output, and a usage error stays one line."""
    import datasets
    from swift.utils.logger import logger as swift_logger
    from transformers.utils import logging as hf_logging

    level, verbosity, bars = swift_logger.level, hf_logging.get_verbosity(), datasets.is_progress_bar_enabled()
    swift_logger.setLevel(logging.ERROR)
    hf_logging.set_verbosity_error()
    datasets.disable_progress_bars()
    try:
        yield
    finally:
        swift_logger.setLevel(level)
        hf_logging.set_verbosity(verbosity)
        if bars:
            datasets.enable_progress_bars()


def load_template(
    model: str | Path,
    *,
    template_type: str | None = None,
    loss_scale: str = "default",
    agent_template: str | None = None,
    max_length: int | None = None,
) -> Any:
    """ms-swift's template for ``model`` in train mode, as ``swift sft`` builds it (``get_processor``,
    ``get_template``), after :func:`~rewardkit.lint.token_checks.check_options`."""
    path = Path(model)
    if not path.is_dir():
        raise TokenLintError(f"--model {model}: not a directory (a local model or tokenizer directory)")
    with quiet():
        check_options(template_type, loss_scale, agent_template, max_length)
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
        try:
            template = get_template(processor, **kwargs)
        except ValueError as exc:  # no template type matches the model: --template names one
            raise TokenLintError(
                f"--model {model}: ms-swift finds no template for it ({exc}); pass --template"
            ) from exc
    template.set_mode("train")
    return template


def preprocess(rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The rows as ms-swift's ``load_dataset`` hands them to the encoder (in memory: no dataset cache is read).
    Checked rows (:func:`rewardkit.lint.token_checks.prepared`) pass; whatever ms-swift or Arrow still refuses, or a
    row ms-swift drops, is a usage error too."""
    import datasets
    from swift.dataset.preprocessor import AutoPreprocessor

    try:
        dataset = datasets.Dataset.from_list([dict(r) for r in rows])
        done = AutoPreprocessor()(dataset, num_proc=None, load_from_cache_file=False, strict=True)  # in process
    except Exception as exc:  # the data's fault: the rows are all this step reads
        raise TokenLintError(f"ms-swift's preprocessor refuses the rows ({type(exc).__name__}: {exc})") from exc
    if len(done) != len(rows):
        raise TokenLintError(f"ms-swift's preprocessor kept {len(done)} of {len(rows)} rows")
    return [dict(r) for r in done]


def _singles(tokenizer: Any, ids: Sequence[int]) -> list[str]:
    """Each token decoded alone: one call to a fast tokenizer's backend, else one ``decode`` per token."""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is not None:
        return backend.decode_batch([[t] for t in ids], skip_special_tokens=False)
    return [tokenizer.decode([t], skip_special_tokens=False, clean_up_tokenization_spaces=False) for t in ids]


def token_pieces(tokenizer: Any, ids: Sequence[int]) -> list[str]:
    """The text of each token, so that ``"".join`` is the decoded row. A token that ends inside a UTF-8
    character gets "" and the next one the whole character."""
    pieces: list[str] = []
    pending: list[int] = []
    for token, alone in zip(ids, _singles(tokenizer, ids), strict=True):
        pending.append(token)
        text = alone
        if len(pending) > 1:  # the bytes of one character, split over tokens
            text = tokenizer.decode(pending, skip_special_tokens=False, clean_up_tokenization_spaces=False)
        if text.endswith("\ufffd") and len(pending) < 4:
            pieces.append("")
            continue
        pieces.append(text)
        pending = []
    return pieces


def _no_result(messages: Sequence[Mapping[str, Any]]) -> list[Problem]:
    """Tool calls that no ``tool`` message answers before the next agent text or user turn."""
    out = []
    for i, m in enumerate(messages):
        calls = m.get("role") == "tool_call" or (m.get("role") == "assistant" and tool_calls([m]))
        if not calls:
            continue
        nxt = next((j for j in range(i + 1, len(messages)) if messages[j].get("role") != "tool_call"), None)
        if nxt is None or role_of(messages[nxt]) == "tool":
            continue
        role = messages[nxt].get("role")
        detail = f"the tool call of message {i} gets no tool result: message {nxt} ({role}) follows it and is trained"
        out.append(
            Problem("no_tool_result", nxt, f"{detail} as the agent's (a tool result moved into an {role} turn?)")
        )
    return out


def _no_agent_turn(messages: Sequence[Mapping[str, Any]]) -> list[Problem]:
    """A row without an assistant or ``tool_call`` message: nothing in it would be trained."""
    if any(m.get("role") in AGENT for m in messages):
        return []
    roles = ", ".join(str(m.get("role")) for m in messages)
    detail = f"no assistant or tool_call message ({roles}): nothing in the row would be trained"
    return [Problem("no_agent_turn", None, detail)]


def _agent_runs(messages: Sequence[Mapping[str, Any]]) -> Iterator[tuple[int, int]]:
    """Each agent turn: the messages ``[i, j)`` of a maximal run of assistant and ``tool_call`` messages."""
    i = 0
    while i < len(messages):
        if messages[i].get("role") not in AGENT:
            i += 1
            continue
        j = i
        while j < len(messages) and messages[j].get("role") in AGENT:
            j += 1
        yield i, j
        i = j


def _agent_turns(messages: Sequence[Mapping[str, Any]], spans: Sequence[Span], row: RowTokens) -> list[Problem]:
    """Each agent turn is the stretch between the context spans around it (its header and end token included: two
    turns with only empty context messages between them share one); it must carry loss somewhere."""
    out: list[Problem] = []
    for i, j in _agent_runs(messages):
        lo = max((s.hi for s in spans if s.messages[-1] < i), default=0)
        hi = min((s.lo for s in spans if s.messages[0] >= j), default=len(row.roles))
        row.roles[lo:hi] = ["agent"] * (hi - lo)
        opted_out = all(messages[k].get("loss") is False for k in range(i, j))
        if not opted_out and not any(row.loss[lo:hi]):
            roles = ", ".join(str(messages[k]["role"]) for k in range(i, j))
            out.append(Problem("agent_no_loss", i, f"the agent turn of messages {i}-{j - 1} ({roles}) carries no loss"))
    return out


def analyse(
    index: int,
    messages: Sequence[Mapping[str, Any]],
    encoded: Mapping[str, Sequence[int]],
    tokenizer: Any,
    spans: Sequence[Span],
) -> RowTokens:
    """Every token of the ``encoded`` row put in the context message whose span holds it (``spans``, from
    :func:`rewardkit.lint.attribution.context_spans`) or in the agent turn between them; then the token rules."""
    ids, labels = encoded["input_ids"], encoded["labels"]
    row = RowTokens(index, token_pieces(tokenizer, ids), [label != -100 for label in labels], ["template"] * len(ids))
    for span in spans:
        role = role_of(messages[span.messages[0]])
        row.roles[span.lo : span.hi] = [role] * (span.hi - span.lo)
        lost = [t for t in range(span.lo, span.hi) if row.loss[t]]
        if lost:
            which = ("message " if len(span.messages) == 1 else "messages ") + ", ".join(map(str, span.messages))
            shown = "".join(row.pieces[t] for t in lost)[:60]
            detail = f"{len(lost)} of {span.hi - span.lo} tokens of the {role} {which} carry loss: {shown!r}"
            row.problems.append(Problem(f"{role}_loss", span.messages[0], detail))
    row.problems += _agent_turns(messages, spans, row)
    return row


def _lint_row(template: Any, index: int, row: Mapping[str, Any]) -> RowTokens:
    """One preprocessed row: encoded, its tokens attributed, every rule checked."""
    messages = row["messages"]
    try:
        encoded = template.encode(row)
    except Exception as exc:  # a row the template refuses is reported, not raised
        return RowTokens(index, problems=[Problem("encode_error", None, f"{type(exc).__name__}: {str(exc)[:200]}")])
    spans, why = context_spans(template, row, encoded["input_ids"])
    if why is None:
        result = analyse(index, messages, encoded, template.tokenizer, spans)
    else:
        ids = encoded["input_ids"]
        loss = [label != -100 for label in encoded["labels"]]
        detail = f"{why}: lint cannot tell which message each token is in"
        problem = Problem("unattributed", None, detail)
        result = RowTokens(index, token_pieces(template.tokenizer, ids), loss, ["unattributed"] * len(ids), [problem])
    result.problems += _no_result(messages) + _no_agent_turn(messages)
    return result


def lint_rows(template: Any, rows: Sequence[Mapping[str, Any]], where: Sequence[str] | None = None) -> list[RowTokens]:
    """Every row checked (``where`` names each, ``FILE:LINE``; default ``row N``), preprocessed and encoded as
    ``swift sft`` does it, then analysed."""
    labels = list(where) if where is not None else [f"row {i + 1}" for i in range(len(rows))]
    with quiet():
        return [_lint_row(template, i, row) for i, row in enumerate(preprocess(prepared(rows, labels)))]


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
