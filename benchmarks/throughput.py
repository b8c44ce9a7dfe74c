"""Training throughput, phase split, model FLOPs, MFU and peak memory of the built-in presets, in one process.

Diagnostics stay at each preset's cadences (the numbers a user sees) except the basic group, read every
--phase-every steps so that the timed window holds several phase splits; evaluation and checkpoints are pushed out
of the timed window. Warm-up steps (allocator, cuDNN choices, torch.compile's compilation) are not timed: with
compile, warm-up goes on (up to --max-warmup steps) until three steps in a row built no new graph, since the masks'
context sizes vary per batch and the second size seen recompiles with dynamic shapes. The warm-up's wall time (the
compilation a user waits for) and any graph still built inside the timed window are printed with each row.

- phases: data wait, forward+backward, optimizer, EMA and diagnostics (the trainer's own time/<phase>_seconds) as
  shares of the step time of the timed steps that logged them (time/step_seconds plus the diagnostics after it);
- FLOPs/step: torch.utils.flop_counter over the forward and backward of the loss (matmuls and attention; the
  element-wise optimizer and EMA are not counted), averaged over a few batches (context sizes vary per batch);
- MFU: FLOPs/step / seconds per step / the device's dense bf16 peak, on CUDA with bf16 autocast only. Peaks are a
  table of data-sheet figures below; --peak-tflops gives it for another device;
- peak memory: the CUDA allocator's peak on GPU, the growth of the process's peak RSS on CPU.

    python benchmarks/throughput.py                                   # tiny and small on this machine's device
    python benchmarks/throughput.py --presets tiny --steps 50
    python benchmarks/throughput.py --presets small base --compile both   # on a GPU
"""

from __future__ import annotations

import argparse
import dataclasses
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch
from torch.utils.flop_counter import FlopCounterMode

from jepa_core.config import preset
from jepa_core.data import normalize_images
from jepa_core.method.masks import MaskBatch
from jepa_core.method.runtime import compiled_graph_count
from jepa_core.method.step import jepa_loss
from jepa_core.run.trainer import Trainer

NEVER = 10**9
PHASES = ("data", "forward_backward", "optimizer", "ema", "diagnostics")
# Dense (no sparsity) bf16 tensor-core peaks from NVIDIA's data sheets, TFLOP/s; matched against the device name.
BF16_PEAK_TFLOPS = (("H200", 989.0), ("GH200", 989.0), ("H100 PCIe", 756.0), ("H100 NVL", 835.0), ("H100", 989.0),
                    ("A100", 312.0), ("L40S", 362.0), ("L4", 121.0), ("A10", 125.0))


def peak_rss_gib() -> float:
    scale = 1 if sys.platform == "darwin" else 1024  # ru_maxrss is bytes on macOS, KiB on Linux
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * scale / 2**30


def bf16_peak_tflops(device: torch.device, override: float) -> float | None:
    if override:
        return override
    if device.type != "cuda":
        return None
    name = torch.cuda.get_device_name(device)
    return next((peak for key, peak in BF16_PEAK_TFLOPS if key in name), None)


def flops_per_step(trainer: Trainer, first_step: int, count: int) -> float:
    """Mean FLOPs of the loss's forward + backward over `count` batches from `first_step` on (not trained on)."""
    totals = []
    settings = trainer.settings(first_step)
    plain = dataclasses.replace(trainer.state, online=trainer.online, target_encoder=trainer.model.target_encoder)
    for step in range(first_step, first_step + count):
        images, masks = trainer.batch(step)
        images = normalize_images(images.to(trainer.device))
        masks = MaskBatch(masks.context_idx.to(trainer.device), masks.target_idx.to(trainer.device))
        with FlopCounterMode(display=False) as counter:
            objective, *_ = jepa_loss(plain, images, masks, settings)
            objective.backward()
        trainer.optimizer.zero_grad(set_to_none=True)
        totals.append(counter.get_total_flops())
    return statistics.mean(totals)


def measure(name: str, compile_: bool, args: argparse.Namespace, run_root: Path) -> dict[str, float | str]:
    cfg = preset(name)
    cfg.runtime.device = args.device
    cfg.runtime.compile = compile_
    if args.batch_size:
        cfg.optim.batch_size = args.batch_size
    cfg.optim.steps = NEVER  # stay inside the schedules; only the step count must be out of reach
    cfg.optim.warmup_steps = 10
    cfg.data.num_train, cfg.data.num_heldout = 8 * cfg.optim.batch_size, 64
    cfg.eval.at_start = False
    cfg.diagnostics.eval_every_steps = NEVER
    cfg.diagnostics.basic_every_steps = args.phase_every
    cfg.logging.checkpoint_every_steps = NEVER
    cfg.logging.tensorboard = False
    trainer = Trainer(cfg, run_dir=run_root / f"{name}-{'compiled' if compile_ else 'eager'}", quiet=True,
                      progress=False)
    steps = args.steps if name == "tiny" or trainer.device.type == "cuda" else max(2, args.steps // 10)
    cuda = trainer.device.type == "cuda"
    warm_start = time.perf_counter()
    warmed, quiet = 0, 0
    while warmed < (max(args.warmup, 5) if compile_ else args.warmup) or (
            compile_ and quiet < 3 and warmed < args.max_warmup):
        graphs = compiled_graph_count()
        trainer.step_once()
        warmed += 1
        quiet = quiet + 1 if compiled_graph_count() == graphs else 0
    if cuda:
        torch.cuda.synchronize()
    warm_seconds = time.perf_counter() - warm_start
    rows: list[dict[str, float]] = []
    trainer.on_metrics = lambda step, metrics: rows.append(metrics) if "time/forward_backward_seconds" in metrics \
        else None
    if cuda:
        torch.cuda.reset_peak_memory_stats()
    graphs_before = compiled_graph_count()
    rss_before = peak_rss_gib()
    t0 = time.perf_counter()
    for _ in range(steps):
        trainer.step_once()
    if cuda:
        torch.cuda.synchronize()
    seconds = (time.perf_counter() - t0) / steps
    graphs_timed = compiled_graph_count() - graphs_before
    peak = torch.cuda.max_memory_allocated() / 2**30 if cuda else peak_rss_gib()
    trainer.on_metrics = None
    flops = flops_per_step(trainer, 0, args.flop_batches)  # the same batches for every mode and preset
    trainer.close()
    # Shares of the same rows' step time (the step plus the diagnostics after it): the phases and their total come
    # from the same steps, so a noisy machine shifts both alike.
    total = sum(r["time/step_seconds"] + r["time/diagnostics_seconds"] for r in rows)
    shares = {p: sum(r.get(f"time/{p}_seconds", 0.0) for r in rows) / total if rows else float("nan")
              for p in PHASES}
    bf16 = cfg.runtime.precision == "bf16" or (cfg.runtime.precision == "auto" and cuda)
    peak_tflops = bf16_peak_tflops(trainer.device, args.peak_tflops) if bf16 else None
    achieved = flops / seconds / 1e12
    return {
        "preset": name, "compile": "on" if compile_ else "off", "device": str(trainer.device),
        "batch": cfg.optim.batch_size, "s/step": seconds, "samples/s": cfg.optim.batch_size / seconds,
        "GFLOP/step": flops / 1e9, "TFLOP/s": achieved, "MFU": achieved / peak_tflops if peak_tflops else None,
        "peak GiB": peak, "peak kind": "cuda allocated" if cuda else f"process RSS (+{peak - rss_before:.2f} in steps)",
        **{f"%{p}": shares[p] for p in PHASES},
        "warm-up": f"{warmed} steps in {warm_seconds:.1f} s" + (f", {graphs_timed} graph(s) built in the timed steps"
                                                                if graphs_timed else ""),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--presets", nargs="+", default=["tiny", "small"])
    parser.add_argument("--steps", type=int, default=20, help="timed steps per preset (small on CPU: a tenth)")
    parser.add_argument("--warmup", type=int, default=3, help="untimed steps first (at least 5 with compile)")
    parser.add_argument("--max-warmup", type=int, default=40, help="with compile: warm-up steps at most")
    parser.add_argument("--device", default="auto")
    parser.add_argument("--compile", choices=["off", "on", "both"], default="off")
    parser.add_argument("--batch-size", type=int, default=0, help="override the preset's batch size (0 keeps it)")
    parser.add_argument("--phase-every", type=int, default=5, help="basic cadence (phase split) in the timed window")
    parser.add_argument("--flop-batches", type=int, default=4, help="batches the FLOP count averages over")
    parser.add_argument("--peak-tflops", type=float, default=0.0, help="the device's dense bf16 peak, if not known")
    args = parser.parse_args()
    modes = {"off": [False], "on": [True], "both": [False, True]}[args.compile]
    device = torch.device(args.device if args.device != "auto" else ("cuda" if torch.cuda.is_available() else "cpu"))
    gpu = torch.cuda.get_device_name(device) if device.type == "cuda" else "CPU"
    print(f"torch {torch.__version__}, {gpu}, {torch.get_num_threads()} threads")
    print(f"{'preset':<7}{'compile':>8}{'batch':>6}{'s/step':>9}{'samples/s':>11}{'GFLOP/step':>11}{'TFLOP/s':>9}"
          f"{'MFU':>7}{'peak GiB':>9}  {'data fwd+bwd optim ema diag (% of step)':<40} peak measured as; warm-up",
          flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.presets:
            for compile_ in modes:  # each row is printed when measured: a run cut short keeps what it measured
                r = measure(name, compile_, args, Path(tmp))
                mfu = f"{r['MFU']:.1%}" if r["MFU"] is not None else "n/a"
                split = " ".join(f"{100 * r[f'%{p}']:>4.1f}" for p in PHASES)
                print(f"{r['preset']:<7}{r['compile']:>8}{r['batch']:>6}{r['s/step']:>9.3f}{r['samples/s']:>11.1f}"
                      f"{r['GFLOP/step']:>11.1f}{r['TFLOP/s']:>9.2f}{mfu:>7}{r['peak GiB']:>9.2f}  {split:<40} "
                      f"{r['peak kind']}; {r['warm-up']}", flush=True)


if __name__ == "__main__":
    main()
