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
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from rewardkit.cli import main

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
def browser() -> Iterator[Any]:
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
        context = p.chromium.launch_persistent_context(
            tempfile.mkdtemp(prefix="rk-chromium-"),
            executable_path=chromium,
            headless=True,
            args=FLAGS,
            accept_downloads=True,
            viewport={"width": 1300, "height": 850},
        )
        yield context
        context.close()


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
    assert json.loads(verdicts.read_text())["verdicts"] == {ids[0]: "accept", ids[1]: "reject"}
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
    assert '"JsonValid":0' in page.text_content("#episode") and page.locator("#transcript .turn").count() == 2
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
