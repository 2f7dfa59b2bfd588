"""The episode viewer in a real browser: headless Chromium (Debian's ``chromium``), driven by Playwright.

The page opens from disk with no console error, its counts are the summary's, the filters filter, a transcript
opens, and verdicts saved from it round-trip into ``synth agent --verdicts``; hostile text in any field of an episode
neither hides an episode nor runs a script. Under CI a missing browser fails the run; elsewhere these tests skip,
saying how to install it.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rewardkit.cli import main
from rewardkit.runs.viewer.page import episode_digest

FLAGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
INSTALL = "install Debian's chromium (apt-get install -y chromium) and playwright (pip install playwright)"


@pytest.fixture(scope="module")
def profiles() -> Iterator[Callable[[], Any]]:
    """Each call a fresh browser profile (its own storage) of headless Chromium."""
    chromium = shutil.which("chromium")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        sync_playwright = None
    if chromium is None or sync_playwright is None:
        if os.environ.get("CI"):
            pytest.fail(f"CI runs the browser tests: {INSTALL}")
        pytest.skip(f"no browser here: {INSTALL}")
    with sync_playwright() as p:
        opened: list[Any] = []

        def launch() -> Any:
            opened.append(
                p.chromium.launch_persistent_context(
                    tempfile.mkdtemp(prefix="rk-chromium-"),
                    executable_path=chromium,
                    headless=True,
                    args=FLAGS,
                    accept_downloads=True,
                    viewport={"width": 1300, "height": 850},
                )
            )
            return opened[-1]

        yield launch
        for context in opened:
            context.close()


@pytest.fixture(scope="module")
def browser(profiles: Callable[[], Any]) -> Any:
    return profiles()


def open_page(browser: Any, page_path: Path) -> tuple[Any, list[str]]:
    page, errors = browser.new_page(), []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(page_path.as_uri())
    return page, errors


def test_counts_filters_and_a_transcript(browser: Any, tmp_path: Path) -> None:
    out = tmp_path / "eval"  # the gold agent cut at six turns: on these four tasks some episodes pass, some fail
    assert (
        main(
            [
                "eval",
                "agent",
                "--agent",
                "gold",
                "--split",
                "test",
                "--limit",
                "4",
                "--trials",
                "2",
                "--max-turns",
                "6",
                "--out-dir",
                str(out),
                "--no-progress",
            ]
        )
        == 0
    )
    assert main(["view", str(out)]) == 0
    records = [json.loads(line) for line in (out / "episodes.jsonl").read_text().splitlines()]
    episodes = [r for r in records if "task_id" in r]
    passed = sum(r["reward"] == 1.0 for r in episodes)
    assert 0 < passed < len(episodes) == 8
    page, errors = open_page(browser, out / "view.html")
    assert page.text_content("#c-episodes") == "8 episodes" and page.text_content("#c-passed") == f"{passed} passed"
    assert page.locator("tr.episode").count() == 8
    page.select_option("#f-outcome", "pass")
    assert page.locator("tr.episode").count() == passed
    page.select_option("#f-outcome", "fail")
    assert page.locator("tr.episode").count() == 8 - passed
    page.select_option("#f-outcome", "")
    task = episodes[0]["task_id"]
    page.click(f'#tasks tr[data-task="{task}"]')  # a task's row filters to its trials
    assert page.locator("tr.episode").count() == 2
    termination = episodes[0]["termination"]
    page.select_option("#f-task", "")
    page.select_option("#f-termination", termination)
    assert page.locator("tr.episode").count() == sum(r["termination"] == termination for r in episodes)
    page.select_option("#f-termination", "")
    first = episodes[0]
    page.click(f'tr.episode[data-id="{first["task_id"]}/{first["trial"]}"]')
    shown = page.locator("#transcript .turn")
    assert shown.count() == len(first["messages"]) and page.locator("#diff").count() == 1
    calls = sum(len(m.get("tool_calls") or []) or m.get("content", "").count("<tool_call>") for m in first["messages"])
    assert page.locator("#transcript .call").count() == calls
    assert errors == []


def test_verdicts_round_trip_into_synth(browser: Any, tmp_path: Path) -> None:
    out, episodes = tmp_path / "sft.jsonl", tmp_path / "sft.episodes.jsonl"
    synth = [
        "synth",
        "agent",
        "--agent",
        "gold",
        "--split",
        "train",
        "--limit",
        "3",
        "--out",
        str(out),
        "--episodes",
        str(episodes),
        "--no-progress",
    ]
    assert main(synth) == 0
    assert len(out.read_text().splitlines()) == 3  # every gold trajectory passes the rules
    assert main(["view", str(episodes), "--domain", "retail", "--review", "--out", str(tmp_path / "review.html")]) == 0
    page, errors = open_page(browser, tmp_path / "review.html")
    ids = page.eval_on_selector_all("tr.episode", "rows => rows.map(r => r.dataset.id)")
    for episode, verdict in zip(ids, ("accept", "reject"), strict=False):  # the third stays unreviewed
        page.click(f'tr.episode[data-id="{episode}"]')
        page.click(f'button[data-verdict="{verdict}"]')
    assert page.text_content("#reviewed") == "2 of 3 reviewed"
    with page.expect_download() as download:
        page.click("#save")
    verdicts = tmp_path / "verdicts.json"
    download.value.save_as(verdicts)
    digests = {f"{r['task_id']}/{r['trial']}": episode_digest(r) for r in map(json.loads, episodes.open())}
    assert json.loads(verdicts.read_text())["verdicts"] == {
        ids[0]: {"verdict": "accept", "digest": digests[ids[0]]},
        ids[1]: {"verdict": "reject", "digest": digests[ids[1]]},
    }
    report = tmp_path / "report.json"
    assert main([*synth, "--resume", "--verdicts", str(verdicts), "--report", str(report)]) == 0
    counts = json.loads(report.read_text())
    assert (counts["kept"], counts["rejected"]) == (1, {"reviewer_rejected": 1, "unreviewed": 1})
    assert len(out.read_text().splitlines()) == 1 and errors == []


def test_a_grpo_runs_completions(browser: Any, tmp_path: Path) -> None:
    from test_audit import STEP, write_run

    # STEP's totals at weights (1, 0.5), full 1.5: groups [1.5, 0.5], [1.5, 1.5], [0, 0]: 3 of 6 completions pass.
    folder = write_run(tmp_path / "run", ["1", "0.5"], [STEP])
    assert main(["view", str(folder)]) == 0
    page, errors = open_page(browser, folder / "view.html")
    assert page.text_content("#c-episodes") == "6 episodes" and page.text_content("#c-passed") == "3 passed"
    page.select_option("#f-outcome", "pass")
    assert page.eval_on_selector_all("tr.episode", "rows => rows.map(r => r.dataset.id)") == ["1.0/0", "1.1/0", "1.1/1"]
    page.select_option("#f-outcome", "fail")
    page.click('tr.episode[data-id="1.0/1"]')  # total 0.5: JsonValid 0, ExpertMatch 1
    assert '{"JsonValid": 0.0, "ExpertMatch": 1.0}' in page.text_content(
        "#episode"
    )  # each reward's, in order and page.locator("#transcript .turn").count() == 2
    assert errors == []


# Text that would end the data's script, comment out the page's own, or run one of its own if it ever reached markup.
PAYLOADS = [
    "<!--<script>",
    "</script><script>window.pwned=1</script>",
    "<img src=x onerror=window.pwned=1>",
    "]]>",
    "a\u2028b\u2029c",
    "<!--",
    "<script>window.pwned=1</script>",
    "</SCRIPT ><svg onload=window.pwned=1>",
]
LONE_SURROGATE = '"lone \\ud800 surrogate"'  # as the log holds it: a JSON escape Python decodes, UTF-8 cannot encode
USER = "yusuf_rossi_9620"  # retail task 0's user: the address written below is in the database diff


def hostile_episode(text: str, trial: int) -> dict[str, Any]:
    """An episode of retail task 0 whose every field carries ``text``: the system prompt, the user's and the
    agent's messages, a tool call's arguments (a write, so the diff shows them), the tool's result, its gates."""
    address = {
        "user_id": USER,
        "address1": text,
        "address2": text,
        "city": text,
        "state": "CA",
        "country": "US",
        "zip": "19122",
    }
    call = {
        "id": "c1",
        "type": "function",
        "function": {"name": "modify_user_address", "arguments": json.dumps(address, ensure_ascii=False)},
    }
    messages = [
        {"role": "system", "content": text},
        {"role": "user", "content": text},
        {"role": "assistant", "content": text, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "c1", "content": text},
        {"role": "assistant", "content": text},
    ]
    return {
        "run": text,
        "task_id": "0",
        "trial": trial,
        "status": "ok",
        "reward": 0.0,
        "termination": text,
        "turns": 2,
        "gates": {text: 1},
        "state_hash": text,
        "messages": messages,
    }


def test_hostile_text_in_any_field_hides_nothing_and_runs_nothing(browser: Any, tmp_path: Path) -> None:
    records = [hostile_episode(text, trial) for trial, text in enumerate(PAYLOADS)]
    records += [{**r, "task_id": text, "trial": 0} for r, text in zip(records, PAYLOADS, strict=True)]  # the ids
    lines = [json.dumps(r, ensure_ascii=False) for r in records]
    lines.append(lines[0].replace(json.dumps(PAYLOADS[0]), LONE_SURROGATE).replace('"trial": 0', '"trial": 99'))
    log = tmp_path / "episodes.log"
    log.write_text("\n".join(lines) + "\n", encoding="utf-8")
    page_path = tmp_path / "hostile.html"
    assert (
        main(["view", str(log), "--domain", "retail", "--review", "--title", PAYLOADS[1], "--out", str(page_path)]) == 0
    )
    page, errors = browser.new_page(), []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    # Before the page's own script: every policy violation is recorded, the page's script blocked or another run.
    page.add_init_script(
        "window.violations = []; document.addEventListener('securitypolicyviolation', "
        "(e) => window.violations.push(e.violatedDirective + ' ' + e.blockedURI));"
    )
    page.goto(page_path.as_uri())
    rows = page.locator("tr.episode")
    assert rows.count() == len(lines) == 17 and page.text_content("#c-episodes") == "17 episodes"
    assert page.locator("#tasks tbody tr").count() == 1 + len(PAYLOADS)
    assert page.title() == PAYLOADS[1] and page.text_content("h1") == PAYLOADS[1]
    for i in range(rows.count()):  # the transcript and the diff are drawn when an episode opens
        rows.nth(i).click()
        assert page.locator("#transcript .turn").count() == 5
    rows.nth(0).click()
    assert page.locator("#transcript .call").count() == 1 and page.text_content("#transcript .turn.system")
    diff = page.text_content("#diff")
    assert PAYLOADS[0] in diff and USER in diff  # the agent's address, as text
    page.click('button[data-verdict="accept"]')  # the review works under the policy too
    assert page.text_content("#reviewed") == f"1 of {len(lines)} reviewed"
    assert page.evaluate("typeof window.pwned") == "undefined"
    assert page.evaluate("window.violations") == [] and errors == []


def gold_eval(out: Path, domain: str, max_turns: int) -> list[dict[str, Any]]:
    """``eval agent --agent gold`` cut at ``max_turns`` on four held-out tasks, two trials each, and its page."""
    argv = ["eval", "agent", "--agent", "gold", "--domain", domain, "--split", "test", "--limit", "4"]
    argv += ["--trials", "2", "--max-turns", str(max_turns), "--out-dir", str(out), "--no-progress"]
    assert main(argv) == 0 and main(["view", str(out)]) == 0
    records = [json.loads(line) for line in (out / "episodes.jsonl").read_text().splitlines()]
    return [r for r in records if "task_id" in r]


@pytest.mark.parametrize(("domain", "lang"), [("retail", "en"), ("livestream", "zh")])
def test_every_episode_that_scored_0_says_why_in_one_line_at_its_top(
    browser: Any, tmp_path: Path, domain: str, lang: str
) -> None:
    episodes = gold_eval(tmp_path / "eval", domain, max_turns=4)  # cut short: some episodes score 0
    zero = [r for r in episodes if r["reward"] == 0.0]
    assert zero, [r["termination"] for r in episodes]
    page, errors = open_page(browser, tmp_path / "eval" / "view.html")
    assert page.get_attribute("html", "lang") == lang  # the domain's language: the browser picks its fonts by it
    for record in zero:
        page.click(f'tr.episode[data-id="{record["task_id"]}/{record["trial"]}"]')
        why = page.text_content("#why") or ""
        assert why.startswith(("not complete: ", "no credit: ")) and "\n" not in why, why
        # at the top: before the checks, the diff and the transcript
        order = page.evaluate(
            "['#why', '#checks', '#diff', '#transcript'].map((s) => document.querySelector(s))"
            ".every((e, i, all) => i === 0 || all[i - 1].compareDocumentPosition(e) & Node.DOCUMENT_POSITION_FOLLOWING)"
        )
        assert order
    assert errors == []


def test_a_chinese_episode_renders_its_glyphs_not_boxes(browser: Any, tmp_path: Path) -> None:
    # Two different Chinese words drawn in the page's own font: with no CJK font installed both come out as the same
    # row of missing-glyph boxes, so their screenshots are identical.
    gold_eval(tmp_path / "eval", "livestream", max_turns=4)
    page, errors = open_page(browser, tmp_path / "eval" / "view.html")
    page.click("tr.episode")
    shots = []
    for word in ("直播间标题", "商品库存表"):
        page.evaluate("(w) => { document.querySelector('#episode h2').textContent = w; }", word)
        shots.append(page.locator("#episode h2").screenshot())
    assert shots[0] != shots[1]
    (tmp_path / "episode.png").write_bytes(page.screenshot(full_page=False))  # kept with the test's files
    assert errors == []


def replicated(records: list[dict[str, Any]], n: int, path: Path, run: str) -> list[dict[str, Any]]:
    """``records`` repeated to ``n`` episodes with fresh trial numbers, as one run ``run``: a log of any size."""
    out = [dict(records[i % len(records)], trial=i, run=run) for i in range(n)]
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in out), encoding="utf-8")
    return out


def rows(page: Any) -> list[str]:
    return page.eval_on_selector_all("tr.episode", "rows => rows.map(r => r.dataset.id)")


def test_a_reviewer_reviews_100_episodes_by_keyboard_and_a_reload_loses_nothing(
    browser: Any, profiles: Callable[[], Any], tmp_path: Path
) -> None:
    log = tmp_path / "episodes.log"
    episodes = replicated(gold_eval(tmp_path / "eval", "retail", max_turns=4), 120, log, run="review-100")
    assert main(["view", str(log), "--domain", "retail", "--review", "--out", str(tmp_path / "review.html")]) == 0
    page, errors = open_page(browser, tmp_path / "review.html")
    ids = [f"{r['task_id']}/{r['trial']}" for r in episodes]
    page.keyboard.press("j")  # the first episode opens
    assert page.get_attribute("#episode", "data-id") == ids[0]
    expected = {}
    for i in range(100):  # a verdict, then on to the next unreviewed: every third rejected
        verdict = "reject" if i % 3 == 0 else "accept"
        page.keyboard.press(verdict[0])
        expected[ids[i]] = verdict
    assert page.text_content("#reviewed") == "100 of 120 reviewed"
    assert page.get_attribute("#episode", "data-id") == ids[100]  # the first one not yet judged
    assert page.text_content("#page") == "101–120 of 120"  # the list followed onto its second page
    page.keyboard.press("k")  # back to episode 99, on page 1 with episodes 0-99: each marked with its verdict
    marks = page.eval_on_selector_all("tr.episode", "rows => rows.map(r => r.dataset.verdict || '')")
    assert marks == [expected[i] for i in ids[:100]]

    page.reload()  # nothing lost: the verdicts are in the browser, the list marked, the filter counts the rest
    assert page.text_content("#reviewed") == "100 of 120 reviewed"
    page.select_option("#f-verdict", "unreviewed")
    assert rows(page) == ids[100:] and page.text_content("#c-episodes") == "20 of 120 episodes"
    page.focus("body")
    page.keyboard.press("n")  # next unreviewed, from nothing open: the first of them
    assert page.get_attribute("#episode", "data-id") == ids[100]
    with page.expect_download() as download:
        page.click("#save")
    saved = tmp_path / "verdicts.json"
    download.value.save_as(saved)
    assert {i: v["verdict"] for i, v in json.loads(saved.read_text())["verdicts"].items()} == expected

    # Another browser (nothing stored): the saved file loads back; one from another run is refused, saying so.
    other, more_errors = open_page(profiles(), tmp_path / "review.html")
    assert other.text_content("#reviewed") == "0 of 120 reviewed"
    wrong = tmp_path / "other-run.json"
    wrong.write_text(json.dumps({"run": "another", "verdicts": {ids[0]: "accept"}}))
    other.set_input_files("#load", str(wrong))
    other.wait_for_function("() => document.getElementById('review-msg').textContent.includes('judged run')")
    other.set_input_files("#load", str(saved))
    other.wait_for_function("() => document.getElementById('reviewed').textContent === '100 of 120 reviewed'")
    assert other.eval_on_selector_all("tr.episode[data-verdict=reject]", "rows => rows.length") == 34  # 0, 3, .., 99
    assert errors == [] and more_errors == []


RESAVE = "open the review page it was judged on and save again"
SHOWN = "(want) => document.getElementById('shown').textContent === want"  # a function: the page's policy forbids eval


def said_or_called(record: dict[str, Any]) -> str:
    """What the page's search reads of an episode, lower-cased: its id, why line and ending, every message but the
    system prompt (an assistant's with its call blocks parsed out) and every call."""
    from rewardkit.envs.tool_calls import tool_calls

    parts = []
    for m in record["messages"][1:]:
        parts.append(m.get("content") or "")
        parts += [c.name + json.dumps(c.arguments) for c in tool_calls([m])]
    return "\n".join(parts).lower()


def test_finding_an_episode_search_sort_pages_counts_and_links(browser: Any, tmp_path: Path) -> None:
    log = tmp_path / "episodes.log"
    episodes = replicated(gold_eval(tmp_path / "eval", "retail", max_turns=6), 250, log, run="find")
    assert main(["view", str(log), "--domain", "retail", "--out", str(tmp_path / "view.html")]) == 0
    page, errors = open_page(browser, tmp_path / "view.html")
    ids = [f"{r['task_id']}/{r['trial']}" for r in episodes]
    # 250 episodes, 100 rows a page: three pages; the keyboard walks from the last row of one onto the next.
    assert page.text_content("#page") == "1–100 of 250" and rows(page) == ids[:100]
    page.click("#next")
    assert page.text_content("#page") == "101–200 of 250" and rows(page) == ids[100:200]
    page.click("#prev")
    page.focus("body")
    for _ in range(101):
        page.keyboard.press("j")
    assert page.get_attribute("#episode", "data-id") == ids[100] and page.text_content("#page") == "101–200 of 250"

    # The counts follow the filters: the outcome's, then a task's on top of it.
    failed = [r for r in episodes if r["reward"] != 1.0]
    assert 0 < len(failed) < 250
    page.select_option("#f-outcome", "fail")
    assert page.text_content("#c-episodes") == f"{len(failed)} of 250 episodes"
    assert page.text_content("#c-passed") == "0 passed"
    task = failed[0]["task_id"]
    page.focus(f'#tasks tr[data-task="{task}"]')  # a task's row takes focus; Enter filters to its trials
    page.keyboard.press("Enter")
    assert page.input_value("#f-task") == task
    assert page.text_content("#c-episodes") == f"{sum(r['task_id'] == task for r in failed)} of 250 episodes"
    passes = page.eval_on_selector(
        f'#tasks tr[data-task="{task}"]', "r => r.cells[1].textContent + '/' + r.cells[2].textContent"
    )
    assert passes == f"0/{sum(r['task_id'] == task for r in failed)}"  # the task table follows the outcome filter
    page.select_option("#f-task", "")
    page.select_option("#f-outcome", "")

    # Search: what was said or called, case-insensitive, not the system prompt every episode shares.
    word = "Kovacs"
    found = [i for i, r in zip(ids, episodes, strict=True) if word.lower() in said_or_called(r)]
    assert 0 < len(found) < 250
    page.fill("#q", word)
    page.wait_for_function(SHOWN, arg=f"({len(found)})")
    assert rows(page) == found[:100] and page.text_content("#c-episodes") == f"{len(found)} of 250 episodes"
    page.fill("#q", "policy")  # a word of the system prompt alone: no episode
    page.wait_for_function(SHOWN, arg="(0)")
    page.fill("#q", "")

    # Sort: the lowest reward first, then the most turns first.
    page.select_option("#sort", "reward")
    shown = page.eval_on_selector_all("tr.episode td:nth-child(3)", "cells => cells.map(c => Number(c.textContent))")
    assert shown == sorted(shown) and shown[0] == 0.0
    page.select_option("#sort", "-turns")
    turns = page.eval_on_selector_all("tr.episode td:nth-child(5)", "cells => cells.map(c => Number(c.textContent))")
    assert turns == sorted(turns, reverse=True)

    # A link to one episode, with the filters it was found under, opens it in a new tab.
    page.select_option("#sort", "")
    page.select_option("#f-outcome", "fail")
    target = failed[7]
    target_id = f"{target['task_id']}/{target['trial']}"
    page.keyboard.press("Escape")
    page.focus("body")
    page.evaluate("(id) => open(id)", target_id)
    link = page.url
    assert "f-outcome=fail" in link and "episode=" in link
    again, more_errors = open_page(browser, tmp_path / "view.html")
    again.goto(link)
    assert again.get_attribute("#episode", "data-id") == target_id
    assert again.input_value("#f-outcome") == "fail" and again.text_content("#c-passed") == "0 passed"
    assert errors == [] and more_errors == []


def test_reading_an_episode_errors_gates_calls_and_the_system_prompt(browser: Any, tmp_path: Path) -> None:
    from rewardkit.envs import get_domain
    from rewardkit.envs.outcomes import replay

    # Retail: an order that does not exist, looked up. The refusal is the harness's own (NOT_FOUND).
    lookup = {"name": "get_order_details", "arguments": {"order_id": "#W0000000"}}
    refusal = replay("retail", [lookup]).calls[0]
    assert refusal.error and refusal.error.startswith("NOT_FOUND")
    with get_domain("retail").env_for(None) as env:
        answer = env.replay([lookup])[0].text()
    policy = get_domain("retail").policy()
    messages = [
        {"role": "system", "content": policy},
        {"role": "user", "content": "Where is order #W0000000?"},
        {"role": "assistant", "content": f"Let me look.\n<tool_call>\n{json.dumps(lookup)}\n</tool_call>"},
        {"role": "tool", "content": answer},
        {"role": "assistant", "content": "I cannot find that order."},
    ]
    record = {"task_id": "0", "trial": 0, "status": "ok", "reward": 0.0, "termination": "user_stop", "turns": 2}
    log = tmp_path / "lookup.log"
    log.write_text(json.dumps({**record, "messages": messages}) + "\n", encoding="utf-8")
    assert main(["view", str(log), "--domain", "retail", "--out", str(tmp_path / "lookup.html")]) == 0
    page, errors = open_page(browser, tmp_path / "lookup.html")
    page.keyboard.press("j")
    turns = page.locator("#transcript .turn")
    assert turns.count() == 5
    # The error is marked on the tool's message, where it happened, and nowhere else.
    assert page.eval_on_selector_all("#transcript .turn", "ts => ts.map(t => t.classList.contains('error'))") == [
        False,
        False,
        False,
        True,
        False,
    ]
    assert turns.nth(3).locator(".badge").text_content() == "NOT_FOUND"
    # The call once: parsed and formatted, its raw block gone from the message's text.
    assert page.locator("#transcript .call").count() == 1 and "<tool_call>" not in page.text_content("#transcript")
    assert json.loads(page.locator("#transcript .call pre").text_content()) == lookup["arguments"]
    # The system prompt: its first line folded, the whole of it on demand.
    system = page.locator("#transcript .turn.system")
    assert not system.locator(".text").is_visible()
    system.locator("summary").click()
    assert system.locator(".text").is_visible() and system.locator(".text").text_content() == policy

    # The live-stream console: its system prompt names the gates, but only the messages where one acted are marked.
    episodes = gold_eval(tmp_path / "eval", "livestream", max_turns=8)
    page, more_errors = open_page(browser, tmp_path / "eval" / "view.html")
    gated = [r for r in episodes if r["gates"]["requested"]]
    assert gated
    for r in gated:
        page.click(f'tr.episode[data-id="{r["task_id"]}/{r["trial"]}"]')
        marked = page.eval_on_selector_all(
            "#transcript .turn",
            "ts => ts.map(t => t.classList.contains('gate') ? t.querySelector('.badge').textContent : '')",
        )
        held = [
            "APPROVAL_REQUIRED" if m["role"] == "tool" and '"APPROVAL_REQUIRED"' in m["content"] else ""
            for m in r["messages"]
        ]
        decided = [
            "approve_request"
            if "###APPROVE###" in m["content"]
            else "decline_request"
            if "###DECLINE###" in m["content"]
            else ""
            for m in r["messages"]
        ]
        closing = [""] if r["closing"] is not None else []  # the user's last line, after what the agent saw
        assert (
            marked
            == [h or (d if m["role"] == "user" else "") for h, d, m in zip(held, decided, r["messages"], strict=True)]
            + closing
        )
        assert marked[0] == "" and sum(map(bool, marked)) >= 2  # the request held, and the user's answer to it
    assert errors == [] and more_errors == []


def test_a_value_the_agent_never_wrote_reads_missing_not_null(browser: Any, tmp_path: Path) -> None:
    episodes = gold_eval(tmp_path / "eval", "retail", max_turns=4)
    unwritten = [r for r in episodes if any("agent" not in d for d in r["diff"] or [])]
    assert unwritten  # cut short: the gold's exchange fields exist only on its side
    record = unwritten[0]
    page, errors = open_page(browser, tmp_path / "eval" / "view.html")
    page.click(f'tr.episode[data-id="{record["task_id"]}/{record["trial"]}"]')
    cells = page.eval_on_selector_all("#diff tr td:nth-child(4)", "cells => cells.map(c => c.textContent)")
    assert cells == ["missing" if "agent" not in d else json.dumps(d["agent"]) for d in record["diff"]]
    assert page.locator("#diff .missing").count() == sum("agent" not in d for d in record["diff"])
    assert errors == []


def test_verdicts_stay_with_their_episodes_and_two_tabs_keep_both(browser: Any, tmp_path: Path) -> None:
    episodes = gold_eval(tmp_path / "eval", "retail", max_turns=4)
    ids = [f"{r['task_id']}/{r['trial']}" for r in episodes]
    first, second = tmp_path / "first.html", tmp_path / "second.html"
    replicated(episodes, len(episodes), tmp_path / "first.log", run="shared-settings")
    assert main(["view", str(tmp_path / "first.log"), "--domain", "retail", "--review", "--out", str(first)]) == 0
    # Two tabs of one page, each judging its own episode: neither overwrites the other.
    left, errors = open_page(browser, first)
    right, more_errors = open_page(browser, first)
    left.keyboard.press("j")
    left.keyboard.press("a")
    right.keyboard.press("k")  # the last episode
    right.keyboard.press("r")
    right.wait_for_function("() => document.getElementById('reviewed').textContent.startsWith('2 of')")
    left.reload()
    assert left.text_content("#reviewed") == f"2 of {len(ids)} reviewed"
    assert left.eval_on_selector_all("tr.episode[data-verdict]", "rows => rows.map(r => r.dataset.verdict)") == [
        "accept",
        "reject",
    ]
    # Another log of the same run settings reuses the ids for other episodes: nothing judged there carries over.
    other = [{**r, "messages": r["messages"][:2]} for r in episodes]
    other = replicated(other, len(other), tmp_path / "second.log", run="shared-settings")
    assert main(["view", str(tmp_path / "second.log"), "--domain", "retail", "--review", "--out", str(second)]) == 0
    fresh, fresh_errors = open_page(browser, second)
    assert fresh.text_content("#reviewed") == f"0 of {len(ids)} reviewed"

    # Nor through a file: each saved verdict names its episode's digest, and Load applies it only there.
    with left.expect_download() as download:
        left.click("#save")
    saved = tmp_path / "first-verdicts.json"
    download.value.save_as(saved)
    said = "(name) => document.getElementById('review-msg').textContent.startsWith(name)"  # Load has answered
    one = f"{other[1]['task_id']}/{other[1]['trial']}"
    mine = {one: {"verdict": "accept", "digest": episode_digest(other[1])}}  # given on this log's own episode
    cases = [  # (the file, what Load says, verdicts then held)
        (saved, "loaded 0 verdicts; skipped 2 given on another episode with the same id", 0),
        (
            {ids[0]: "accept"},
            f"verdicts.{ids[0]} names no episode digest (an older viewer saved it); nothing loaded: {RESAVE}",
            0,
        ),  # a file saved before digests
        ({**mine, "nowhere/0": mine[one]}, "loaded 1 verdict; skipped 1 on an episode this log does not hold", 1),
    ]
    for i, (found, message, held) in enumerate(cases):
        path = found if isinstance(found, Path) else tmp_path / f"load-{i}.json"
        if not isinstance(found, Path):
            path.write_text(json.dumps({"run": "shared-settings", "verdicts": found}), encoding="utf-8")
        fresh.set_input_files("#load", str(path))
        fresh.wait_for_function(said, arg=f"{path.name}: ", polling=50)  # a timer: a tab behind draws no frames
        assert fresh.text_content("#review-msg") == f"{path.name}: {message}"
        assert fresh.text_content("#reviewed") == f"{held} of {len(ids)} reviewed"
    assert errors == more_errors == fresh_errors == []


# A product's variants keyed by item id, as the tool answered them. JavaScript puts the keys of an object that are
# array indices (integers below 2^32 - 1) first, in ascending order; it reads a number past 2^53 to its nearest double
# (12345678901234567891 -> 12345678901234567000) and writes 49.90 back as 49.9. The page shows the text as it came.
RESULT = (
    '{"product_id":"8310926033","name":"T\\u6064 shirt","note":"a, {b}: \\"c\\" [d]","variants":{"4153505238":'
    '{"price":49.90,"stock":12345678901234567891},"1008292230":{"price":51.00,"options":{}}},"tags":[]}'
)
RESULT_SHOWN = """{
  "product_id": "8310926033",
  "name": "T\\u6064 shirt",
  "note": "a, {b}: \\"c\\" [d]",
  "variants": {
    "4153505238": {
      "price": 49.90,
      "stock": 12345678901234567891
    },
    "1008292230": {
      "price": 51.00,
      "options": {}
    }
  },
  "tags": []
}"""
ARGUMENTS = {"order_id": "#W0000000", "4153505238": 2, "1008292230": 1}


def test_what_the_agent_saw_is_shown_in_its_order_and_spelling(browser: Any, tmp_path: Path) -> None:
    call = {"id": "c1", "type": "function", "function": {"name": "set_quantities", "arguments": json.dumps(ARGUMENTS)}}
    stock = {"4153505238": 12345678901234567891, "1008292230": 0}
    record = {
        **{"task_id": "0", "trial": 0, "status": "ok", "reward": 0.0, "termination": "user_stop", "turns": 1},
        "checks": [],
        "diff": [{"table": "products", "row": "8310926033", "field": "variants", "agent": stock, "gold": 2**64}],
        "messages": [
            {"role": "user", "content": "Two of one, one of the other."},
            {"role": "assistant", "content": "", "tool_calls": [call]},
            {"role": "tool", "tool_call_id": "c1", "content": RESULT},
        ],
    }
    log = tmp_path / "order.log"
    log.write_text(json.dumps(record) + "\n", encoding="utf-8")
    assert main(["view", str(log), "--domain", "retail", "--out", str(tmp_path / "order.html")]) == 0
    page, errors = open_page(browser, tmp_path / "order.html")
    page.keyboard.press("j")
    assert page.text_content("#transcript .result pre") == RESULT_SHOWN
    # The call: its arguments in the order the agent wrote them, in the fold's line and in the fold.
    assert page.text_content("#transcript .call summary") == "set_quantities(order_id, 4153505238, 1008292230)"
    assert page.text_content("#transcript .call pre") == json.dumps(ARGUMENTS, indent=2)
    cells = page.eval_on_selector_all("#diff tr:last-child td", "cells => cells.map(c => c.textContent)")
    assert cells == ["products", "8310926033", "variants", json.dumps(stock), str(2**64)]

    # The page's layout is a relayout of the tokens alone: of any JSON text, what Python's indent=2 writes of it.
    @settings(max_examples=100, deadline=None)
    @given(JSON)
    def laid_out_as_written(value: Any) -> None:
        text = json.dumps(value, ensure_ascii=False)
        assert page.evaluate("(t) => pretty(t)", text) == json.dumps(value, ensure_ascii=False, indent=2)

    laid_out_as_written()
    assert errors == []


# JSON values with the text that could confuse a tokenizer: quotes, backslashes, brackets, colons and commas in strings.
JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(alphabet=st.sampled_from('"\\{}[]:, a\n\u2028恤')),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=4) | st.just("7"), inner, max_size=4),
    max_leaves=12,
)


# (a tool's JSON text, built in the page; the most characters its layout may have). The layout is at most
# LAYOUT_MAX (1,000,000) characters, else the text as written: indenting two spaces a level makes 10,000 levels
# 2 * (1 + 2 + … + 10,000) ≈ 100 M characters, and 2.5 M levels (5 MB of brackets) more than a string can hold.
HUGE = [
    ('"[".repeat(10000) + "]".repeat(10000)', 1_000_000),  # 20,000 characters, 10,000 deep
    ('"[".repeat(2500000) + "]".repeat(2500000)', 5_000_000),  # 5 MB, 2.5 M deep: the text as written
    ('"[" + Array(700000).fill("1").join(",") + "]"', 1_400_001),  # ~1.4 MB flat: the text as written
]


@pytest.mark.parametrize(("build", "most"), HUGE)
def test_a_huge_or_deep_tool_result_is_laid_out_in_bounded_time_and_size(
    browser: Any, tmp_path: Path, build: str, most: int
) -> None:
    log = tmp_path / "one.log"
    record = {"task_id": "0", "trial": 0, "status": "ok", "reward": 0.0, "termination": "user_stop", "turns": 1}
    log.write_text(json.dumps({**record, "checks": [], "messages": []}) + "\n", encoding="utf-8")
    assert main(["view", str(log), "--domain", "retail", "--out", str(tmp_path / "one.html")]) == 0
    page, errors = open_page(browser, tmp_path / "one.html")
    took, size, same = page.evaluate(
        f"() => {{ const t = {build}, t0 = performance.now(); let out;"
        " try { out = pretty(t); } catch (e) { return [performance.now() - t0, -1, String(e)]; }"
        " return [performance.now() - t0, out.length, out === t]; }"
    )
    assert size != -1, same  # no RangeError: Invalid string length
    assert size <= most
    assert took < 5000  # milliseconds: a page that hangs on one result hangs the review
    assert errors == []
