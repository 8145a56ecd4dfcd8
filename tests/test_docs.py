"""The documentation is a reference a reader can follow: every relative link in README.md and docs/ resolves,
docs/README.md indexes every page, every design reference in the code names a section of docs/design.md, and
what users read carries no tracker issue numbers."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[1]
DOCS = ROOT / "docs"
PAGES = sorted([ROOT / "README.md", *DOCS.rglob("*.md")])
LINK = re.compile(r"\]\(([^)\s]+)\)")
FENCE = re.compile(r"^```.*?^```", re.S | re.M)
CODE = re.compile(r"`[^`\n]*`")
# "DESIGN 3.5" (the older form) and "docs/design.md §3.5" both name section 3.5 of docs/design.md.
DESIGN_REF = re.compile(r"(?:\bDESIGN|design\.md) ?§?(\d+(?:\.\d+)?)")
ISSUE = re.compile(r"\b[Ii]ssue \d+")
# Issue numbers of other projects are references, not ours: allowed where they are named.
FOREIGN_ISSUES = re.compile(r"KernelBench\s+issue \d+")


def links(text: str) -> list[str]:
    prose = CODE.sub("", FENCE.sub("", text))  # code is not a link: `kernel[grid](...)` in a code block
    return LINK.findall(prose)


def design_sections() -> set[str]:
    return {m.group(1) for m in re.finditer(r"^#+ (\d+(?:\.\d+)?)\.? ", (DOCS / "design.md").read_text(), re.M)}


def test_the_link_finder_ignores_code_and_finds_links() -> None:
    text = "see [a](a.md) and `x[i](y)`\n```\nk[grid](z)\n```\n[b](../b.md#part)"
    assert links(text) == ["a.md", "../b.md#part"]


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_resolves(page: Path) -> None:
    bad = []
    for target in links(page.read_text()):
        if re.match(r"[a-z]+:", target) or target.startswith("#"):
            continue  # a URL or an anchor on the same page
        path = (page.parent / target.split("#", 1)[0]).resolve()
        if not path.exists():
            bad.append(target)
        elif ROOT.resolve() not in path.parents:
            bad.append(f"{target} (outside the repository)")
    assert not bad, f"{page.relative_to(ROOT)} links what is not in the repository: {bad}"


def test_the_index_lists_every_page() -> None:
    listed = {(DOCS / t).resolve() for t in links((DOCS / "README.md").read_text())}
    pages = {p.resolve() for p in DOCS.rglob("*.md") if p.name != "README.md"}
    assert not pages - listed, f"docs/README.md does not list {sorted(str(p) for p in pages - listed)}"


def test_every_design_reference_in_the_code_names_a_section() -> None:
    sections = design_sections()
    assert {"3.1", "3.5", "4", "8"} <= sections  # the checker reads the headings at all
    bad = []
    for path in sorted((ROOT / "src").rglob("*.py")):
        for n, line in enumerate(path.read_text().splitlines(), 1):
            for m in DESIGN_REF.finditer(line):
                if m.group(1) not in sections:
                    bad.append(f"{path.relative_to(ROOT)}:{n}: {m.group(0)}")
    assert not bad, "design references with no such section in docs/design.md: " + "; ".join(bad)


def test_a_reference_to_a_missing_section_is_caught() -> None:
    assert DESIGN_REF.findall("see DESIGN 3.5 and docs/design.md §9.9") == ["3.5", "9.9"]
    assert "9.9" not in design_sections()


@pytest.mark.parametrize("page", [p for p in PAGES if "history" not in p.parts], ids=lambda p: str(p.relative_to(ROOT)))
def test_pages_users_read_carry_no_issue_numbers(page: Path) -> None:
    text = FOREIGN_ISSUES.sub("", page.read_text())
    assert not ISSUE.findall(text), f"{page.relative_to(ROOT)}: {ISSUE.findall(text)} (say what, not which ticket)"
