"""Text from run files made safe for `mo.md`, and the report header built with it.

`mo.md` renders markdown (with marimo's extensions: LaTeX between `$`, `~~strike~~`, `==mark==`, `^sup^`,
`:emoji:`) and passes HTML through. A string from a metrics file, a run name or a config value must come out as the
same characters, so every character either syntax gives a meaning to becomes a numeric character reference: the
markdown parser leaves references alone and the browser shows the character. One helper, `md_text`, is used
wherever such a string goes into markdown; `charts.safe_text` remains for plain HTML.
"""

from __future__ import annotations

import re
from typing import Any

from jepa_core.common.console import format_duration
from jepa_core.run.branch import lineage
from jepa_core.workbench.runs import RunSummary, config_summary

# Markdown, HTML and marimo-extension syntax characters. Letters, digits and spaces are never special.
_SPECIAL = frozenset("\\`*_{}[]()#+-.!|~<>&\"'$^=:%@")
_REFERENCES = {ord(c): f"&#{ord(c)};" for c in _SPECIAL}
# Line breaks would end a list item or a table row; other controls, the Unicode line separators, bidirectional
# overrides (they show text in another order than it is) and lone surrogates (valid in JSON, not encodable in a
# page) become one space each run.
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069"
                      "\ud800-\udfff]+")


def md_text(value: Any) -> str:
    """`value` as text for `mo.md`: rendered as exactly its characters, on one line, never as markup."""
    return _CONTROL.sub(" ", str(value)).translate(_REFERENCES)


def summary_markdown(summary: RunSummary) -> str:
    """The report header as markdown; every string read from the run's files goes through `md_text`."""
    steps = "?" if summary.steps is None else str(summary.steps)
    lines = [
        f"# Run report: {md_text(summary.name)}",
        "",
        "| | |",
        "| --- | --- |",
        f"| status | **{md_text(summary.status)}** |",
        f"| doctor verdict | **{md_text(summary.verdict or 'not computed')}** |",
        f"| last step | {steps} |",
        f"| duration | {md_text(format_duration(summary.duration_seconds))} |",
        f"| device | {md_text(summary.device)} |",
        f"| faults injected | {md_text(', '.join(summary.faults) or 'none')} |",
        f"| path | {md_text(summary.path)} |",
    ]
    parent = lineage(summary.meta)
    if parent is not None:
        changes = ", ".join(f"{k} = {v!r}" for k, v in (parent.get("changes") or {}).items()) or "none"
        lines.insert(-1, f"| branched from | {md_text(parent.get('run'))} at step {parent['step']} "
                         f"(changes: {md_text(changes)}) |")
    config_pairs = config_summary(summary.config)
    if config_pairs:
        lines += ["", "**Config**: " + ", ".join(f"{md_text(k)} = {md_text(v)}" for k, v in config_pairs)]
    return "\n".join(lines)


def problems_markdown(problems: list[str] | tuple[str, ...]) -> str:
    """A warning naming each damaged file, for a callout; empty when there is nothing to say."""
    if not problems:
        return ""
    items = "\n".join(f"- {md_text(p)}" for p in problems)
    return f"**Some of this run's files could not be read**; what they hold is left out:\n\n{items}"
