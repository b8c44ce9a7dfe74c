"""`jepa check`: the pre-flight reports masks, parameters, loader and step speed, memory, projected time and the
bottleneck, and exits 0 when the run looks feasible, 1 with the reason when it does not, 2 on bad input."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from jepa_core import check as check_mod
from jepa_core.cli import main as jepa
from jepa_core.config import apply_overrides, preset

SMALL = ["--set", "data.num_train=256", "--set", "data.num_heldout=64", "--set", "optim.batch_size=16",
         "--steps", "2", "--loader-batches", "3", "--mask-batches", "50"]


def test_check_reports_every_section_and_passes_a_feasible_run(capsys) -> None:
    assert jepa(["check", *SMALL]) == 0
    out = capsys.readouterr().out
    assert "config: valid; data shapes: 256 training and 64 held-out images at 32 px" in out
    assert "masks: 50 batches of 16 on the 8x8 patch grid" in out
    assert "; 0 batches with a target patch in the context" in out
    assert ("early warning: per-batch signals every 10 steps, the fixed probe batch every 20, rank every 20, "
            "parameter distance every 20, masks every 10") in out and "note:" not in out
    assert "parameters: total " in out and "predictor " in out
    assert "loader: 3 batches of 16" in out and "images/s, in the training process" in out
    assert "step (cpu, fp32): " in out and "peak memory " in out
    assert "projected: 1,600 steps x " in out and "evaluations of 64 held-out images" in out
    assert "bottleneck: the model" in out
    assert out.rstrip().endswith("verdict: feasible")


def test_check_samples_masks_in_the_workers_and_shows_an_injected_leak(capsys) -> None:
    args = [*SMALL, "--set", "data.num_workers=2", "--set", "faults.mask_leak_fraction=0.5",
            "--set", "faults.start_step=10"]
    assert jepa(["check", *args]) == 0  # the fault is on purpose: reported, not a reason to refuse the run
    out = capsys.readouterr().out
    assert "; 40 batches with a target patch in the context" in out  # steps 10..49 of the 50 sampled
    assert "faults.mask_leak_fraction is on" in out and "loader: 3 batches of 16 in" in out and "2 workers" in out


def test_a_sparse_fixed_batch_is_noted_not_refused(capsys) -> None:
    assert jepa(["check", *SMALL, "--set", "diagnostics.fixed_batch_every_steps=250"]) == 0
    out = capsys.readouterr().out
    assert "the fixed probe batch every 250 steps lets a collapse" in out
    assert "diagnostics.fixed_batch_every_steps" in out and out.rstrip().endswith("verdict: feasible")
    # sparse against the run's own readings, not in steps: with basic readings every 100 steps, 250 is close enough
    assert jepa(["check", *SMALL, "--set", "diagnostics.fixed_batch_every_steps=250",
                 "--set", "diagnostics.basic_every_steps=100"]) == 0
    assert "lets a collapse" not in capsys.readouterr().out


def test_a_loader_slower_than_the_step_is_not_feasible(monkeypatch, capsys) -> None:
    real = check_mod.check_loader

    def slow_loader(*args, **kwargs):
        batches, _ = real(*args, **kwargs)
        return batches, 0.01  # images/s: any model step consumes more

    monkeypatch.setattr(check_mod, "check_loader", slow_loader)
    assert jepa(["check", *SMALL]) == 1
    out = capsys.readouterr().out
    assert "bottleneck: the loader (0.01 images/s" in out
    assert "verdict: not feasible" in out and "fewer than the" in out and "set data.num_workers" in out


def test_a_step_above_the_memory_available_is_not_feasible(monkeypatch, capsys) -> None:
    monkeypatch.setattr(check_mod.psutil, "virtual_memory", lambda: SimpleNamespace(total=2**20))
    assert jepa(["check", *SMALL]) == 1
    assert "peak memory" in capsys.readouterr().out.split("verdict: not feasible")[1]


@pytest.mark.parametrize("args, needle", [
    (["--set", "data.num_workers=-2"], "data.num_workers"),
    (["--set", "data.crop_scale=[0.9, 0.2]"], "data.crop_scale"),
    (["--set", "optim.batch_size=0"], "optim.batch_size"),
    (["--steps", "0"], "--steps"),
    (["--set", "data.dataset=folder", "--set", 'data.path="/nonexistent/images"'], "/nonexistent/images"),
])
def test_bad_input_exits_2_naming_the_key(capsys, args, needle) -> None:
    assert jepa(["check", *args]) == 2
    assert needle in capsys.readouterr().err


def test_evaluation_count_follows_the_cadence() -> None:
    cfg = apply_overrides(preset("tiny"), ["optim.steps=1000", "diagnostics.eval_every_steps=400"])
    assert check_mod.evaluations(cfg) == 4  # 0 (random init), 400, 800, 1000 (the end)
    cfg.eval.at_start = False
    assert check_mod.evaluations(cfg) == 3


def test_check_reads_a_config_file(tmp_path, capsys) -> None:
    config = tmp_path / "run.toml"
    config.write_text('preset = "tiny"\n[optim]\nsteps = 100\n')
    assert jepa(["check", "--config", str(config), *SMALL]) == 0
    assert "100 steps of batch 16" in capsys.readouterr().out
