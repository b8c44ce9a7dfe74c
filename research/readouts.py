"""Which tokens the probe reads: the linear probe on a run's target encoder, at random init and at a checkpoint, with
the tokens pooled four ways.

The evaluation every run logs (`linear_probe/val_acc`) reads the mean of all of the target encoder's tokens, as
I-JEPA's does. On the digits that mean fell 9-10 points below random init in runs whose loss fell as it should
(docs/research/real-images.md). This study asks whether the encoder lost what separates the digits or whether the
mean hides it: the probe is fitted on the mean of all tokens, of the foreground tokens only (patches with ink: any
pixel above `INK` of full scale in the centre crop), of the background tokens only, and on a 2x2 grid of pooled
tokens, for the random-init weights (`checkpoints/init.pt`) and a later checkpoint's target encoder.

    python research/readouts.py RUN_DIR [RUN_DIR ...] [--step 800] [--images 2000] [--iterations 20 100 300]

Each run directory needs its checkpoints (the recorded streams in research/data have none): train the runs first,
e.g. `python -m jepa_core.train --preset tiny --set data.dataset='"npz"' --set data.path='"PATH/digits.npz"'
--set optim.steps=800 --set runtime.seed=31 --set logging.runs_dir='"/tmp/runs"' --name tiny_s31`. The images are
the archive's last `--images` (held out or not, the same for both weights); the probe's first half trains it, the
second scores it (`jepa_core.method.probes.linear_probe`, 100 L-BFGS iterations, the default `eval.probe_epochs`).
A last line per run gives the mean of all tokens again with the probe stopped after each of `--iterations`: a probe
cut short (the issue's runs log `eval.probe_epochs=20`) can score trained features lower than random ones that
it fits faster.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from PIL import Image
from torch import Tensor, nn

from jepa_core.data.base import normalize_images
from jepa_core.data.transforms import centre_square_box, crop_to_tensor
from jepa_core.method.model import build_jepa
from jepa_core.method.probes import linear_probe
from jepa_core.run.checkpoint import load_checkpoint
from jepa_core.run.rundir import load_run_config

INK = 0.05  # a patch is foreground when any of its pixels is above this fraction of full scale
READOUTS = ("all", "foreground", "background", "grid2")


def centre_images(images: np.ndarray, size: int) -> Tensor:
    """uint8 [N, 3, size, size] from grey [N, H, W] or RGB [N, H, W, 3] images, resized whole (the evaluation's
    centre crop of a square image)."""
    def one(image: np.ndarray) -> Tensor:  # the evaluation's own crop and resize
        picture = Image.fromarray(image)
        return crop_to_tensor(picture, centre_square_box(*picture.size), size)
    return torch.stack([one(image) for image in images])


def foreground(images: Tensor, patch: int) -> Tensor:
    """bool [N, tokens]: which patches hold a pixel above INK (on the brightest channel)."""
    brightest = images.float().amax(dim=1)  # [N, H, W]
    n, h, w = brightest.shape
    patches = brightest.reshape(n, h // patch, patch, w // patch, patch).amax(dim=(2, 4))
    return patches.reshape(n, -1) > INK * 255


@torch.no_grad()
def pooled(encoder: nn.Module, images: Tensor, ink: Tensor, batch: int = 256) -> dict[str, Tensor]:
    """Each readout's features [N, F] from the encoder's tokens."""
    encoder.eval()
    tokens = torch.cat([encoder(normalize_images(images[i:i + batch])) for i in range(0, len(images), batch)])
    mask = ink.unsqueeze(-1).float()
    side = int(round(tokens.shape[1] ** 0.5))
    grid = tokens.transpose(1, 2).reshape(len(tokens), -1, side, side)
    return {
        "all": tokens.mean(dim=1),
        "foreground": (tokens * mask).sum(dim=1) / mask.sum(dim=1).clamp_min(1),
        "background": (tokens * (1 - mask)).sum(dim=1) / (1 - mask).sum(dim=1).clamp_min(1),
        "grid2": F.adaptive_avg_pool2d(grid, 2).flatten(1),
    }


def probe_accuracy(features: Tensor, labels: Tensor, iterations: int = 100) -> float:
    half = len(labels) // 2
    return linear_probe(features[:half], labels[:half], features[half:], labels[half:], epochs=iterations)[1]


def target_weights(run_dir: Path, step: int | None) -> dict[str, Tensor]:
    """The target encoder's weights at `step` (0: random init, from init.pt)."""
    checkpoints = run_dir / "checkpoints"
    if not step:
        return torch.load(checkpoints / "init.pt", map_location="cpu", weights_only=True)
    state = load_checkpoint(checkpoints / f"step_{step:07d}.pt")["model"]
    prefix = "target_encoder."
    return {key[len(prefix):]: value for key, value in state.items() if key.startswith(prefix)}


def study(run_dir: Path, step: int, count: int,
          iterations: tuple[int, ...] = ()) -> tuple[dict[str, tuple[float, float]], dict[int, tuple[float, float]]]:
    """Each readout's probe accuracy (at random init, at `step`), and the mean of all tokens' at each of
    `iterations` probe iterations."""
    cfg = load_run_config(run_dir)
    archive = np.load(cfg.data.path)
    images = centre_images(archive["images"][-count:], cfg.model.img_size)
    labels = torch.as_tensor(archive["labels"][-count:]).long()
    ink = foreground(images, cfg.model.patch_size)
    model = build_jepa(cfg.model, cfg.runtime.seed)
    found: dict[str, list[float]] = {name: [] for name in READOUTS}
    by_iterations: dict[int, list[float]] = {n: [] for n in iterations}
    for at in (0, step):
        model.target_encoder.load_state_dict(target_weights(run_dir, at))
        features = pooled(model.target_encoder, images, ink)
        for name, readout in features.items():
            found[name].append(probe_accuracy(readout, labels))
        for n in iterations:
            by_iterations[n].append(probe_accuracy(features["all"], labels, n))
    return ({name: (a, b) for name, (a, b) in found.items()}, {n: (a, b) for n, (a, b) in by_iterations.items()})


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("runs", nargs="+", type=Path, help="run directories with checkpoints")
    p.add_argument("--step", type=int, default=800, help="the checkpoint to compare with random init")
    p.add_argument("--images", type=int, default=2000, help="images from the end of the run's archive")
    p.add_argument("--iterations", type=int, nargs="*", default=[20, 100, 300],
                   help="probe iterations to compare on the mean of all tokens")
    args = p.parse_args(argv)
    print(f"probe accuracy, random init -> step {args.step}, on {args.images} images (half fit, half scored)")
    for run in args.runs:
        found, by_iterations = study(run, args.step, args.images, tuple(args.iterations))
        print(f"{run.name:20s} " + "  ".join(f"{name} {a:.3f} -> {b:.3f} ({b - a:+.3f})"
                                             for name, (a, b) in found.items()))
        if by_iterations:
            print(f"{'':20s} all, probe stopped after " + "  ".join(
                f"{n} iterations {a:.3f} -> {b:.3f} ({b - a:+.3f})" for n, (a, b) in by_iterations.items()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
