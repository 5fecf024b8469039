"""Rendering a checked template gives exactly ``string.Template.substitute``'s text."""

from __future__ import annotations

import string
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from governed_broker.config.templates import TemplateSet

NAMES = ("a", "year", "flood_zone")
# literal text without "$" or identifier characters, so "$a" followed by it stays "$a"
PIECE = st.one_of(st.text(alphabet=" .,;:-()\n\u00e9\u2028{}", max_size=8),
                  st.sampled_from(["$$", *(f"${n}" for n in NAMES),
                                   *(f"${{{n}}}x" for n in NAMES)]))


@given(st.lists(PIECE, max_size=8), st.lists(st.integers() | st.text(max_size=5), min_size=3,
                                              max_size=3))
def test_render_is_substitute(pieces, values) -> None:
    text = "".join(pieces)
    template = string.Template(text)
    assert template.is_valid()
    given_values = dict(zip(NAMES, values, strict=True))
    templates = TemplateSet(Path("t.yaml"), {"k": template}, {})
    expected = template.substitute({k: str(v) for k, v in given_values.items()})
    assert templates.render("k", **given_values) == expected


def test_a_missing_value_names_the_file_and_template() -> None:
    templates = TemplateSet(Path("t.yaml"), {"k": string.Template("in $year")}, {})
    with pytest.raises(KeyError, match="t.yaml: template 'k' needs value 'year'"):
        templates.render("k")
