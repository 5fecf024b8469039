"""Heading-aware chunking: heading paths, size limits, no text lost."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rag_helpers import KNOWLEDGE_DIR

from governed_broker.rag.chunking import chunk_markdown, load_chunks, split_body

DOC = """# Title

Source: FEMA, "Example page".

## Coverage

Building up to $250,000.

### Basements

Only equipment is covered.

## Empty section
## Exclusions

Cars are not covered.
"""


def test_heading_path_is_kept_in_text_and_source() -> None:
    chunks = chunk_markdown(DOC, "doc.md")
    by_source = {c.source: c for c in chunks}
    basements = by_source["doc.md#Basements"]
    assert basements.heading_path == ("Title", "Coverage", "Basements")
    assert basements.text.startswith("Title > Coverage > Basements\n\n")
    assert basements.body == "Only equipment is covered."
    assert by_source["doc.md#Exclusions"].heading_path == ("Title", "Exclusions")
    assert all(c.citation == 'FEMA, "Example page".' for c in chunks)


def test_heading_without_body_or_children_is_kept() -> None:
    chunks = chunk_markdown(DOC, "doc.md")
    empty = [c for c in chunks if c.source == "doc.md#Empty section"]
    assert len(empty) == 1 and empty[0].body == ""
    assert empty[0].text == "Title > Empty section"
    # "Coverage" has a body of its own, "Title" only the Source line: both present once
    assert [c.source for c in chunks].count("doc.md#Coverage") == 1


def test_headings_inside_code_fences_are_not_headings() -> None:
    text = "# A\n\n```\n# not a heading\n```\n\nafter\n"
    (chunk,) = chunk_markdown(text, "x.md")
    assert "# not a heading" in chunk.body and "after" in chunk.body


def test_preamble_before_first_heading_is_a_chunk() -> None:
    chunks = chunk_markdown("intro line\n\n# H\n\nbody\n", "x.md")
    assert chunks[0].source == "x.md" and chunks[0].text == "intro line"
    assert chunks[1].source == "x.md#H"


def test_long_section_is_split_on_paragraphs_with_numbered_sources() -> None:
    paragraphs = [f"Paragraph {i} " + "word " * 30 for i in range(6)]
    text = "# Long\n\n" + "\n\n".join(p.strip() for p in paragraphs)
    chunks = chunk_markdown(text, "x.md", max_chars=400)
    assert len(chunks) > 1
    assert all(len(c.body) <= 400 for c in chunks)
    assert [c.source for c in chunks] == [
        f"x.md#Long [{i}/{len(chunks)}]" for i in range(1, len(chunks) + 1)
    ]
    # paragraphs are never cut when each fits
    for p in paragraphs:
        assert any(p.strip() in c.body for c in chunks)


def test_overlong_paragraph_is_split_at_sentences_and_words() -> None:
    para = " ".join(f"Sentence number {i} is here." for i in range(40)) + " " + "x" * 150
    parts = split_body(para, 100)
    assert all(len(p) <= 100 for p in parts)
    assert "".join(parts).replace(" ", "") == para.replace(" ", "")


def test_split_body_rejects_bad_limit() -> None:
    with pytest.raises(ValueError, match="max_chars"):
        split_body("text", 0)


_word = st.text(alphabet="abcdefghij", min_size=1, max_size=12)
_paragraph = st.lists(_word, min_size=1, max_size=40).map(" ".join)
_section = st.tuples(st.integers(1, 4), _word, st.lists(_paragraph, min_size=0, max_size=5))


@settings(max_examples=150, deadline=None)
@given(sections=st.lists(_section, min_size=1, max_size=8), max_chars=st.integers(20, 300))
def test_no_text_lost_and_sizes_bounded(sections, max_chars) -> None:
    lines = []
    for level, title, paras in sections:
        lines.append("#" * level + " " + title)
        lines.append("")
        for p in paras:
            lines.extend([p, ""])
    chunks = chunk_markdown("\n".join(lines), "d.md", max_chars=max_chars)
    bodies = " ".join(c.body for c in chunks)
    all_words = re.findall(r"[a-j]+", " ".join(" ".join(p) for _, _, p in sections))
    assert re.findall(r"[a-j]+", bodies) == all_words  # every word, in order, exactly once
    assert all(len(c.body) <= max_chars for c in chunks)
    titles = {t for _, t, _ in sections}
    assert titles <= {h for c in chunks for h in c.heading_path}


def test_shipped_documents_are_sourced_and_chunked() -> None:
    chunks = load_chunks(KNOWLEDGE_DIR, 1200)
    docs = {c.doc for c in chunks}
    assert {
        "nfip_basics.md",
        "insurance_coverage.md",
        "elevation_and_subsidies.md",
        "relocation_and_buyouts.md",
    } <= docs
    for doc in docs:
        text = (KNOWLEDGE_DIR / doc).read_text(encoding="utf-8")
        assert text.startswith("# "), doc
        assert re.search(r"^Source: .+", text, re.M), doc
        assert "check" in text.split("\n## ")[0].lower(), f"{doc}: disclaimer missing"
    assert all(c.citation for c in chunks)


def test_load_chunks_errors_name_the_directory(tmp_path) -> None:
    with pytest.raises(FileNotFoundError, match="does not exist"):
        load_chunks(tmp_path / "missing")
    with pytest.raises(FileNotFoundError, match=r"no \*\.md"):
        load_chunks(tmp_path)
