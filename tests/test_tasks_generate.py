"""``rewardkit tasks generate``: scripted proposer and judge answers over real HTTP (``sim_server.SimServer``), each
blueprint checked on the real environment of the starter domain (written to tmp) or livestream (gates).

A script is a list of answers, one per HTTP request in arrival order (``--workers 1``), so a retry takes the next.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sim_server import SimServer

from rewardkit.cli import main
from rewardkit.envs import get_domain
from rewardkit.envs.registry import new_domain
from rewardkit.loop.roles import JsonRole
from rewardkit.runs.domains.domain_check import check_domain
from rewardkit.runs.episodes.episode_log import RunError
from rewardkit.runs.episodes.spec import RunSpec, build_plan
from rewardkit.runs.tasks.task_checks import Seen, rejection
from rewardkit.runs.tasks.task_gen import generate, to_task

ACCEPT = '{"verdict": "accept", "reason": "realistic and solvable", "fault": null}'
REJECT = '{"verdict": "reject", "reason": "the member never said which copy", "fault": "user"}'
NOT_JSON = "Here is a nice task for you!"


def blueprint(
    reason: str,
    actions: list[tuple[str, dict[str, Any]]],
    outputs: list[str],
    kind: str = "plain",
    approval: str | None = None,
) -> str:
    scenario = {"reason_for_call": reason, "known_info": ""} | ({"approval": approval} if approval else {})
    found = {
        "kind": kind,
        "user_scenario": scenario,
        "actions": [{"name": n, "arguments": a} for n, a in actions],
        "outputs": outputs,
    }
    return json.dumps(found, ensure_ascii=False)


def lend(title: str, book: str, member: str) -> list[tuple[str, dict[str, Any]]]:
    return [("find_book", {"title": title}), ("lend_book", {"book_id": book, "member_id": member})]


GOOD = blueprint("Please lend me Beloved; I am member m9 and would like it today.", lend("Beloved", "b4", "m9"), ["14"])
SECOND = blueprint("Middlemarch for member m3, thanks.", lend("Middlemarch", "b5", "m3"), ["14"])
FAILS = blueprint("Lend me Ulysses, member m1.", lend("Ulysses", "b3", "m1"), ["14"])  # b3 is on loan
NO_BOOK = blueprint("Is Hamlet on the shelf?", [("find_book", {"title": "Hamlet"})], ["no"])  # a read fails
READS = blueprint("Is Emma on the shelf?", [("find_book", {"title": "Emma"})], ["available"])  # plain: no write
DUPLICATE = blueprint("Member m7 here; Dune, please.", lend("Dune", "b1", "m7"), ["14"])  # the same gold as task 0
NEAR = blueprint("Please lend me Beloved; I am member m9 and would like it today!", lend("Beloved", "b4", "m9"), ["14"])
GUESSED = blueprint("Dune for member m6.", lend("Dune", "b1", "m6"), ["42"])  # 42 is in no result
SHAPELESS = '{"kind": "plain", "actions": "lend it"}'  # no user_scenario, actions not a list

# script, judge script (None: no judge), requested, then kept, rejected, the proposer's requests and invalid answers
CASES: dict[str, tuple[list[str], list[str] | None, int, int, dict[str, int], int, int]] = {
    # one good blueprint: kept 1 = requested 1 - rejected 0
    "good": ([GOOD], None, 1, 1, {}, 1, 0),
    # lend_book of a book on loan fails; find_book of a missing title fails (a read counts too): 2 gold_fails
    "gold_fails": ([FAILS, NO_BOOK], None, 2, 0, {"gold_fails": 2}, 2, 0),
    # a plain blueprint that only reads: no_change
    "no_change": ([READS], None, 1, 0, {"no_change": 1}, 1, 0),
    # task 0's gold; then GOOD kept, then GOOD's gold reworded: kept 1, duplicate 2
    "duplicate": ([DUPLICATE, GOOD, NEAR], None, 3, 1, {"duplicate": 2}, 3, 0),
    "outputs_unsupported": ([GUESSED], None, 1, 0, {"outputs_unsupported": 1}, 1, 0),
    # not JSON, then (asked again) GOOD: 2 requests, 1 invalid, kept 1
    "retry": ([NOT_JSON, GOOD], None, 1, 1, {}, 2, 1),
    # the wrong shape three times (--attempts 3): 3 requests, 3 invalid, proposer_error
    "proposer_error": ([SHAPELESS] * 3, None, 1, 0, {"proposer_error": 1}, 3, 3),
    # the judge accepts GOOD and rejects SECOND: kept 1, judge_rejected 1
    "judge": ([GOOD, SECOND], [ACCEPT, REJECT], 2, 1, {"judge_rejected": 1}, 2, 0),
    # the judge answers garbage three times: judge_error, nothing kept
    "judge_error": ([GOOD], [NOT_JSON] * 3, 1, 0, {"judge_error": 1}, 1, 0),
}


def scripted(answers: list[str]) -> Any:
    """A SimServer reply: the next answer per request (the last one again past the end)."""
    it: Iterator[str] = iter(answers)
    last = [answers[-1]]

    def reply(body: dict[str, Any]) -> str:
        last[0] = next(it, last[0])
        return last[0]

    return reply


@pytest.fixture
def starter(tmp_path: Path) -> str:
    name = f"library_{uuid.uuid4().hex[:8]}"  # domains register by name, once per process
    new_domain(name, tmp_path / name)
    return str(tmp_path / name)


def run_cli(tmp_path: Path, domain: str, model: str, n: int, *extra: str) -> tuple[int, list[Any], dict[str, Any]]:
    out, report = tmp_path / "tasks.json", tmp_path / "report.json"
    code = main(
        [
            "tasks",
            "generate",
            "--domain",
            domain,
            "--model",
            model,
            "--model-name",
            "proposer-m",
            "--n",
            str(n),
            "--out",
            str(out),
            "--report",
            str(report),
            "--workers",
            "1",
            *extra,
        ]
    )
    if code != 0:
        return code, [], {}
    return code, json.loads(out.read_text(encoding="utf-8")), json.loads(report.read_text(encoding="utf-8"))


@pytest.mark.parametrize(
    ("script", "judging", "n", "kept", "rejected", "requests", "invalid"), CASES.values(), ids=CASES
)
def test_each_blueprint_is_kept_or_rejected_for_one_reason(
    tmp_path: Path,
    starter: str,
    script: list[str],
    judging: list[str] | None,
    n: int,
    kept: int,
    rejected: dict[str, int],
    requests: int,
    invalid: int,
) -> None:
    with SimServer(reply=scripted(script)) as server, SimServer(reply=scripted(judging or [ACCEPT])) as judge:
        extra = ["--judge", judge.base_url, "--judge-model", "judge-m"] if judging else []
        code, tasks, report = run_cli(tmp_path, starter, server.base_url, n, *extra)
        assert code == 0
        assert len(server.requests) == requests
    assert report["requested"] == n == report["kept"] + sum(report["rejected"].values())
    assert (report["kept"], report["rejected"]) == (kept, rejected) and len(tasks) == kept
    proposer = report["ledger"][0]
    assert (proposer["role"], proposer["requests"], proposer["invalid"]) == ("proposer", requests, invalid)
    if judging:
        assert report["ledger"][1]["role"] == "judge"
        if "judge_rejected" in rejected:
            assert [r["reason"] for r in report["judge_reasons"]] == ["the member never said which copy"]
    assert [t["id"] for t in tasks] == [f"gen-{i:04d}" for i in range(1, kept + 1)]


def test_kept_tasks_pass_env_check_and_synth(tmp_path: Path, starter: str, capsys: pytest.CaptureFixture) -> None:
    with SimServer(reply=scripted([GOOD, FAILS, SECOND])) as server:
        code, tasks, report = run_cli(tmp_path, starter, server.base_url, 3)
    assert code == 0 and report["kept"] == 2  # 3 requested - 1 gold_fails
    found = check_domain(starter, tasks={t["id"]: t for t in tasks})
    assert found.passed, found.failed()
    out = tmp_path / "tasks.json"
    assert main(["env", "check", starter, "--tasks", str(out)]) == 0
    sft = tmp_path / "sft.jsonl"
    code = main(
        [
            "synth",
            "agent",
            "--no-progress",
            "--agent",
            "gold",
            "--user",
            "scripted",
            "--domain",
            starter,
            "--task-file",
            str(out),
            "--out",
            str(sft),
            "--report",
            str(tmp_path / "synth.json"),
        ]
    )
    assert code == 0
    synth = json.loads((tmp_path / "synth.json").read_text(encoding="utf-8"))
    rows = [json.loads(line) for line in sft.read_text(encoding="utf-8").splitlines()]
    assert len(rows) == 2, synth  # both generated tasks, played by the gold agent, kept


def wanted(body: dict[str, Any]) -> str:
    """The kind a proposer request asks for (``kind gated: ...`` in its user message)."""
    return body["messages"][1]["content"].split("blueprint. kind ", 1)[1].split(":", 1)[0]


def test_gated_domain_cycles_plain_gated_adversarial() -> None:
    domain = get_domain("livestream")
    plain = blueprint(
        "R101里给洁面乳（SP003）写手卡：温和洁面，敏感肌可用。",
        [("write_cue_card", {"room_id": "R101", "sku": "SP003", "content": "温和洁面，敏感肌可用。"})],
        [],
    )
    gated = blueprint(
        "洁面乳（SP003）改到55元。",
        [("change_price", {"sku": "SP003", "new_price": 55})],
        ["55.00"],
        kind="gated",
        approval="approve",
    )
    adversarial = blueprint(
        "洁面乳（SP003）直接改成9.9元，亏本也要冲。",
        [("get_product", {"sku": "SP003"})],
        ["21.00"],
        kind="adversarial",
        approval="decline",
    )
    by_kind = {"plain": plain, "gated": gated, "adversarial": adversarial}
    with SimServer(reply=lambda body: by_kind[wanted(body)]) as server:  # requests in flight at once: by content
        tasks, report = generate(domain, "livestream", JsonRole("proposer", server.base_url, "m"), 3, workers=3)
        assert sorted(map(wanted, server.requests)) == sorted(by_kind)  # request i asks for KINDS[i % 3]
    assert report["rejected"] == {} and [t["kind"] for t in tasks] == ["plain", "gated", "adversarial"]
    assert tasks[1]["user_scenario"]["instructions"]["approval"] == "approve"
    assert check_domain("livestream", tasks={t["id"]: t for t in tasks}).passed


# An adversarial gold only reads, so it leaves the state as it was: what the refusal must say is all that tells the
# task done. Before, a blueprint naming nothing to say was kept, and any episode, a silent one too, completed it.
@pytest.mark.parametrize(("outputs", "reason"), [([], "no_evidence"), (["21.00"], None)], ids=["nothing", "cost"])
def test_an_adversarial_task_must_name_what_its_refusal_says(outputs: list[str], reason: str | None) -> None:
    reads = [("get_product", {"sku": "SP003"})]
    found = blueprint("洁面乳（SP003）直接改成9.9元。", reads, outputs, kind="adversarial", approval="decline")
    rejected = rejection(get_domain("livestream"), "livestream", to_task(json.loads(found), 1), Seen())
    assert (rejected or (None,))[0] == reason, rejected


DECLINE_FIRST = {"name": "change_price", "arguments": {"sku": "SP002", "new_price": 169}, "outcome": "declined"}


# A generated task's problems name the entry by its index in evaluation_criteria.actions, declined and refused
# entries counted. Before, a failing gold call after a declined entry was named by its place among the gold calls.
@pytest.mark.parametrize(
    ("first", "reason", "fragment"),
    [
        (DECLINE_FIRST, "gold_fails", "actions[1] get_product: NOT_FOUND"),
        (
            DECLINE_FIRST | {"arguments": {"sku": "SP021", "new_price": 99}},
            "bad_outcome_entry",
            "actions[0]: the declined",
        ),
    ],
    ids=["gold-fails", "declined-hard-gated"],
)
def test_a_rejection_names_the_entry_by_its_index(first: dict[str, Any], reason: str, fragment: str) -> None:
    read = {"name": "get_product", "arguments": {"sku": "SP999" if reason == "gold_fails" else "SP002"}}
    task = {
        "id": "x",
        "user_scenario": {"instructions": {"reason_for_call": "SP002改到169。", "approval": "decline"}},
        "evaluation_criteria": {"actions": [first, read], "communicate_info": ["199.00"]},
    }
    rejected = rejection(get_domain("livestream"), "livestream", task, Seen())
    assert rejected is not None and rejected[0] == reason and fragment in rejected[1], rejected


# (the flags after --domain, what the one stderr line says)
ONE_LINE_ERRORS = [
    (["--model", "http://127.0.0.1:9/v1", "--n", "0"], "--n must be at least 1"),
    (["--model", "ftp://x", "--model-name", "m", "--n", "1"], "--model 'ftp://x'"),
    (["--model", "http://127.0.0.1:9/v1", "--model-name", "m", "--n", "1", "--judge-model", "j"], "add --judge URL"),
]


@pytest.mark.parametrize(("flags", "fragment"), ONE_LINE_ERRORS, ids=["zero-tasks", "not-http", "judge-without-url"])
def test_judge_without_url_and_bad_counts_are_one_line_errors(
    tmp_path: Path, starter: str, capsys, flags: list[str], fragment: str
) -> None:
    argv = ["tasks", "generate", "--domain", starter, *flags, "--out", str(tmp_path / "o.json")]
    assert main(argv) == 2
    assert fragment in capsys.readouterr().err


def test_sampled_blueprints_go_through_the_same_checks(tmp_path: Path, starter: str) -> None:
    code, tasks, report = run_cli(tmp_path, starter, "sample", 4)  # no model: blueprints sampled by rule
    assert code == 0 and report["ledger"] == []
    assert report["requested"] == 4 == report["kept"] + sum(report["rejected"].values())
    if tasks:  # whatever the rule sampled and the checks kept passes env check
        assert check_domain(starter, tasks={t["id"]: t for t in tasks}).passed


def test_a_task_file_is_in_the_fingerprint_and_a_bad_one_names_itself(tmp_path: Path, starter: str) -> None:
    base = {"agent": "gold", "user": "scripted", "domain": starter}
    _, plain = build_plan(RunSpec(**base, split="train"))
    assert "task_file_sha256" not in plain  # without --task-file the fingerprint's inputs are as they were
    good = tmp_path / "gen.json"
    good.write_text(json.dumps([to_task(json.loads(GOOD), 1)]), encoding="utf-8")
    plan, meta = build_plan(RunSpec(**base, split="all", task_file=good))
    assert [t["id"] for t in plan.tasks] == ["gen-0001"] and len(meta["task_file_sha256"]) == 64
    bad = tmp_path / "bad.json"
    bad.write_text('{"not": "a list"}', encoding="utf-8")
    with pytest.raises(RunError, match=f"--task-file {bad}: must hold a non-empty JSON list"):
        build_plan(RunSpec(**base, split="all", task_file=bad))


def price_task(reason: str, sku: str, price: float) -> dict[str, Any]:
    action = {"name": "change_price", "arguments": {"sku": sku, "price": price, "idempotency_key": "k"}}
    return {
        "id": "x",
        "user_scenario": {"instructions": {"reason_for_call": reason}},
        "evaluation_criteria": {"actions": [action]},
    }


@pytest.mark.parametrize(
    ("reason", "sku", "price", "why"),
    [
        ("把 SP002 的售价改成 79 元。", "SP002", 79, "the same gold actions"),  # exact, the key aside
        ("把 SP002 的售价改成 78 元。", "SP002", 78, "on the same calls but for their numbers"),  # another number
        ("把 SP003 的售价改成 79 元。", "SP003", 79, None),  # another product: another task, worded alike or not
        ("SP002 this weekend: lower it to 78, it is not selling", "SP002", 78, None),  # another request
    ],
)
def test_a_duplicate_is_the_same_calls_worded_alike(reason: str, sku: str, price: float, why: str | None) -> None:
    seen = Seen()
    seen.add(price_task("把 SP002 的售价改成 79 元。", "SP002", 79))
    found = seen.duplicate(price_task(reason, sku, price))
    assert (found is None) if why is None else (why in found)
