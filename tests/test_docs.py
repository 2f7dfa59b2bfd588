"""The README and the pages under docs/: every relative link resolves, the README stays short, its commands are real.

A link is checked as GitHub renders it: relative to the page, to a file or folder inside the repository, and, for a
``#anchor`` into a Markdown page, to one of that page's headings, slugged the way GitHub slugs them (lower case,
punctuation dropped, spaces to hyphens, ``-1``, ``-2`` … for repeats). Fenced code and inline code are not Markdown,
so links and headings inside them do not count. The checks are plain functions of a page's text, so the tests at the
end feed them made-up pages and watch them fail.
"""

from __future__ import annotations

import argparse
import re
import shlex
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
PAGES = [README, *sorted((ROOT / "docs").glob("*.md"))]
README_MAX_LINES = 200

FENCE = re.compile(r"^\s*(```+|~~~+)")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
INLINE_CODE = re.compile(r"(`+)(.+?)\1")
LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\[\]]*\])*\]\(\s*<?([^()\s<>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
REFERENCE = re.compile(r"^\s*\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+\"[^\"]*\")?\s*$")
EXTERNAL = re.compile(r"^[a-z][a-z0-9+.-]*:", re.IGNORECASE)  # http:, https:, mailto:, …


def prose_lines(text: str) -> Iterator[tuple[int, str]]:
    """(line number, line) outside fenced code blocks, with inline code blanked out."""
    fence = None
    for number, line in enumerate(text.splitlines(), 1):
        match = FENCE.match(line)
        if match:
            mark = match.group(1)
            if fence is None:
                fence = mark[0] * len(mark)
                continue
            if mark.startswith(fence):
                fence = None
                continue
        if fence is None:
            yield number, INLINE_CODE.sub(lambda m: " " * len(m.group(0)), line)


def code_blocks(text: str, languages: tuple[str, ...] = ("bash", "sh", "shell")) -> Iterator[str]:
    """The bodies of the fenced blocks tagged with one of ``languages``."""
    fence = None  # the open fence's mark, or None outside a block
    keep = False
    body: list[str] = []
    for line in text.splitlines():
        match = FENCE.match(line)
        if fence is None and match:
            fence = match.group(1)
            keep = line.strip()[len(fence) :].strip().lower() in languages
            body = []
        elif fence is not None and match and match.group(1).startswith(fence):
            if keep:
                yield "\n".join(body)
            fence = None
        elif fence is not None:
            body.append(line)


def slug(heading: str) -> str:
    """GitHub's anchor for a heading's text."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # links and images: their text
    text = re.sub(r"<[^>]+>", "", text)  # inline HTML
    text = text.replace("`", "").replace("*", "")
    text = re.sub(r"[^\w\- ]", "", text.strip().lower())
    return text.replace(" ", "-")


def anchors(text: str) -> set[str]:
    """Every heading anchor of a page, repeats numbered as GitHub numbers them."""
    seen: dict[str, int] = {}
    out: set[str] = set()
    fence = None
    for line in text.splitlines():
        match = FENCE.match(line)
        if match:
            mark = match.group(1)
            if fence is None:
                fence = mark[0] * len(mark)
            elif mark.startswith(fence):
                fence = None
            continue
        heading = HEADING.match(line) if fence is None else None
        if heading:
            base = slug(heading.group(2))
            count = seen.get(base, 0)
            seen[base] = count + 1
            out.add(base if count == 0 else f"{base}-{count}")
    return out


def links(text: str) -> Iterator[tuple[int, str]]:
    """(line number, target) of every inline, image and reference-style link in the prose."""
    for number, line in prose_lines(text):
        for match in LINK.finditer(line):
            yield number, match.group(1)
        ref = REFERENCE.match(line)
        if ref:
            yield number, ref.group(1)


def broken_links(page: Path, text: str, root: Path = ROOT) -> list[str]:
    """What is wrong with each relative link of ``page`` (whose text is ``text``), one message per link."""
    wrong = []
    for number, target in links(text):
        if EXTERNAL.match(target):
            continue
        where = f"{page.relative_to(root)}:{number}: ({target})"
        path_part, _, anchor = target.partition("#")
        dest = (page.parent / unquote(path_part)).resolve() if path_part else page
        if not dest.is_relative_to(root):
            wrong.append(f"{where} points outside the repository")
            continue
        if path_part and not dest.exists():
            wrong.append(f"{where} {dest.relative_to(root)} does not exist")
            continue
        if anchor and dest.suffix == ".md":
            found = anchors(dest.read_text(encoding="utf-8") if path_part else text)
            if unquote(anchor) not in found:
                wrong.append(f"{where} {dest.relative_to(root)} has no heading #{anchor}")
    return wrong


def commands(text: str) -> Iterator[tuple[str, list[str]]]:
    """(line, argv) of every command in the page's shell blocks, continuation lines joined, comments dropped."""
    for block in code_blocks(text):
        for line in block.replace("\\\n", " ").splitlines():
            try:
                argv = shlex.split(line, comments=True)
            except ValueError:
                continue
            while argv and re.match(r"^[A-Z_][A-Z0-9_]*=", argv[0]):  # VAR=value prefixes
                argv.pop(0)
            if argv:
                yield line.strip(), argv


def make_targets(makefile: str) -> set[str]:
    return set(re.findall(r"^([A-Za-z0-9_.-]+):(?!=)", makefile, re.MULTILINE))


def page_id(page: Path) -> str:
    return str(page.relative_to(ROOT))


# --- the pages as they are --------------------------------------------------------------------------------------


@pytest.mark.parametrize("page", PAGES, ids=page_id)
def test_every_relative_link_resolves(page: Path) -> None:
    wrong = broken_links(page, page.read_text(encoding="utf-8"))
    assert not wrong, "\n".join(wrong)


def test_the_readme_is_at_most_200_lines() -> None:
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= README_MAX_LINES, (
        f"README.md has {len(lines)} lines (at most {README_MAX_LINES}): move the details to a page under docs/"
    )


def test_the_pages_have_links_to_check() -> None:
    # A parser that found nothing would pass every page: make sure it reads the README's links.
    readme = list(links(README.read_text(encoding="utf-8")))
    assert len(readme) >= 10 and any(t.startswith("docs/") for _, t in readme), readme


@pytest.mark.parametrize("page", PAGES, ids=page_id)
def test_no_page_points_at_a_private_checkout(page: Path) -> None:
    text = page.read_text(encoding="utf-8")
    assert "../shared" not in text, f"{page_id(page)} points at ../shared; cite a public source instead"


def test_the_readme_commands_are_real() -> None:
    """Every ``rewardkit`` line parses with the real CLI, every ``make`` target exists, every recipe file too."""
    from rewardkit.cli import build_parser

    targets = make_targets((ROOT / "Makefile").read_text(encoding="utf-8"))
    wrong = []
    seen = 0
    for page in PAGES:
        for line, argv in commands(page.read_text(encoding="utf-8")):
            if argv[0] == "rewardkit":
                seen += 1
                try:
                    build_parser().parse_args(argv[1:])
                except SystemExit as exc:
                    wrong.append(f"{page_id(page)}: `{line}` does not parse (exit {exc.code})")
            elif argv[0] == "make" and page == README:
                wrong += [f"README.md: `{line}`: no target {t}" for t in argv[1:] if "=" not in t and t not in targets]
            elif argv[0] == "swift" and len(argv) > 2 and argv[2].endswith(".yaml") and not (ROOT / argv[2]).is_file():
                wrong.append(f"{page_id(page)}: `{line}`: {argv[2]} does not exist")
    assert seen >= 5, "found almost no rewardkit commands: is the block parser broken?"
    assert not wrong, "\n".join(wrong)


DOC_REFERENCE = re.compile(r"docs/[A-Za-z0-9_./-]+\.md(?:#[\w-]+)?")


def test_the_docs_that_code_and_tests_name_exist() -> None:
    """A ``docs/page.md#anchor`` named in a test or a module (a moved measurement, say) must still be there."""
    wrong = []
    folders = ("tests", "src", "rewards", "plugins", "recipes", "data_builders", "benchmarks")
    for path in sorted(p for folder in folders for p in (ROOT / folder).rglob("*.py")):
        if path == Path(__file__).resolve():
            continue
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            for ref in DOC_REFERENCE.findall(line):
                fake = f"[x]({ref})"
                wrong += [f"{path.relative_to(ROOT)}:{number}: {w}" for w in broken_links(README, fake)]
    assert not wrong, "\n".join(wrong)


# --- the checks themselves --------------------------------------------------------------------------------------

SLUGS = [
    ("The pass^k metric", "the-passk-metric"),
    ("Synthesis: `rewardkit synth agent`", "synthesis-rewardkit-synth-agent"),
    ("3. ThinkLength (weight 0.1): the S-curve", "3-thinklength-weight-01-the-s-curve"),
    ("The no-think control: AnswerFormat", "the-no-think-control-answerformat"),
    ("SFT → GRPO", "sft--grpo"),
    ("`task_completion` and *TCR*", "task_completion-and-tcr"),
    ("See [mcp.md](mcp.md)", "see-mcpmd"),
]


@pytest.mark.parametrize(("heading", "expected"), SLUGS)
def test_headings_are_slugged_as_github_does(heading: str, expected: str) -> None:
    assert slug(heading) == expected


def test_repeated_headings_are_numbered() -> None:
    assert anchors("# A\n## Errors\n### Errors\n```\n# Errors\n```\n") == {"a", "errors", "errors-1"}


FAKE_PAGE = """# Fake

## Real heading

[fine](README.md) [fine too](#real-heading) ![image](docs/img/retail_bars.png) [web](https://example.com/x.md)
[gone](docs/no_such_page.md) [bad anchor](README.md#no-such-heading) [bad local](#nowhere)
[escape](../../etc/passwd)

[ref]: docs/missing_too.md

```bash
echo "[in code](docs/not_checked.md)"
```
and `[inline code](docs/not_checked_either.md)` is not a link.
"""


def test_broken_links_are_reported(tmp_path: Path) -> None:
    wrong = broken_links(ROOT / "fake.md", FAKE_PAGE)
    assert [w.split(": (", 1)[1].split(")", 1)[0] for w in wrong] == [
        "docs/no_such_page.md",
        "README.md#no-such-heading",
        "#nowhere",
        "../../etc/passwd",
        "docs/missing_too.md",
    ], wrong
    assert "does not exist" in wrong[0] and "has no heading" in wrong[1] and "outside the repository" in wrong[3]


def test_commands_are_read_from_shell_blocks_only() -> None:
    page = (
        "```bash\nrewardkit synth agent --agent gold \\\n    --out x.jsonl  # comment\n"
        "CUDA_VISIBLE_DEVICES=0 swift rlhf recipes/x.yaml\n# only a comment\n```\n"
        "```python\nrewardkit = 1\n```\n"
    )
    assert list(commands(page)) == [
        (
            "rewardkit synth agent --agent gold      --out x.jsonl  # comment",
            ["rewardkit", "synth", "agent", "--agent", "gold", "--out", "x.jsonl"],
        ),
        ("CUDA_VISIBLE_DEVICES=0 swift rlhf recipes/x.yaml", ["swift", "rlhf", "recipes/x.yaml"]),
    ]


def test_a_made_up_command_does_not_parse() -> None:
    from rewardkit.cli import build_parser

    with pytest.raises(SystemExit):
        build_parser().parse_args(["synth", "agent", "--no-such-flag"])


def _flags(parser: Any, command: str = "") -> Iterator[tuple[str, str]]:
    """``(command, --flag)`` for every long option of ``rewardkit`` and of each subcommand, however deep."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _flags(sub, f"{command} {name}".strip())
        else:
            yield from ((command, o) for o in action.option_strings if o.startswith("--") and o != "--help")


def test_the_cli_page_names_every_flag() -> None:
    """docs/cli.md names each flag the parser takes: a flag added to the code and not to the page fails here."""
    from rewardkit.cli import build_parser

    page = (ROOT / "docs" / "cli.md").read_text(encoding="utf-8")
    flags = list(_flags(build_parser()))
    assert len(flags) > 100, "found almost no flags: is the parser walk broken?"
    missing = [f"{command or 'rewardkit'} {flag}" for command, flag in flags if not _names(page, flag)]
    assert not missing, f"docs/cli.md does not name: {', '.join(missing)}"


def _names(page: str, flag: str) -> bool:
    return re.search(rf"(?<![\w-]){re.escape(flag)}(?![\w-])", page) is not None
