"""Generated documentation sections match the code, and every link between the pages resolves."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from governed_broker import docgen
from governed_broker.contracts.columns import AGENT_YEARLY

LINK = re.compile(r"\]\((?!https?://|mailto:)([^)#\s]*)(?:#([^)\s]*))?\)")


def test_generated_sections_match_the_code() -> None:
    assert docgen.drifted() == [], "run: python -m governed_broker.docgen"


def test_a_hand_edited_section_is_reported(tmp_path: Path) -> None:
    shutil.copy(docgen.REPO_ROOT / "README.md", tmp_path / "README.md")
    shutil.copytree(docgen.REPO_ROOT / "docs", tmp_path / "docs")
    page = tmp_path / "docs" / "outputs.md"
    page.write_text(page.read_text().replace("| `flood_zone` |", "| `zone` |"))
    assert docgen.drifted(tmp_path) == ["docs/outputs.md: agent-columns"]


def test_every_output_column_is_documented() -> None:
    text = (docgen.REPO_ROOT / "docs" / "outputs.md").read_text()
    assert all(f"| `{c.name}` |" in text for c in AGENT_YEARLY)


def test_an_unknown_section_is_an_error() -> None:
    text = ("<!-- generated: no-such-table (python -m governed_broker.docgen) -->\n"
            "<!-- end generated: no-such-table -->")
    with pytest.raises(KeyError, match="no-such-table"):
        docgen.render(text, "page.md")


def _anchors(page: Path) -> set[str]:
    """GitHub's heading anchors of a Markdown page."""
    out, fenced = set(), False
    for line in page.read_text().splitlines():
        fenced ^= line.startswith("```")
        if not fenced and line.startswith("#"):
            title = line.lstrip("#").strip().lower()
            out.add(re.sub(r"[^\w\- ]", "", title).replace(" ", "-"))
    return out


@pytest.mark.parametrize("page", docgen.pages(), ids=lambda p: p.name)
def test_links_between_pages_resolve(page: Path) -> None:
    broken = []
    for target, anchor in LINK.findall(page.read_text()):
        path = (page.parent / target).resolve() if target else page
        if not path.exists():
            broken.append(target)
        elif anchor and path.suffix == ".md" and anchor not in _anchors(path):
            broken.append(f"{target}#{anchor}")
    assert broken == []
