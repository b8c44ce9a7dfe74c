"""A plain-PyTorch JEPA training loop in the shape of the published I-JEPA recipe, watched by jepa_core.monitor.

Separate context encoder, predictor and EMA target encoder; masks as lists of index tensors (one context block, four
target blocks); layer-normed targets; smooth-L1 loss; its own warm-up-cosine lr, cosine weight decay and linear EMA
schedules. Nothing of jepa_core's trainer, step or model is used: the lines marked `# [monitor]` are all it takes to
watch it. Run `python examples/own_loop.py --steps 300`; the run directory is runs/<name> under the current folder.
"""

import argparse
import math
import os
import time

import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

from jepa_core.data.shapes import make_shapes  # the built-in images; any (images, labels) would do
from jepa_core.monitor import JEPAMonitor  # [monitor]


def apply_masks(x, masks):  # [B, N, D], list of [B, K] index tensors -> [len(masks) * B, K, D]
    return torch.cat([torch.gather(x, 1, m.unsqueeze(-1).expand(-1, -1, x.size(-1))) for m in masks])


class Encoder(nn.Module):
    def __init__(self, img=32, patch=4, dim=64, depth=2, heads=4):
        super().__init__()
        self.patch_embed = nn.Conv2d(3, dim, patch, patch)
        self.pos = nn.Parameter(torch.randn(1, (img // patch) ** 2, dim) * 0.02)
        layer = nn.TransformerEncoderLayer(dim, heads, 4 * dim, dropout=0.0, batch_first=True, norm_first=True)
        self.blocks, self.norm = nn.TransformerEncoder(layer, depth, enable_nested_tensor=False), nn.LayerNorm(dim)

    def forward(self, x, masks=None):
        x = self.patch_embed(x).flatten(2).transpose(1, 2) + self.pos
        if masks is not None:
            x = apply_masks(x, masks)
        return self.norm(self.blocks(x))


class Predictor(nn.Module):
    def __init__(self, num_patches=64, dim=64, pred_dim=32, depth=1, heads=4):
        super().__init__()
        self.embed, self.proj = nn.Linear(dim, pred_dim), nn.Linear(pred_dim, dim)
        self.mask_token = nn.Parameter(torch.zeros(1, 1, pred_dim))
        self.pos = nn.Parameter(torch.randn(1, num_patches, pred_dim) * 0.02)
        layer = nn.TransformerEncoderLayer(pred_dim, heads, 4 * pred_dim, dropout=0.0, batch_first=True,
                                           norm_first=True)
        self.blocks, self.norm = nn.TransformerEncoder(layer, depth, enable_nested_tensor=False), nn.LayerNorm(pred_dim)

    def forward(self, context, masks_enc, masks_pred):
        batch = len(context) // len(masks_enc)
        x = self.embed(context) + apply_masks(self.pos.expand(batch, -1, -1), masks_enc)
        x = x.repeat(len(masks_pred), 1, 1)  # one copy of the context per target block
        targets = apply_masks(self.pos.expand(batch, -1, -1), masks_pred).repeat(len(masks_enc), 1, 1)
        x = self.norm(self.blocks(torch.cat([x, self.mask_token + targets], dim=1)))
        return self.proj(x[:, -targets.size(1):])


def block(grid, scale, gen):  # a random rectangle of about `scale` of the grid, as a set of patch indices
    area = scale * grid * grid
    h = max(1, min(grid, round(math.sqrt(area))))
    w = max(1, min(grid, round(area / h)))
    top, left = (torch.randint(0, grid - h + 1, (1,), generator=gen).item(),
                 torch.randint(0, grid - w + 1, (1,), generator=gen).item())
    return {(top + i) * grid + left + j for i in range(h) for j in range(w)}


def sample_masks(batch, grid, gen, num_targets=4):
    """I-JEPA's collator in miniature: per image 4 target blocks and one context block without them, every mask
    cut to the shortest in the batch so that each is one [B, K] tensor."""
    enc, pred = [], [[] for _ in range(num_targets)]
    for _ in range(batch):
        targets = [sorted(block(grid, 0.15 + 0.05 * torch.rand(1, generator=gen).item(), gen))
                   for _ in range(num_targets)]
        context = block(grid, 0.85 + 0.15 * torch.rand(1, generator=gen).item(), gen) - set().union(*targets)
        enc.append(sorted(context) or [0])
        for k, t in enumerate(targets):
            pred[k].append(t)
    keep = min(len(t) for masks in pred for t in masks)  # every target block as long as the shortest
    cut = lambda masks, n: torch.tensor([m[:n] for m in masks])  # noqa: E731
    return [cut(enc, min(map(len, enc)))], [cut(m, keep) for m in pred]


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--batch-size", type=int, default=32, help="per process")
    p.add_argument("--name", default=time.strftime("own-loop-%Y%m%d-%H%M%S"))
    p.add_argument("--ema-zero-from", type=int, default=0, help="plant a fault: EMA momentum 0 from this step")
    p.add_argument("--no-monitor", action="store_true", help="train unwatched (the overhead benchmark's baseline)")
    p.add_argument("--default-cadences", action="store_true", help="the monitor's default cadences, no evaluation")
    args = p.parse_args(argv)
    rank, world = int(os.environ.get("RANK", 0)), int(os.environ.get("WORLD_SIZE", 1))
    if world > 1:  # torchrun: data-parallel on CPU; the monitor writes from rank 0 only
        torch.distributed.init_process_group("gloo")
    torch.manual_seed(0)
    train, heldout = make_shapes(4096, 32, 6, seed=1), make_shapes(512, 32, 6, seed=2)
    def normalise(u8):  # each image to zero mean, unit std per channel (the shapes' colours are random)
        x = u8.float() / 255
        return (x - x.mean(dim=(2, 3), keepdim=True)) / (x.std(dim=(2, 3), keepdim=True) + 1e-3)

    encoder, predictor = Encoder(), Predictor()
    target_encoder = Encoder()
    target_encoder.load_state_dict(encoder.state_dict())
    target_encoder.requires_grad_(False)
    optimizer = torch.optim.AdamW([*encoder.parameters(), *predictor.parameters()], lr=0.0)
    ddp = (lambda m: DDP(m)) if world > 1 else (lambda m: m)  # noqa: E731
    train_encoder, train_predictor = ddp(encoder), ddp(predictor)
    warmup, peak, final = max(1, args.steps // 10), 1e-3, 1e-5
    lr_at = lambda s: peak * s / warmup if s < warmup else final + 0.5 * (peak - final) * (  # noqa: E731
        1 + math.cos(math.pi * (s - warmup) / max(1, args.steps - warmup)))
    wd_at = lambda s: 0.04 + 0.5 * (0.4 - 0.04) * (1 - math.cos(math.pi * s / args.steps))  # noqa: E731
    ema_at = lambda s: 0.0 if args.ema_zero_from and s >= args.ema_zero_from else 0.996 + 0.004 * s / args.steps  # noqa: E731
    dense = {"basic_every_steps": 10, "representation_every_steps": 10, "fixed_batch_every_steps": 10,
             "mask_check_every_steps": 10, "covariance_every_steps": 20, "param_distance_every_steps": 20,
             "weights_health_every_steps": 50, "eval_every_steps": 100}  # a 300-step run: read often
    monitor = JEPAMonitor(  # [monitor]
        f"runs/{args.name}", encoder, target_encoder, predictor, total_steps=args.steps, input_shape=(3, 32, 32),
        optim={"lr": peak, "start_lr": 0.0, "final_lr": final, "warmup_steps": warmup,
               "batch_size": args.batch_size * world},
        diagnostics={} if args.default_cadences else dense,
        eval_data=None if args.default_cadences else (normalise(heldout.images), heldout.labels),
        enabled=not args.no_monitor)
    gen = torch.Generator().manual_seed(rank)  # each process its own batches
    started = time.perf_counter()
    with monitor:  # [monitor]
        for step in range(args.steps):
            idx = torch.randint(0, len(train), (args.batch_size,), generator=gen)
            imgs = normalise(train.images[idx])
            masks_enc, masks_pred = sample_masks(args.batch_size, 8, gen)
            lr, wd, m = lr_at(step), wd_at(step), ema_at(step)
            for group in optimizer.param_groups:
                group["lr"], group["weight_decay"] = lr, wd
            with torch.no_grad():
                h_all = F.layer_norm(target_encoder(imgs), (64,))
                h = apply_masks(h_all, masks_pred).repeat(len(masks_enc), 1, 1)
            z = train_predictor(train_encoder(imgs, masks_enc), masks_enc, masks_pred)
            loss = F.smooth_l1_loss(z, h)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            monitor.after_backward(step + 1)  # [monitor]
            optimizer.step()
            with torch.no_grad():
                for q, k in zip(encoder.parameters(), target_encoder.parameters()):
                    k.mul_(m).add_(q.detach(), alpha=1 - m)
            monitor.step(step + 1, loss=loss, pred=z, target=h, target_tokens=h_all, context_masks=masks_enc,  # [monitor]
                         target_masks=masks_pred, lr=lr, wd=wd, ema_momentum=m)  # [monitor]
    seconds = time.perf_counter() - started
    if rank == 0 and monitor.enabled:
        print(f"{monitor.close()} at step {monitor.last_step}: runs/{args.name} ({seconds:.1f} s)")
    if world > 1:
        torch.distributed.barrier()  # every rank leaves together: none tears down gloo while rank 0 still writes
        torch.distributed.destroy_process_group()
    return seconds


if __name__ == "__main__":
    main()
