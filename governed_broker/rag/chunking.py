"""Markdown documents -> heading-aware chunks.

A document is split at its headings; every chunk keeps the path of headings above it
("NFIP flood insurance basics > Coverage limits") as its first line, so a chunk read on its own
in a prompt still says what it is about, and the words of the headings take part in retrieval.
A section whose body is longer than ``max_chars`` is split on paragraph boundaries (then on
sentence ends, then at whitespace for a single over-long sentence). No text is dropped: every
non-blank body line and every heading of the document appears in some chunk.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

_HEADING = re.compile(r"^(#{1,6})\s+(.+?)\s*#*\s*$")
_FENCE = re.compile(r"^\s*(```|~~~)")
_SENTENCE_END = re.compile(r"(?<=[.!?;:])\s+")
_SOURCE_LINE = re.compile(r"^Source:\s*(.+)$", re.M)
HEADING_SEPARATOR = " > "


@dataclass(frozen=True)
class Chunk:
    """One retrievable piece of a knowledge document.

    Attributes:
        text: Heading path on the first line, a blank line, then the body; what enters prompts.
        source: ``<file>#<heading>`` (plus `` [i/n]`` when a long section was split), a stable
            citation for audits.
        score: Fused retrieval score (reciprocal rank fusion, higher is better); 0 before search.
        similarity: Best cosine similarity (0..1) between the chunk and any query of the search.
        doc: File name of the document, e.g. ``nfip_basics.md``.
        heading_path: Headings from the document title down to this section.
        body: The section text without the heading path.
        citation: The document's ``Source:`` line (without the label), "" if it has none.
        front_matter: The chunk is the body of the document's title section and holds the
            ``Source:`` line (and disclaimer); the knowledge base keeps it as the citation of
            the document's other chunks rather than retrieving it as knowledge.
    """

    text: str
    source: str
    score: float = 0.0
    similarity: float = 0.0
    doc: str = ""
    heading_path: tuple[str, ...] = ()
    body: str = ""
    citation: str = ""
    front_matter: bool = False

    def to_dict(self) -> dict[str, object]:
        """JSON-serialisable form for audits and tools."""
        return {
            "source": self.source,
            "score": round(float(self.score), 6),
            "similarity": round(float(self.similarity), 6),
            "heading_path": list(self.heading_path),
            "citation": self.citation,
            "text": self.text,
        }


def _sections(markdown: str) -> list[tuple[tuple[str, ...], list[str]]]:
    """Split markdown into (heading path, body lines) in document order.

    Lines inside fenced code blocks are never taken as headings.
    """
    sections: list[tuple[tuple[str, ...], list[str]]] = [((), [])]
    stack: list[tuple[int, str]] = []
    in_fence = False
    for line in markdown.splitlines():
        if _FENCE.match(line):
            in_fence = not in_fence
        match = None if in_fence else _HEADING.match(line)
        if match is None:
            sections[-1][1].append(line)
            continue
        level, title = len(match.group(1)), match.group(2).strip()
        while stack and stack[-1][0] >= level:
            stack.pop()
        stack.append((level, title))
        sections.append((tuple(t for _, t in stack), []))
    return sections


def _split_long(text: str, max_chars: int) -> list[str]:
    """Split one over-long paragraph at sentence ends, then at whitespace, then hard."""
    pieces: list[str] = []
    for sentence in _SENTENCE_END.split(text):
        while len(sentence) > max_chars:
            cut = sentence.rfind(" ", 0, max_chars + 1)
            cut = cut if cut > 0 else max_chars
            pieces.append(sentence[:cut].rstrip())
            sentence = sentence[cut:].lstrip()
        if sentence:
            pieces.append(sentence)
    return _pack(pieces, max_chars, " ")


def _pack(pieces: Iterable[str], max_chars: int, joiner: str) -> list[str]:
    """Greedily join consecutive pieces while the result stays within ``max_chars``."""
    out: list[str] = []
    for piece in pieces:
        if out and len(out[-1]) + len(joiner) + len(piece) <= max_chars:
            out[-1] = out[-1] + joiner + piece
        else:
            out.append(piece)
    return out


def split_body(body: str, max_chars: int) -> list[str]:
    """Split a section body into parts of at most ``max_chars`` on paragraph boundaries.

    Args:
        body: Section text (markdown, paragraphs separated by blank lines).
        max_chars: Maximum characters of one part (>= 1).

    Returns:
        Non-empty parts in order; ``[]`` for a blank body.
    """
    if max_chars < 1:
        raise ValueError(f"max_chars must be >= 1, got {max_chars}")
    paragraphs = [p.strip() for p in re.split(r"\n\s*\n", body) if p.strip()]
    pieces: list[str] = []
    for paragraph in paragraphs:
        pieces.extend(
            [paragraph] if len(paragraph) <= max_chars else _split_long(paragraph, max_chars)
        )
    return _pack(pieces, max_chars, "\n\n")


def chunk_markdown(markdown: str, doc: str, max_chars: int = 1200) -> list[Chunk]:
    """Chunk one markdown document by heading with a maximum body size.

    Args:
        markdown: The document text.
        doc: Document name used in ``Chunk.source`` (usually the file name).
        max_chars: Maximum characters of a chunk's body (the heading path is added on top).

    Returns:
        Chunks in document order. A heading with neither body text nor sub-sections still
        yields a (heading-only) chunk so that no text is lost.
    """
    sections = _sections(markdown)
    cited = _SOURCE_LINE.search(markdown)
    citation = cited.group(1).strip() if cited else ""
    chunks: list[Chunk] = []
    for i, (path, lines) in enumerate(sections):
        body = "\n".join(lines).strip()
        has_children = (
            i + 1 < len(sections)
            and sections[i + 1][0][: len(path)] == path
            and (len(sections[i + 1][0]) > len(path))
        )
        if not body and (has_children or not path):
            continue
        parts = split_body(body, max_chars) or [""]
        anchor = f"{doc}#{path[-1]}" if path else doc
        header = HEADING_SEPARATOR.join(path)
        for j, part in enumerate(parts):
            source = anchor if len(parts) == 1 else f"{anchor} [{j + 1}/{len(parts)}]"
            text = "\n\n".join(t for t in (header, part) if t)
            chunks.append(
                Chunk(
                    text=text,
                    source=source,
                    doc=doc,
                    heading_path=path,
                    body=part,
                    citation=citation,
                    front_matter=i == 1 and len(path) == 1 and bool(_SOURCE_LINE.search(part)),
                )
            )
    return chunks


def load_chunks(directory: Path, max_chars: int = 1200) -> list[Chunk]:
    """Chunk every ``*.md`` file of ``directory`` (sorted by name, so order is reproducible).

    Raises:
        FileNotFoundError: The directory does not exist or holds no markdown file; the message
            names the directory and says what is expected.
    """
    directory = Path(directory)
    if not directory.is_dir():
        raise FileNotFoundError(
            f"knowledge directory {str(directory)!r} does not exist; set rag.knowledge_dir to a "
            "directory of markdown (*.md) documents"
        )
    files = sorted(directory.glob("*.md"))
    if not files:
        raise FileNotFoundError(
            f"knowledge directory {str(directory)!r} holds no *.md documents; add documents or "
            "set rag.enabled: false"
        )
    chunks: list[Chunk] = []
    for path in files:
        chunks.extend(chunk_markdown(path.read_text(encoding="utf-8"), path.name, max_chars))
    return chunks
