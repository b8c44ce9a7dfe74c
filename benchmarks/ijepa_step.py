"""Our training step against the official I-JEPA step, side by side in one process, on the CPU.

    git clone https://github.com/facebookresearch/ijepa /tmp/ijepa     # read from there, never copied here
    python benchmarks/ijepa_step.py --ijepa /tmp/ijepa --rounds 10 --steps 5 --threads 1 2
    python benchmarks/ijepa_step.py --ijepa /tmp/ijepa --with-blas     # also ours on PyTorch's default products
    python benchmarks/ijepa_step.py --ijepa /tmp/ijepa --profile ours      # where our step's time goes
    python benchmarks/ijepa_step.py --self-check                           # ours only, 1 round x 2 steps

Ours is `jepa_core.method.step.train_step` on `build_jepa` with the `tiny` preset's sizes, masks, batch, AdamW and
EMA. Theirs is the official `VisionTransformer` and `VisionTransformerPredictor` (imported from `--ijepa`) with the
same sizes, stepped the way its src/train.py does: target forward under no_grad, parameter-free layer norm,
`apply_masks` + `repeat_interleave_batch`, context forward, predictor, smooth-L1, backward, AdamW with its four param
groups (same lr, weight decay and betas as ours), EMA `param_k.mul_(m).add_((1 - m) * param_q)`. Both get the same
normalised images and the same masks (ours converted to its lists of index tensors). Our step also does what the
official one does not: the gradient norm and clipping, and a finite check before the update. Ours keeps the target
encoder's output for every patch only at the steps whose diagnostics read it, as the trainer does (1 step in 10 at
`tiny`'s cadences); at the others its last block computes the target patches alone.

For each thread count: warm-up, then rounds of `--steps` steps of each side, the order rotating every round.
Prints each side's median ms/step, and the median of the per-round ratios (official time / ours: > 1 means ours is
faster) with its distribution-free 95% interval (the whole min-max range when there are too few rounds), then the
same from process CPU time: on a machine shared with other work, at one thread, the steadier of the two readings.
Exit 2 when `--ijepa` is not a clone of the official repository.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import os
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parent))
from diagnostics_overhead import median_interval  # noqa: E402

from jepa_core.config import Config  # noqa: E402
from jepa_core.config.presets import preset  # noqa: E402
from jepa_core.method.linear import default_products  # noqa: E402
from jepa_core.method.masks import MaskBatch, MaskSampler  # noqa: E402
from jepa_core.method.model import build_jepa  # noqa: E402
from jepa_core.method.step import StepHooks, StepSettings, TrainState, build_optimizer, train_step  # noqa: E402
from jepa_core.metrics.instrument import GROUPS  # noqa: E402
from jepa_core.metrics.measures import TARGET_TOKEN_GROUPS  # noqa: E402

Step = Callable[[int], None]
MEAN, STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)  # the official transforms' normalisation


@dataclass
class Workload:
    """What both sides train on: the preset's config, normalised images and a cycle of mask batches."""

    cfg: Config
    images: torch.Tensor  # float32 [B, C, H, W]
    masks: list[MaskBatch]


@dataclass
class Timing:
    threads: int
    steps: int  # per side per round
    ours_ms: list[float]  # per round, wall ms/step
    official_ms: list[float]
    ours_cpu: list[float] = field(default_factory=list)  # per round, process CPU ms/step
    official_cpu: list[float] = field(default_factory=list)
    blas_ms: list[float] = field(default_factory=list)  # ours on PyTorch's default products (--with-blas)

    def ratios(self, cpu: bool = False) -> list[float]:
        if cpu:
            return [o / u for o, u in zip(self.official_cpu, self.ours_cpu)]
        return [o / u for o, u in zip(self.official_ms, self.ours_ms)]


def make_workload(preset_name: str, batch: int, seed: int, mask_batches: int = 8) -> Workload:
    cfg = preset(preset_name)
    m, k = cfg.model, cfg.masks
    gen = torch.Generator().manual_seed(seed)
    raw = torch.randint(0, 256, (batch, m.in_chans, m.img_size, m.img_size), dtype=torch.uint8, generator=gen)
    images = (raw.float() / 255.0 - torch.tensor(MEAN)[:, None, None]) / torch.tensor(STD)[:, None, None]
    grid = m.img_size // m.patch_size
    sampler = MaskSampler(grid, grid, k.num_targets, k.target_scale, k.target_aspect, k.context_scale,
                          k.context_aspect, k.min_keep)
    return Workload(cfg, images.contiguous(), [sampler.sample(batch, gen) for _ in range(mask_batches)])


def our_step(w: Workload, seed: int, blas: bool = False) -> Step:
    o = w.cfg.optim
    model = build_jepa(w.cfg.model, seed)
    state = TrainState.plain(model, build_optimizer(model, (o.beta1, o.beta2)), len(w.images))

    # As the trainer runs it: the target encoder's output for every patch only at the steps where a group that reads
    # it is due (1 in 10 on `tiny`); otherwise its last block computes the target patches alone.
    cadences = [getattr(w.cfg.diagnostics, g.cadence_key) for g in GROUPS if g.name in TARGET_TOKEN_GROUPS]
    whole, trimmed = StepHooks(whole_target=True), StepHooks()

    def step(i: int) -> None:
        settings = StepSettings(step=i + 1, lr=o.lr, wd=o.weight_decay, ema_tau=w.cfg.ema.start, loss=o.loss,
                                grad_clip=o.grad_clip)
        reads = any((i + 1) % every == 0 for every in cadences)
        with default_products() if blas else contextlib.nullcontext():
            train_step(w.images, w.masks[i % len(w.masks)], state, settings, whole if reads else trimmed)
    return step


def load_official(root: Path):
    """The official modules, imported from the clone at `root` (its `src` package on sys.path, nothing copied)."""
    if not (root / "src" / "models" / "vision_transformer.py").is_file():
        raise FileNotFoundError(f"--ijepa {root}: no src/models/vision_transformer.py there; clone "
                                "https://github.com/facebookresearch/ijepa and pass its folder")
    sys.path.insert(0, str(root.resolve()))
    from src.masks.utils import apply_masks
    from src.models import vision_transformer as vit
    from src.utils.tensors import repeat_interleave_batch
    return vit, apply_masks, repeat_interleave_batch


def official_modules(vit, m, seed: int) -> tuple[nn.Module, nn.Module, nn.Module]:
    torch.manual_seed(seed)
    norm = partial(nn.LayerNorm, eps=1e-6)
    encoder = vit.VisionTransformer(img_size=[m.img_size], patch_size=m.patch_size, in_chans=m.in_chans,
                                    embed_dim=m.embed_dim, depth=m.depth, num_heads=m.num_heads,
                                    mlp_ratio=m.mlp_ratio, qkv_bias=True, norm_layer=norm)
    predictor = vit.VisionTransformerPredictor(num_patches=encoder.patch_embed.num_patches, embed_dim=m.embed_dim,
                                               predictor_embed_dim=m.pred_dim, depth=m.pred_depth,
                                               num_heads=m.pred_num_heads, mlp_ratio=m.mlp_ratio, qkv_bias=True,
                                               norm_layer=norm)
    target = copy.deepcopy(encoder)
    target.requires_grad_(False)
    return encoder, predictor, target


def official_optimizer(encoder: nn.Module, predictor: nn.Module, o) -> torch.optim.AdamW:
    """Its init_opt's four groups (matrices decay; biases and vectors do not), with our lr, wd and betas."""
    def named(module: nn.Module, decay: bool) -> list[nn.Parameter]:
        return [p for n, p in module.named_parameters() if (("bias" not in n) and (len(p.shape) != 1)) == decay]
    groups = [{"params": named(encoder, True)}, {"params": named(predictor, True)},
              {"params": named(encoder, False), "WD_exclude": True, "weight_decay": 0},
              {"params": named(predictor, False), "WD_exclude": True, "weight_decay": 0}]
    optimizer = torch.optim.AdamW(groups, lr=o.lr, betas=(o.beta1, o.beta2))
    for group in optimizer.param_groups:
        group["weight_decay"] = 0.0 if group.get("WD_exclude") else o.weight_decay
    return optimizer


def official_masks(mb: MaskBatch) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
    """Our [B, Nc] context and [B, K, Nt] targets as its `masks_enc` (one [B, Nc]) and `masks_pred` (K of [B, Nt])."""
    return [mb.context_idx], list(mb.target_idx.unbind(1))


def official_step(w: Workload, root: Path, seed: int) -> Step:
    vit, apply_masks, repeat_interleave_batch = load_official(root)
    encoder, predictor, target = official_modules(vit, w.cfg.model, seed)
    optimizer = official_optimizer(encoder, predictor, w.cfg.optim)
    masks = [official_masks(mb) for mb in w.masks]
    momentum = w.cfg.ema.start

    def step(i: int) -> None:
        masks_enc, masks_pred = masks[i % len(masks)]
        with torch.no_grad():
            h = target(w.images)
            h = F.layer_norm(h, (h.size(-1),))
            h = repeat_interleave_batch(apply_masks(h, masks_pred), len(h), repeat=len(masks_enc))
        z = predictor(encoder(w.images, masks_enc), masks_enc, masks_pred)
        loss = F.smooth_l1_loss(z, h)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        with torch.no_grad():
            for param_q, param_k in zip(encoder.parameters(), target.parameters()):
                param_k.data.mul_(momentum).add_((1.0 - momentum) * param_q.detach().data)
        float(loss.detach())  # its train_step returns float(loss): one read back, as ours reads its finite flag
    return step


def time_steps(step: Step, start: int, count: int) -> tuple[float, float]:
    """(wall, process CPU) ms per step over `count` steps."""
    t0, c0 = time.perf_counter(), time.process_time()
    for i in range(start, start + count):
        step(i)
    return (time.perf_counter() - t0) * 1000.0 / count, (time.process_time() - c0) * 1000.0 / count


def interleave(ours: Step, official: Step | None, threads: int, rounds: int, steps: int, warmup: int,
               blas: Step | None = None) -> Timing:
    torch.set_num_threads(threads)
    timing = Timing(threads, steps, [], [])
    sides = [(ours, timing.ours_ms, timing.ours_cpu)]
    sides += [(official, timing.official_ms, timing.official_cpu)] if official else []
    sides += [(blas, timing.blas_ms, [])] if blas else []
    for step, _, _ in sides if warmup else []:
        time_steps(step, 0, warmup)
    for r in range(rounds):
        for step, wall, cpu in sides[r % len(sides):] + sides[:r % len(sides)]:  # each side first in turn
            ms, cpu_ms = time_steps(step, warmup + r * steps, steps)
            wall.append(ms)
            cpu.append(cpu_ms)
    return timing


def report(t: Timing) -> str:
    ours = statistics.median(t.ours_ms)
    if not t.official_ms:
        return f"threads {t.threads}: ours {ours:.1f} ms/step (median of {len(t.ours_ms)} rounds)"
    ratios = t.ratios()
    low, high = median_interval(ratios)
    line = (f"threads {t.threads}: ours {ours:.1f} ms/step, official {statistics.median(t.official_ms):.1f} "
            f"ms/step; official/ours {statistics.median(ratios):.3f}x (95% CI {low:.3f}-{high:.3f}; rounds "
            f"{min(ratios):.3f}-{max(ratios):.3f}) over {len(ratios)} rounds of {t.steps} steps; process CPU time "
            f"{statistics.median(t.ours_cpu):.1f} vs {statistics.median(t.official_cpu):.1f} ms/step, ratio "
            f"{statistics.median(t.ratios(cpu=True)):.3f}x")
    if t.blas_ms:
        on_blas = [o / b for o, b in zip(t.official_ms, t.blas_ms)]
        low, high = median_interval(on_blas)
        line += (f"\nthreads {t.threads}: ours on PyTorch's default products {statistics.median(t.blas_ms):.1f} "
                 f"ms/step; official/that {statistics.median(on_blas):.3f}x (95% CI {low:.3f}-{high:.3f})")
    return line


def profile(step: Step, threads: int, steps: int, rows: int) -> None:
    torch.set_num_threads(threads)
    time_steps(step, 0, 3)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        time_steps(step, 3, steps)
    print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=rows))


def parse(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--ijepa", type=Path, help="folder of a clone of facebookresearch/ijepa (read, never copied)")
    p.add_argument("--preset", default="tiny")
    p.add_argument("--batch-size", type=int, default=0, help="0: the preset's batch (64 for tiny)")
    p.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    p.add_argument("--rounds", type=int, default=10)
    p.add_argument("--steps", type=int, default=5, help="steps per side per round")
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--profile", choices=["ours", "official"], help="print torch.profiler's top ops instead")
    p.add_argument("--rows", type=int, default=30, help="rows of the profile table")
    p.add_argument("--self-check", action="store_true", help="ours only, 1 round x 2 steps (no clone needed)")
    p.add_argument("--with-blas", action="store_true",
                   help="a third side: ours with every Linear product through F.linear, as the official step's")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    if args.self_check:
        args.rounds, args.steps, args.warmup, args.threads = 1, 2, 1, args.threads[:1]
    elif args.ijepa is None or not (args.ijepa / "src" / "models" / "vision_transformer.py").is_file():
        print(f"ijepa_step: --ijepa {args.ijepa}: not a clone of facebookresearch/ijepa (no "
              "src/models/vision_transformer.py there); git clone https://github.com/facebookresearch/ijepa and "
              "pass its folder", file=sys.stderr)
        return 2
    batch = args.batch_size or preset(args.preset).optim.batch_size
    w = make_workload(args.preset, batch, args.seed)
    ours = our_step(w, args.seed)
    official = None if args.self_check else official_step(w, args.ijepa, args.seed)
    print(f"command: python benchmarks/ijepa_step.py {' '.join(sys.argv[1:] if argv is None else argv)}")
    print(f"preset {args.preset}, batch {batch}, torch {torch.__version__}, load average "
          f"{' '.join(f'{x:.2f}' for x in os.getloadavg())} on {os.cpu_count()} CPUs")
    if args.profile:
        if args.profile == "official" and official is None:
            print("ijepa_step: --profile official needs --ijepa", file=sys.stderr)
            return 2
        profile(ours if args.profile == "ours" else official, args.threads[0], args.steps, args.rows)
        return 0
    blas = our_step(w, args.seed, blas=True) if args.with_blas and official is not None else None
    for threads in args.threads:
        print(report(interleave(ours, official, threads, args.rounds, args.steps, args.warmup, blas)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
