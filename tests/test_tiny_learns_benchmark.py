"""benchmarks/tiny_learns.py as an entry point: it applies the run's thread count, as `jepa train` does (the Trainer
leaves the process's threads alone), so `--set runtime.num_threads=1` trains on one thread. Nothing is trained."""

import pytest
import torch

from benchmark_util import load_benchmark

bench = load_benchmark("tiny_learns")


class Trained(Exception):
    pass


def test_the_run_trains_on_the_threads_its_config_asks_for(monkeypatch):
    seen = []

    class Trainer:
        def __init__(self, cfg, run_dir, quiet):
            pass

        def run(self):
            seen.append(torch.get_num_threads())
            raise Trained

    monkeypatch.setattr(bench, "Trainer", Trainer)
    before = torch.get_num_threads()
    wanted = 1 if before != 1 else 2
    try:
        with pytest.raises(Trained):
            bench.run_seed("tiny", None, [f"runtime.num_threads={wanted}"], 0, 0.0, False)
    finally:
        torch.set_num_threads(before)
    assert seen == [wanted]
