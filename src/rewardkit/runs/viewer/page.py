"""The episode viewer: one self-contained HTML page of an episode log (``synth agent`` or ``eval agent``), or of a
GRPO run's completions (the runs ``rewardkit audit`` reads).

The page needs no server and no network: the episodes are embedded in it as JSON, with the page's own CSS and
JavaScript (``viewer.html``). The JSON is inert wherever it sits in the page (every ``<``, ``>``, ``&``, U+2028/9
and lone surrogate is a ``\\u`` escape, so no text can end the script or open a comment in it), and the page's
content security policy lets only the page's own script and style run, named by their SHA-256.

For each episode it shows why it scored what it did first: one line, the reward's checks each met or not, and the
final database against the task's gold state as a diff of fields (a missing value apart from a null). The run
recorded both (``Scorer.explain``), so the page is built from the log alone, with no replay; a log written
before that is replayed on fresh copies of the domain's database. Then the transcript: each call once, its
arguments and the tools' JSON results formatted and folded when long, a tool's error or a gate marked on the
message where it happened, the system prompt folded to its first line. Whatever it shows as JSON it shows in the
order and spelling the agent saw: the tools' results as their own text, laid out token by token in the browser, and
the arguments, the diff's values, the gates and the scores as JSON text written here in their own order, never read
into a JavaScript object (which would put keys like ``"1008292230"`` first and round a number past 2^53). The list
searches what was said and called, filters by outcome, task, ending and verdict (the counts follow), sorts, pages
100 rows at a time, and keeps its filters and the open episode in the address, so a link opens the same view. With
``review`` the keyboard judges (``a`` accept, ``r`` reject, ``n`` the next unreviewed); the verdicts are kept in the
browser across reloads and saved to, or loaded back from, a verdicts file that ``synth agent --verdicts FILE``
reads: the human half of MUA-RL's dual verification. Each verdict is saved with the digest of the episode it was
given on (:func:`episode_digest`), and both the page's Load and :func:`verdicts_for` apply it only to that episode:
another log of the same run reuses the ids for other episodes.
"""

from __future__ import annotations

import base64
import contextlib
import functools
import gc
import hashlib
import json
import math
import re
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

import msgspec
import numpy as np

from rewardkit.envs import Domain, DomainError, get_domain
from rewardkit.envs.approvals import user_decision
from rewardkit.envs.episode_record import EpisodeRecord, why_scored
from rewardkit.envs.task_verdict import task_verdict
from rewardkit.envs.termination import EXCLUDED
from rewardkit.envs.tool import ResultCode
from rewardkit.envs.tool_calls import ToolCall, tool_calls, without_calls
from rewardkit.errors import UserError
from rewardkit.files.jsonl import json_problem, kind, lines
from rewardkit.rewards import TaskCompletion
from rewardkit.rewards.groups import TOL, totals
from rewardkit.runs.episodes.records import record_problem
from rewardkit.runs.episodes.scorer import Scorer
from rewardkit.runs.training.audit import Run

MARKER = "/*__EPISODES__*/null"  # where the page's data goes
# Placeholders of the template, each replaced once, in one pass: nothing substituted in is read again.
_SLOTS = re.compile(f"({re.escape(MARKER)}|__TITLE__|__LANG__|__SCRIPT_SHA256__|__STYLE_SHA256__)")
GATE_CODES = frozenset({ResultCode.APPROVAL_REQUIRED.value, ResultCode.HARD_GATE.value})  # a gate's, not a failure
# What could end the data's script or start a comment or markup in it, in the data's UTF-8: the characters <, > and
# &, and the line and paragraph separators (U+2028, U+2029), each written as its JSON escape.
_ESCAPED = {c.encode(): f"\\u{ord(c):04x}".encode() for c in "<>&\u2028\u2029"}
# The page's JSON text (:func:`_json`: strict, NaN refused) and a message's text that is not a string (:func:`_text`).
_JSON = json.JSONEncoder(ensure_ascii=False, allow_nan=False).encode
_TEXT = json.JSONEncoder(ensure_ascii=False).encode


class ViewerError(UserError, ValueError):
    """The log cannot be shown: no episodes, a line that is not an episode record, no domain to replay it on."""


def episode_id(record: Mapping[str, Any]) -> str:
    """How the page and a verdicts file name an episode: ``task/trial``."""
    return f"{record['task_id']}/{record['trial']}"


def read_verdicts(path: Path, run: str) -> dict[str, tuple[str, str]]:
    """A verdicts file the viewer saved for the run ``run``: episode id -> (``accept`` or ``reject``, the digest of
    the episode it was given on). A file without digests (an older viewer's) is refused: nothing says which of the
    episodes that share an id its verdicts were given on."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ViewerError(f"--verdicts {path}: cannot be read as JSON ({exc})") from exc
    verdicts = data.get("verdicts") if isinstance(data, Mapping) else None
    if not isinstance(verdicts, Mapping):
        raise ViewerError(f"--verdicts {path}: no 'verdicts' object; save it from the viewer (rewardkit view --review)")
    if data.get("run") != run:
        raise ViewerError(f"--verdicts {path}: judged run {data.get('run')!r}, but this synthesis is run {run!r}")
    found = {}
    for key, entry in verdicts.items():
        if not (isinstance(entry, Mapping) and isinstance(entry.get("digest"), str)):
            raise ViewerError(
                f"--verdicts {path}: verdicts.{key} names no episode digest (an older viewer saved it); open the "
                "review page it was judged on and save again (that browser kept each verdict with its episode's "
                "digest), or judge the episodes again"
            )
        verdict = entry.get("verdict")
        if verdict not in ("accept", "reject"):
            raise ViewerError(
                f"--verdicts {path}: verdicts.{key}.verdict must be 'accept' or 'reject', got {kind(verdict)}"
            )
        found[key] = (entry["verdict"], entry["digest"])
    return found


def verdicts_for(
    records: Sequence[Mapping[str, Any]], verdicts: Mapping[str, tuple[str, str]]
) -> tuple[dict[str, str], list[str]]:
    """The verdicts (:func:`read_verdicts`) given on these episodes, id -> ``accept`` or ``reject``, and the ids of
    those given on another episode of the same id (another log of the run): never applied, as if nobody had judged
    it. A verdict on an id the records do not hold applies to nothing."""
    given, elsewhere = {}, []
    for record in records:
        eid = episode_id(record)
        if eid in verdicts:
            verdict, digest = verdicts[eid]
            if digest == episode_digest(record):
                given[eid] = verdict
            else:
                elsewhere.append(eid)
    return given, elsewhere


def read_log(path: Path) -> list[dict[str, Any]]:
    """The episode records of a log (strict JSON), each checked as ``eval compare`` checks them; a line without
    ``task_id`` is not an episode and is passed over."""
    records = []
    for line in lines(path):
        problem = line.problem
        if problem is None and "task_id" in line.value:
            problem = record_problem(line.value, log=False)
            problem = problem and f"not an episode record ({problem}); fix or remove the line"
        if problem is not None:
            raise ViewerError(f"{line.where(path)}: {problem}")
        records.append(line.value)
    return records


def log_domain(log: Path, name: str | None) -> Domain:
    """The domain to replay ``log`` on: ``name`` (``--domain``), else the one its eval recorded in the
    ``summary.json`` beside its ``episodes.jsonl`` (its path, for a domain given by path). Any other log (``synth
    --episodes``) records none, and the caller must name it: another domain's tasks would replay as wrong diffs."""
    if name is not None:
        return get_domain(name)
    summary = log.parent / "summary.json"
    if log.name != "episodes.jsonl" or not summary.is_file():
        raise ViewerError(f"{log} records no domain (an eval --out-dir's summary.json does); name it: --domain NAME")
    data, problem = json_problem(summary.read_bytes().decode("utf-8", "replace"), strict=False)
    if problem is None and not isinstance(data, dict):
        problem = f"expected a JSON object, got {kind(data)}"
    ref = data.get("domain_ref", data.get("domain")) if problem is None else None
    if problem is None and not (isinstance(ref, str) and ref):
        problem = f"'domain' must name the run's domain, got {kind(ref)}"
    if problem is not None:
        raise ViewerError(f"{summary}: {problem}; name the domain with --domain")
    try:
        return get_domain(ref)
    except DomainError as exc:
        raise ViewerError(f"{summary}: the run's domain: {exc}; name it with --domain PATH") from None


@dataclass
class _Seen:
    """What a page's episodes share, each worked out once: the system prompts (text -> index on the page), the
    messages of text alone (role and text -> :func:`_said`) and the hashes after an episode's first message (its
    part of the digest -> the hash after it)."""

    systems: dict[str, int] = field(default_factory=dict)
    said: dict[tuple[str, str], tuple[dict[str, Any] | None, bytes]] = field(default_factory=dict)
    opened: dict[bytes, Any] = field(default_factory=dict)


def _messages(messages: Sequence[Any], seen: _Seen) -> tuple[list[dict[str, Any]], str]:
    """The messages as the page shows them (:func:`_turn`) and their digest (:func:`episode_digest`), the hash after
    the first message worked out once per page: every episode of a run opens with the same system prompt, most of
    an episode's text."""
    turns, parts = [], []
    for message in messages:
        turn, part = _said(message, seen)
        if turn is not None:
            turns.append(turn)
        parts.append(part)
    if not parts:
        return turns, hashlib.blake2b(digest_size=8).hexdigest()
    opened = seen.opened.get(parts[0])
    if opened is None:
        opened = seen.opened[parts[0]] = hashlib.blake2b(parts[0], digest_size=8)
    digest = opened.copy()
    digest.update(b"".join(parts[1:]))
    return turns, digest.hexdigest()


def _said(message: Any, seen: _Seen) -> tuple[dict[str, Any] | None, bytes]:
    """A message's turn (None for what is not a message) and its part of the digest (:func:`_part`). A message of
    text alone as JSON reads it (an object with a string role and text, no calls beside them) is worked out once per
    page, as the trials of a task repeat the same messages."""
    if type(message) is dict and message.get("tool_calls") is None:
        key = (message.get("role"), message.get("content"))
        if type(key[0]) is str and type(key[1]) is str:
            said = seen.said.get(key)
            if said is None:
                said = seen.said[key] = _turn(message, seen.systems), _part(message)
            return said
    return (_turn(message, seen.systems) if isinstance(message, Mapping) else None), _part(message)


def _turn(message: Mapping[str, Any], systems: dict[str, int]) -> dict[str, Any]:
    """A message as the page shows it: each call once (parsed, its raw text taken out of the message), a tool error
    or gate marked on the message where it happened, and a system prompt stored once in ``systems`` (text ->
    index), as every episode of a run repeats it."""
    role, text = str(message.get("role")), _text(message.get("content"))
    calls = [_call(c) for c in tool_calls([message])]
    turn: dict[str, Any] = {"role": role, "calls": calls}
    if role == "system":
        turn["system"] = systems.setdefault(text, len(systems))
    elif role == "assistant":
        turn["content"] = without_calls(text).strip()
    else:
        turn["content"] = "" if role == "tool_call" else text  # ms-swift's call message: the call is shown
    mark = _mark(role, text)
    if mark is not None:
        turn["mark"] = mark
    return turn


def _call(call: ToolCall) -> dict[str, Any]:
    """A call as the page shows it: its arguments as JSON text (:func:`_json`) and their names, in the agent's order."""
    shown = {"name": call.name, "arguments": _json(call.arguments), "keys": list(call.arguments)}
    return {**shown, **({"error": call.error} if call.error else {})}


def _json(value: Any) -> str:
    """``value`` as the page shows it: JSON text in its own key order. The page lays it out (``pretty``) but never
    reads it into a JavaScript object, which would put the keys that are array indices first and round numbers."""
    return _JSON(value)


def _mark(role: str, text: str) -> str | None:
    """What happened at this message: a tool's error code (``error NOT_FOUND``), a gate's refusal (``gate
    APPROVAL_REQUIRED``, ``gate HARD_GATE``) or the user's decision on a held call (``gate approve_request``)."""
    if role == "user":
        decision = user_decision(text)
        return None if decision is None else f"gate {decision}"
    if role != "tool" or not text.startswith('{"error"'):  # a refusal's JSON (ToolResult.error), nothing else
        return None
    try:
        error = json.loads(text).get("error")
    except (ValueError, AttributeError, RecursionError):
        return None
    code = error.get("code") if isinstance(error, Mapping) else None
    if not isinstance(code, str):
        return None
    return f"gate {code}" if code in GATE_CODES else f"error {code}"


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "null" if content is None else _TEXT(content)  # most messages carry no calls: their null needs no encoder


def _episode(
    eid: str, record: Mapping[str, Any], explain: Callable[[Mapping[str, Any]], tuple[Any, Any]], seen: _Seen
) -> dict[str, Any]:
    turns, digest = _messages(record.get("messages") or [], seen)
    closing = record.get("closing")
    if isinstance(closing, str):  # the user's line that ended it, after the messages the agent saw: never seen by it
        turns.append({"role": "user", "calls": [], "content": closing, "mark": "closing closing"})
    checks, diff = record.get("checks"), record.get("diff")
    if "checks" not in record and record.get("status") == "ok":  # a log from before runs recorded why: replay it
        checks, diff = explain(record)
    return {
        "id": eid,
        "task": str(record["task_id"]),
        "trial": record["trial"],
        "reward": record.get("reward"),
        "passed": record.get("reward") == 1.0,
        "termination": record.get("termination") or record.get("status"),
        "excluded": record.get("termination") in EXCLUDED or record.get("status") != "ok",
        "turns": record.get("turns"),
        "gates": _json(record.get("gates") or {}),
        "user_flags": [f for f in record.get("user_flags") or [] if isinstance(f, Mapping)],  # the user review's
        "checks": checks,
        "why": why(record, None if checks is None else [(c["check"], c["passed"]) for c in checks]),
        "messages": turns,
        "diff": None if diff is None else [_shown_diff(d) for d in diff],
        "digest": digest,
    }


def _shown_diff(entry: Mapping[str, Any]) -> dict[str, Any]:
    """A diff's entry with each side's value as JSON text (:func:`_json`)."""
    shown = dict(entry)
    for side in ("agent", "gold"):
        if side in shown:
            shown[side] = _json(shown[side])
    return shown


def episode_digest(record: Mapping[str, Any]) -> str:
    """A short digest of an episode's messages (roles, texts, calls): a verdict, kept in the browser or saved to a
    file, is applied only to the episode it was given on."""
    parts = b"".join(_part(message) for message in record.get("messages") or [])
    return hashlib.blake2b(parts, digest_size=8).hexdigest()


def _part(message: Any) -> bytes:
    """A message's part of its episode's digest: its role, text and calls, each ended by a NUL."""
    found = message if isinstance(message, Mapping) else {"content": message}
    role, content, calls = (_text(found.get(key)) for key in ("role", "content", "tool_calls"))
    return f"{role}\0{content}\0{calls}\0".encode("utf-8", "replace")


def _explained(record: Mapping[str, Any], tasks: Mapping[str, Any], scorer: Scorer) -> tuple[Any, Any]:
    """The checks and the diff of a record that lacks them, replayed as the run would have recorded them; none for a
    task the domain no longer holds or whose gold fails."""
    task = tasks.get(str(record["task_id"]))
    if task is None or not task_verdict(scorer.domain, task).playable:
        return None, None
    return scorer.explain(record.get("messages") or [], task, EpisodeRecord.read(record))


def why(record: Mapping[str, Any], checks: Sequence[tuple[str, bool]] | None) -> str:
    """One line: why the episode of an episode-log record scored what it did (:func:`why_scored`); a record whose
    status is not ``ok`` was left out."""
    ending = str(record.get("termination") or record.get("status"))
    return why_scored(ending, record.get("reward"), checks, left_out=record.get("status") != "ok")


def build(records: Sequence[Mapping[str, Any]], domain: Domain, title: str, review: bool = False) -> dict[str, Any]:
    """The page's data for an episode log: a summary, per task the passes over its trials, and every episode."""
    # A resumed log holds an episode again after its infrastructure failed: the last record of each is the episode.
    episodes = {episode_id(r): r for r in records if isinstance(r, Mapping) and "task_id" in r}
    if not episodes:
        raise ViewerError("the log holds no episodes")
    seen = _Seen()
    # The domain's tasks and a scorer, made for the first record that lacks its checks (a log from before).
    scoring = functools.cache(lambda: (domain.tasks(), Scorer(domain.name, TaskCompletion().require_outputs)))
    with _uncollected():
        shown = [_episode(eid, r, lambda r: _explained(r, *scoring()), seen) for eid, r in episodes.items()]
    run = str(next(iter(episodes.values())).get("run", ""))
    view = _page(title, run, domain.name, review, shown, seen.systems)
    return {**view, "language": domain.language}


@contextlib.contextmanager
def _uncollected() -> Iterator[None]:
    """The cyclic garbage collector paused: the page's data holds no cycles, and each collection while it is built
    would walk every record of the log again."""
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def build_grpo(run: Run, title: str) -> dict[str, Any]:
    """The page's data for a GRPO run (``completions.jsonl``): each group a "task", each completion a "trial"
    scored by its weighted total (passed when it reaches the sum of the positive weights), with its rewards."""
    full = float(run.weights[run.weights > 0].sum())
    shown = []
    for step in run.steps:
        total = totals(step.scores, run.weights)
        for i, (prompt, completion) in enumerate(zip(step.prompts, step.completions, strict=True)):
            group, trial = divmod(i, run.group_size)
            scores = {n: None if np.isnan(v) else float(v) for n, v in zip(run.names, step.scores[i], strict=True)}
            shown.append(
                {
                    "id": f"{step.step}.{group}/{trial}",
                    "task": f"{step.step}.{group}",
                    "trial": trial,
                    "reward": round(float(total[i]), 6) if math.isfinite(total[i]) else None,  # an overflow shows as —
                    "passed": bool(total[i] >= full - TOL),
                    "termination": f"{step.turns[i]} turns" if step.turns else "completion",
                    "excluded": False,
                    "turns": step.turns[i] if step.turns else 1,
                    "gates": _json({}),
                    "scores": _json(scores),
                    "diff": None,
                    "messages": [
                        {"role": "prompt", "content": prompt, "calls": []},
                        {"role": "assistant", "content": completion, "calls": []},
                    ],
                }
            )
    return _page(title, str(run.folder), "grpo", False, shown, {})  # load_run refuses a run without completions


def _page(
    title: str, run: str, domain: str, review: bool, shown: list[dict[str, Any]], systems: dict[str, int]
) -> dict[str, Any]:
    per_task: dict[str, dict[str, int]] = {}
    for e in shown:
        counts = per_task.setdefault(e["task"], {"trials": 0, "passed": 0, "excluded": 0})
        counts["trials"] += 1
        counts["passed"] += e["passed"]
        counts["excluded"] += e["excluded"]
    summary = {
        "episodes": len(shown),
        "passed": sum(e["passed"] for e in shown),
        "excluded": sum(e["excluded"] for e in shown),
        "tasks": len(per_task),
        "terminations": dict(Counter(e["termination"] for e in shown).most_common()),
    }
    return {
        "title": title,
        "run": run,
        "domain": domain,
        "review": review,
        "summary": summary,
        "tasks": per_task,
        "systems": list(systems),
        "episodes": shown,
    }


def render(view: Mapping[str, Any]) -> bytes:
    """The self-contained page, in UTF-8: the template with the data embedded inert (:func:`embed`), the title
    escaped, and the content security policy naming the SHA-256 of the page's own script and style, so that nothing
    else runs."""
    page = resources.files("rewardkit.runs.viewer").joinpath("viewer.html").read_text(encoding="utf-8")
    slots = {
        MARKER: embed(view),
        "__TITLE__": _escape(str(view["title"])),
        "__LANG__": b"zh" if view.get("language") == "zh" else b"en",  # the domain's: the browser picks fonts by it
        "__SCRIPT_SHA256__": _sha256(_element(page, "script")),
        "__STYLE_SHA256__": _sha256(_element(page, "style")),
    }
    pieces = _SLOTS.split(page)  # the template's text, each placeholder between two pieces of it
    return b"".join(slots[piece] if i % 2 else piece.encode("utf-8") for i, piece in enumerate(pieces))


def _element(page: str, tag: str) -> str:
    """The text of the template's one ``<tag>`` element."""
    return page.partition(f"<{tag}>")[2].partition(f"</{tag}>")[0]


def embed(value: Any) -> bytes:
    """``value`` as JSON in UTF-8 that holds no ``<``, ``>``, ``&``, line or paragraph separator and no lone
    surrogate: each is its ``\\u`` escape, which JSON reads back as the same text."""
    try:
        data = msgspec.json.encode(value)
    except UnicodeEncodeError:  # a lone surrogate, which UTF-8 cannot hold: written as its escape
        data = _JSON(value).encode("utf-8", "backslashreplace")
    for raw, escaped in _ESCAPED.items():
        data = data.replace(raw, escaped)
    return data


def _sha256(text: str) -> bytes:
    return base64.b64encode(hashlib.sha256(text.encode("utf-8")).digest())


def _escape(text: str) -> bytes:
    escaped = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace('"', "&quot;")
    return escaped.encode("utf-8", "replace")  # a lone surrogate (a path's odd byte) cannot be written
