"""`jepa check`: a pre-flight of a run without training it (design §3).

It validates the config; samples 1,000 mask batches (those of the run's first 1,000 steps, in the data workers)
and reports context and target sizes and any overlap; says at which cadences the early-warning rules read their
signals; builds the model and counts its parameters; times a few loader batches and a few training steps on the
chosen device; and prints the peak memory of a step, the projected wall time of the run and which side, loader or
model, is the bottleneck. Nothing is written to disk.

Exit 0 when the run looks feasible, 1 with the reasons when it does not (the loader delivers fewer images/s than
the step consumes, a step does not fit the device's memory, masks overlap without the leak fault), 2 on bad input.
"""

from __future__ import annotations

import argparse
import resource
import sys
import time
from dataclasses import dataclass, field

import psutil
import torch
from torch.utils.data import DataLoader, Dataset

from jepa_core.common.console import format_duration, terminal_safe
from jepa_core.common.seeds import mask_generator
from jepa_core.config import Config, ConfigError
from jepa_core.data import (
    Batch,
    DataError,
    datasets_for,
    mask_sampler_for,
    normalize_images,
    train_feed_for,
)
from jepa_core.method.masks import (
    MaskBatch,
    MaskSampler,
    leak_targets,
    overlap_fraction,
)
from jepa_core.method.model import JEPA, build_jepa, param_counts
from jepa_core.method.runtime import (
    autocast_for,
    compile_module,
    resolve_device,
    set_thread_count,
)
from jepa_core.method.step import (OnlineNetwork, StepHooks, StepSettings, TrainState, build_optimizer,
                                   train_step)
from jepa_core.run.evaluation import EVAL_BATCH_SIZE, heldout_features
from jepa_core.train import add_config_arguments, config_from_args

MEMORY_HEADROOM = 0.95  # a step peaking above this share of the device's memory will not survive fragmentation

WHOLE_TARGET = StepHooks(whole_target=True)


class MaskStats(Dataset):
    """Item s: (context patches, target patches per block, blocks, worst overlap) of step s's masks, computed in a
    worker exactly as the training batches draw them (same generator, same leak fault)."""

    def __init__(self, cfg: Config, sampler: MaskSampler, batch_size: int) -> None:
        self.seed, self.sampler, self.batch_size = cfg.runtime.seed, sampler, batch_size
        self.leak, self.leak_start = cfg.faults.mask_leak_fraction, cfg.faults.start_step

    def __len__(self) -> int:
        return 1 << 30

    def __getitem__(self, step: int) -> tuple[int, int, int, float]:
        gen = mask_generator(self.seed, step, 0)
        masks = self.sampler.sample(self.batch_size, gen)
        if self.leak > 0 and step >= self.leak_start:
            masks = leak_targets(masks, self.leak, gen)
        overlap = float(overlap_fraction(masks, self.sampler.num_patches).max())
        return masks.context_idx.shape[1], masks.target_idx.shape[2], masks.target_idx.shape[1], overlap


@dataclass
class Report:
    lines: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    def say(self, text: str) -> None:
        self.lines.append(text)
        print(terminal_safe(text), flush=True)


def _rate(images_per_second: float) -> str:
    return f"{images_per_second:,.0f}" if images_per_second >= 10 else f"{images_per_second:.2g}"


def _spread(values: list[int]) -> str:
    return f"{min(values)}-{max(values)} (mean {sum(values) / len(values):.1f})"


def check_masks(cfg: Config, batches: int, report: Report) -> None:
    sampler = mask_sampler_for(cfg)
    workers = min(cfg.data.num_workers, batches)
    loader = DataLoader(MaskStats(cfg, sampler, cfg.optim.batch_size), batch_size=None, sampler=range(batches),
                        num_workers=workers)
    rows = list(loader)
    context, target, blocks = [r[0] for r in rows], [r[1] for r in rows], {r[2] for r in rows}
    overlapping = sum(1 for r in rows if r[3] > 0)
    grid = f"{sampler.grid_h}x{sampler.grid_w}"
    report.say(f"masks: {batches:,} batches of {cfg.optim.batch_size} on the {grid} patch grid: context "
               f"{_spread(context)} patches of {sampler.num_patches}, {'/'.join(map(str, sorted(blocks)))} target "
               f"blocks of {_spread(target)} patches; {overlapping} batches with a target patch in the context")
    if overlapping and cfg.faults.mask_leak_fraction == 0:
        report.problems.append(f"{overlapping} of {batches} mask batches let target patches into the context")
    elif overlapping:
        report.say("  (faults.mask_leak_fraction is on: the overlap is the injected fault)")


# In the detection library every harmful collapse and EMA fault was caught where the fixed probe batch was read at
# most 5 basic readings apart. At 10 apart (`batch32`: every 250 steps, basic readings every 25) a collapse that
# continued the run's first descent went unseen until its per-batch spread's pace, late in the run, gave it away
# just before its harm (research/detection.py, the `batch32` and `batch32_fb` settings). Readings, not steps: the
# rules count time in the run's own units.
FIXED_BATCH_SEEN_READINGS = 5


def check_early_warning(cfg: Config, report: Report) -> None:
    """Which cadences the early-warning rules read, and a note where one is too sparse for them to see in time."""
    d = cfg.diagnostics
    report.say(f"early warning: per-batch signals every {d.representation_every_steps} steps, the fixed probe batch "
               f"every {d.fixed_batch_every_steps}, rank every {d.covariance_every_steps}, parameter distance every "
               f"{d.param_distance_every_steps}, masks every {d.mask_check_every_steps}")
    if d.fixed_batch_every_steps > FIXED_BATCH_SEEN_READINGS * d.basic_every_steps:
        report.say(f"  note: the fixed probe batch every {d.fixed_batch_every_steps} steps lets a collapse or a "
                   "frozen or copied target do its harm between two readings; the rules caught them all at "
                   f"{FIXED_BATCH_SEEN_READINGS} basic readings apart or less, here "
                   f"{FIXED_BATCH_SEEN_READINGS * d.basic_every_steps} steps (diagnostics.fixed_batch_every_steps: two "
                   "forwards of 8 images a reading)")


def check_model(cfg: Config, report: Report) -> JEPA:
    m = cfg.model
    model = build_jepa(m, cfg.runtime.seed)
    counts = param_counts(model)
    shown = ", ".join(f"{k.removeprefix('params/')} {v / 1e6:.2f}M" for k, v in counts.items())
    report.say(f"model: ViT {m.embed_dim}x{m.depth} (patch {m.patch_size}, {m.img_size} px) + predictor "
               f"{m.pred_dim}x{m.pred_depth}; parameters: {shown}")
    return model


def check_loader(cfg: Config, train, batches: int, report: Report) -> tuple[list[Batch], float]:
    """(the batches read, images/s the loader delivers once running); workers start before the clock does."""
    feed = train_feed_for(cfg, train)
    try:
        first = feed.get(0)  # starts the workers (and fills their prefetch queue): not part of the rate
        t0 = time.perf_counter()
        read = [first] + [feed.get(s) for s in range(1, batches + 1)]
        seconds = time.perf_counter() - t0
    finally:
        feed.close()
    rate = batches * cfg.optim.batch_size / seconds
    skipped = sum(len(b.skipped) for b in read)
    where = (f"{cfg.data.num_workers} workers" if cfg.data.num_workers
             else "in the training process (data.num_workers = 0)")
    report.say(f"loader: {batches} batches of {cfg.optim.batch_size} in {seconds:.2f} s: {_rate(rate)} images/s, "
               f"{where}" + (f"; {skipped} unreadable images skipped" if skipped else ""))
    return read, rate


def check_steps(cfg: Config, model: JEPA, batches: list[Batch], steps: int, warmup: int, report: Report,
                ) -> tuple[float, float] | None:
    """(seconds per step, peak bytes) of the training step on the configured device, or None when it fails."""
    device = resolve_device(cfg.runtime.device)
    cuda = device.type == "cuda"
    model = model.to(device)
    optimizer = build_optimizer(model, (cfg.optim.beta1, cfg.optim.beta2))
    online, target = OnlineNetwork(model), model.target_encoder
    if cfg.runtime.compile:
        online, target = compile_module(online), compile_module(target)
    o = cfg.optim
    state = TrainState(model, optimizer, online, target, o.batch_size,
                       autocast=lambda: autocast_for(device, cfg.runtime.precision))

    def one(i: int) -> None:
        batch = batches[i % len(batches)]
        images = normalize_images(batch.images.to(device, non_blocking=True))
        masks = MaskBatch(batch.masks.context_idx.to(device), batch.masks.target_idx.to(device))
        # As at a diagnostics reading, the costlier step: the target encoder's output for every patch is kept.
        train_step(images, masks, state, StepSettings(step=i + 1, lr=o.lr, wd=o.weight_decay, ema_tau=cfg.ema.start,
                                                      loss=o.loss, grad_clip=o.grad_clip), WHOLE_TARGET)

    try:
        for i in range(warmup):  # allocator warm-up, cuDNN/compile choices: not part of the rate
            one(i)
        if cuda:
            torch.cuda.synchronize(device)
            torch.cuda.reset_peak_memory_stats(device)
        t0 = time.perf_counter()
        for i in range(warmup, warmup + steps):
            one(i)
        if cuda:
            torch.cuda.synchronize(device)
    except torch.cuda.OutOfMemoryError as exc:
        report.problems.append(f"a step of batch {o.batch_size} does not fit {device}'s memory ({exc}); lower "
                               "optim.batch_size or the model size")
        return None
    seconds = (time.perf_counter() - t0) / steps
    if cuda:
        peak, capacity = torch.cuda.max_memory_allocated(device), torch.cuda.get_device_properties(device).total_memory
        kind = "CUDA allocated"
    else:
        scale = 1 if sys.platform == "darwin" else 1024  # ru_maxrss: bytes on macOS, KiB on Linux
        peak, capacity = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * scale, psutil.virtual_memory().total
        kind = "process peak RSS"
    precision = "bf16" if (cfg.runtime.precision == "auto" and cuda) or cfg.runtime.precision == "bf16" else "fp32"
    report.say(f"step ({device}, {precision}{', compiled' if cfg.runtime.compile else ''}): {seconds:.3f} s/step "
               f"over {steps} steps, {_rate(o.batch_size / seconds)} images/s; peak memory {peak / 2**30:.2f} GiB of "
               f"{capacity / 2**30:.1f} GiB ({kind})")
    if peak > MEMORY_HEADROOM * capacity:
        report.problems.append(f"peak memory {peak / 2**30:.1f} GiB is above {MEMORY_HEADROOM:.0%} of the "
                               f"{capacity / 2**30:.1f} GiB available; lower optim.batch_size")
    return seconds, peak


def evaluations(cfg: Config) -> int:
    """How many evaluations a run makes: every eval_every_steps, at its last step, and at step 0 if asked (counted,
    not listed: a run of 2**63 steps is a typo to report, not a set to build)."""
    total, every = cfg.optim.steps, cfg.diagnostics.eval_every_steps
    return total // every + (total % every != 0) + bool(cfg.eval.at_start)


def project(cfg: Config, model: JEPA, heldout, step_seconds: float, loader_rate: float, report: Report) -> None:
    o = cfg.optim
    model_rate = o.batch_size / step_seconds
    data_seconds = o.batch_size / loader_rate
    # With workers the loader runs beside the step and the slower of the two sets the pace; without, they alternate.
    per_step = max(step_seconds, data_seconds) if cfg.data.num_workers else step_seconds + data_seconds
    device = resolve_device(cfg.runtime.device)
    sample = torch.arange(min(len(heldout), EVAL_BATCH_SIZE))
    t0 = time.perf_counter()
    heldout_features(model, heldout, sample, cfg, device)
    eval_seconds = (time.perf_counter() - t0) / max(1, len(sample)) * len(heldout) * evaluations(cfg)
    report.say(f"projected: {o.steps:,} steps x {per_step:.3f} s = {format_duration(o.steps * per_step)} of training, "
               f"+ about {format_duration(eval_seconds)} for {evaluations(cfg)} evaluations of {len(heldout):,} held-out "
               "images (features only; probe fits, diagnostics and checkpoints not included)")
    if loader_rate < model_rate:
        report.say(f"bottleneck: the loader ({_rate(loader_rate)} images/s; the model could take {_rate(model_rate)})")
        fix = ("raise data.num_workers" if cfg.data.num_workers else "set data.num_workers (batches are built in the "
               "training process now)")
        report.problems.append(f"the loader delivers {_rate(loader_rate)} images/s, fewer than the {_rate(model_rate)} "
                               f"images/s the step consumes: the device would wait for data; {fix}")
    else:
        report.say(f"bottleneck: the model ({_rate(model_rate)} images/s; the loader can deliver {_rate(loader_rate)})")


def run_check(cfg: Config, mask_batches: int = 1000, steps: int = 5, loader_batches: int = 8) -> Report:
    report = Report()
    d = cfg.data
    train, heldout = datasets_for(cfg)
    report.say(f"config: valid; data {d.dataset}{' ' + d.path if d.path else ''}: {len(train):,} training and "
               f"{len(heldout):,} held-out images at {cfg.model.img_size} px; {cfg.optim.steps:,} steps of batch "
               f"{cfg.optim.batch_size}")
    check_masks(cfg, mask_batches, report)
    check_early_warning(cfg, report)
    model = check_model(cfg, report)
    read, loader_rate = check_loader(cfg, train, loader_batches, report)  # the steps reuse them in turn
    timed = check_steps(cfg, model, read, steps, warmup=3 if cfg.runtime.compile else 1, report=report)
    if timed is not None:
        project(cfg, model, heldout, timed[0], loader_rate, report)
    report.say("verdict: " + ("feasible" if not report.problems else "not feasible"))
    for problem in report.problems:
        report.say(f"  - {problem}")
    return report


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="jepa check", description="Pre-flight a run without training it: config, "
                                "masks, model size, loader and step speed, memory, projected time, bottleneck.")
    add_config_arguments(p)
    p.add_argument("--steps", type=int, default=5, help="timed training steps (after one warm-up step)")
    p.add_argument("--loader-batches", type=int, default=8, help="timed loader batches (after the first)")
    p.add_argument("--mask-batches", type=int, default=1000, help="mask batches sampled and checked")
    return p


def check_main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    for name in ("steps", "loader_batches", "mask_batches"):
        if getattr(args, name) < 1:
            print(f"error: --{name.replace('_', '-')} must be at least 1", file=sys.stderr)
            return 2
    try:
        cfg = config_from_args(args)
        set_thread_count(cfg.runtime.num_threads)  # this process is the check: the config's thread count is its own
        report = run_check(cfg, args.mask_batches, args.steps, args.loader_batches)
    except (ConfigError, DataError) as exc:
        print(f"error: {terminal_safe(str(exc))}", file=sys.stderr)
        return 2
    return 1 if report.problems else 0


if __name__ == "__main__":
    sys.exit(check_main())
