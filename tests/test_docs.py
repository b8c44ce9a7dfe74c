"""The project carries its own design: docs/config.md is what the dataclasses say today, every key has a meaning,
and the code's "design §n" references point at sections of docs/design.md (none at a file outside the repo)."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest

from jepa_core.config import Config
from jepa_core.config.reference import field_comments, reference_markdown

REPO = Path(__file__).resolve().parent.parent
SOURCES = [p for folder in ("jepa_core", "notebooks", "benchmarks", "research", "tests", "examples")
           for p in (REPO / folder).rglob("*.py") if p.name != "test_docs.py"]
OUTSIDE = "SP" + "EC"  # the original contract's name, kept out of this file's own text


def test_the_config_reference_is_current():
    assert (REPO / "docs" / "config.md").read_text(encoding="utf-8") == reference_markdown(), \
        "docs/config.md is stale: python -m jepa_core.config.reference > docs/config.md"


def test_every_config_key_says_what_it_is():
    defaults = Config()
    for section in dataclasses.fields(Config):
        obj = getattr(defaults, section.name)
        comments = field_comments(type(obj))
        assert [f.name for f in dataclasses.fields(obj) if f.name not in comments] == [], section.name


def test_a_key_without_a_comment_is_refused(monkeypatch):
    import jepa_core.config.reference as reference

    monkeypatch.setattr(reference, "field_comments", lambda cls: {})
    with pytest.raises(ValueError, match="model.img_size: no comment in ModelConfig"):
        reference.reference_markdown()


def test_design_references_point_into_docs_design():
    sections = set(re.findall(r"^## §(\d+) ", (REPO / "docs" / "design.md").read_text(encoding="utf-8"), re.M))
    cited = set()
    for path in SOURCES:
        text = path.read_text(encoding="utf-8")
        assert not re.search(rf"\b{OUTSIDE}\b", text), f"{path}: points outside the repo (the design is docs/design.md)"
        cited |= set(re.findall(r"design §(\d+)", text)) | {n for group in re.findall(r"design (§\d+(?:, §\d+)+)",
                                                                                        text)
                                                            for n in re.findall(r"\d+", group)}
    assert cited and cited <= sections, sorted(cited - sections)
