"""Import a script of the research wing (research/) as a module, so tests can check what it computes and what it
would train."""

from __future__ import annotations

import sys
from pathlib import Path
from types import ModuleType

RESEARCH = Path(__file__).resolve().parent.parent
BENCHMARKS = RESEARCH.parent / "benchmarks"  # the product's benchmarks (the demo runs)
sys.path.insert(0, str(RESEARCH))  # the scripts import each other by name, as when run from research/
if str(RESEARCH.parent / "tests") not in sys.path:
    sys.path.append(str(RESEARCH.parent / "tests"))  # the product tests' tiny training settings (test_detection.SMALL)
from benchmark_util import load_script  # noqa: E402  (the product tests' loader, found through that path)


def load_research(name: str = "detection", folder: Path = RESEARCH) -> ModuleType:
    return load_script(folder / f"{name}.py", f"{folder.name}_{name}")
