"""What the code, the configuration and the README cite exists in the repository.

A docstring, a ``source:`` note or a comment that names a document names one a reader of the
repository can open: every ``docs/...md`` path exists, and the code, the experiments and the
README point at nothing outside the repository (a machine path, the original specification's
sections, another project's README). The prompt templates, knowledge documents and
``agent_types.yaml`` are inputs whose bytes are hashed into runs and cards, so their notes are
checked for ``docs/`` paths only.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
CODE = [*ROOT.glob("governed_broker/**/*.py"), *ROOT.glob("governed_broker/**/*.yaml"),
        *ROOT.glob("experiments/*.yaml"), *ROOT.glob("tests/**/*.py"), ROOT / "README.md",
        ROOT / "Makefile", ROOT / "configs" / "benchmarks.yaml"]
INPUTS = [p for p in ROOT.glob("configs/**/*.yaml") if p not in CODE]
SOURCES = sorted([*CODE, *INPUTS])
DOC_PATH = re.compile(r"\bdocs/[\w./-]+?\.(?:md|png)\b")
OUTSIDE = re.compile(r"/work/shared|\bSPEC \d|\bSPEC section|readme_parts|README section \d")


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(ROOT)))
def test_cited_documents_exist_and_nothing_outside_the_repository_is_cited(path: Path) -> None:
    if path == Path(__file__):
        return
    text = path.read_text(encoding="utf-8")
    missing = sorted({m for m in DOC_PATH.findall(text) if not (ROOT / m).exists()})
    outside = sorted({m.group(0) for m in OUTSIDE.finditer(text)}) if path in CODE else []
    assert (missing, outside) == ([], []), path
