"""Short texts kept whole: reasons and insights are never cut in the middle of a sentence.

A reply schema bounds each string only by a hard cap, ``HARD_CAP_FACTOR`` times the length the
prompt asks for, so that a constrained decoder does not stop a sentence halfway. After parsing,
``whole_sentences`` keeps the leading complete sentences that fit the asked length (at least the
first one); a text that reached the hard cap without ending its sentence loses that unfinished
sentence, and if it has no complete sentence at all it is reported as cut.
"""

from __future__ import annotations

import re

#: How much longer than the asked length a string may grow before the schema stops it.
HARD_CAP_FACTOR = 3

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")
_ENDS = (".", "!", "?", '"', "'", ")")


def hard_cap(max_chars: int) -> int:
    """The schema's ``maxLength`` for a text asked to be at most ``max_chars`` long."""
    return HARD_CAP_FACTOR * max_chars


def whole_sentences(text: str, max_chars: int) -> tuple[str, str | None, bool]:
    """Keep the leading complete sentences of ``text`` that fit in ``max_chars``.

    The first sentence is always kept whole, even when it alone is longer than ``max_chars``.

    Returns:
        ``(text, note, complete)``: the kept text, what was done (None when nothing), and
        False when the text was stopped at the hard cap inside its only sentence.
    """
    text = " ".join(text.split())
    sentences = _SENTENCE_END.split(text)
    stopped = len(text) >= hard_cap(max_chars) and not text.endswith(_ENDS)
    if stopped and len(sentences) == 1:
        return text, f"stopped mid-sentence at the schema's limit of {hard_cap(max_chars)} " \
                     "characters", False
    if stopped:
        sentences = sentences[:-1]  # the unfinished last sentence
    kept = sentences[0]
    for sentence in sentences[1:]:
        if len(kept) + 1 + len(sentence) > max_chars:
            break
        kept = f"{kept} {sentence}"
    if kept == text:
        return text, None, True
    total = len(_SENTENCE_END.split(text))
    return kept, f"kept the first {len(_SENTENCE_END.split(kept))} whole sentence(s) of {total}", \
        True
