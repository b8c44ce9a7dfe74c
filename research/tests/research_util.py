"""Import a script of the research wing (research/) as a module, so tests can check what it computes and what it
would train."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

RESEARCH = Path(__file__).resolve().parent.parent
BENCHMARKS = RESEARCH.parent / "benchmarks"  # the product's benchmarks (the demo runs)
sys.path.insert(0, str(RESEARCH))  # the scripts import each other by name, as when run from research/
if str(RESEARCH.parent / "tests") not in sys.path:
    sys.path.append(str(RESEARCH.parent / "tests"))  # the product tests' tiny training settings (test_detection.SMALL)


def load_research(name: str = "detection", folder: Path = RESEARCH) -> ModuleType:
    module_name = f"{folder.name}_{name}"
    if module_name in sys.modules:
        return sys.modules[module_name]
    spec = importlib.util.spec_from_file_location(module_name, folder / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module  # dataclasses look their module up while the file executes
    spec.loader.exec_module(module)
    return module
