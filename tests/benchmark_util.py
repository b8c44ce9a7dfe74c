"""Import a script from benchmarks/ as a module, so tests can check what it computes and what it would train."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

BENCHMARKS = Path(__file__).resolve().parent.parent / "benchmarks"


def load_benchmark(name: str = "detection") -> ModuleType:
    return load_script(BENCHMARKS / f"{name}.py", f"benchmark_{name}")


def load_script(path: Path, module_name: str) -> ModuleType:
    """The script at `path` imported once as `module_name` (later calls return the same module)."""
    if module_name in sys.modules:
        return sys.modules[module_name]
    spec = importlib.util.spec_from_file_location(module_name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module  # dataclasses look their module up while the file executes
    spec.loader.exec_module(module)
    return module
