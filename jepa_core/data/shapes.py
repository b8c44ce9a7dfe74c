"""The built-in procedural "shapes" dataset: labelled images rendered from a seed, held in memory.

Kept in memory (not rendered per index in the workers) on purpose: the recorded runs in data/runs and the rule
thresholds calibrated on them depend on these exact pixels, and the set is small at the sizes it is meant for
(3 KB an image at 32 px: the tiny preset's 65,536 images are 200 MB). A 224-px shapes run (the `base` preset's
data-free default) costs 150 KB an image, so that preset renders fewer images; real 224-px runs read a folder, which
streams. Everything is deterministic per seed and nothing is downloaded.
"""

from __future__ import annotations

import math

import torch

from jepa_core.data.base import DataError, ImageDataset

SHAPE_CLASS_NAMES = ["disc", "square", "triangle", "ring", "plus", "bars", "diamond", "x_cross"]
_RENDER_CHUNK = 4096  # images rendered per vectorised pass; bounds peak memory

def _box_sdf(u: torch.Tensor, v: torch.Tensor, half_u: float, half_v: float) -> torch.Tensor:
    # Chebyshev-style box distance: exact inside, close enough outside for 1-pixel anti-aliasing.
    return torch.maximum(u.abs() - half_u, v.abs() - half_v)


def _shape_sdf(class_id: int, u: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """Signed distance (negative inside) of a unit-radius shape in its own rotated frame."""
    radius = torch.sqrt(u * u + v * v)
    name = SHAPE_CLASS_NAMES[class_id]
    if name == "disc":
        return radius - 1.0
    if name == "ring":
        return (radius - 0.72).abs() - 0.28
    if name == "square":
        return _box_sdf(u, v, 0.8, 0.8)
    if name == "diamond":
        return (u.abs() + v.abs() - 1.0) / math.sqrt(2.0)
    if name == "triangle":
        # Equilateral, centroid at the origin, inradius 0.58 (circumradius 1.16); outward edge normals at
        # 90, 210 and 330 degrees (v grows downwards, so the apex points up in the image).
        dist = None
        for angle in (math.pi / 2, math.pi / 2 + 2 * math.pi / 3, math.pi / 2 + 4 * math.pi / 3):
            edge = u * math.cos(angle) + v * math.sin(angle) - 0.58
            dist = edge if dist is None else torch.maximum(dist, edge)
        return dist
    if name in ("plus", "x_cross"):  # the X is the plus drawn at a 45 degree base angle
        return torch.minimum(_box_sdf(u, v, 1.0, 0.28), _box_sdf(u, v, 0.28, 1.0))
    if name == "bars":  # two horizontal bars
        nearest_bar = torch.minimum((v - 0.5).abs(), (v + 0.5).abs()) - 0.25
        return torch.maximum(u.abs() - 0.95, nearest_bar)
    raise AssertionError(f"no renderer for shape class {name!r}")


# Base rotation and jitter (radians) per class. Square/diamond and plus/X differ only by orientation, so
# those classes get a small jitter instead of a full turn; rotation-symmetric shapes need none.
_ROTATION: dict[str, tuple[float, float]] = {
    "disc": (0.0, 0.0), "ring": (0.0, 0.0), "square": (0.0, math.radians(15)),
    "diamond": (0.0, math.radians(15)), "triangle": (0.0, math.pi), "plus": (0.0, math.radians(15)),
    "x_cross": (math.pi / 4, math.radians(15)), "bars": (0.0, math.radians(15)),
}


# Shape radius as a fraction of half the image side. Large shapes span many patches, so predicting a masked block
# needs the shape's geometry: on `tiny`, radii of 0.35-0.7 left the probe gain at about 5 points in 600 steps.
SHAPE_RADIUS = (0.35, 0.7)


def make_shapes(n: int, img_size: int, num_classes: int, seed: int) -> ImageDataset:
    """`n` labelled shape images (balanced classes), uint8 [n, 3, img_size, img_size], deterministic per seed."""
    if not 1 <= num_classes <= len(SHAPE_CLASS_NAMES):
        raise DataError(f"data.num_classes must be between 1 and {len(SHAPE_CLASS_NAMES)} for the shapes "
                        f"dataset, got {num_classes}")
    if img_size < 4:
        raise DataError(f"data.img_size must be at least 4, got {img_size}")
    if n < 0:
        raise DataError(f"number of images must be >= 0, got {n}")
    gen = torch.Generator().manual_seed(int(seed))
    # Balanced: class i appears floor/ceil(n / num_classes) times, in a seeded random order.
    labels = (torch.arange(n) % num_classes)[torch.randperm(n, generator=gen)]
    low, high = SHAPE_RADIUS
    radius = low + (high - low) * torch.rand(n, generator=gen)
    # Centre keeps the unit-radius footprint inside the image ([-1, 1] coordinates).
    centre = (torch.rand(n, 2, generator=gen) * 2 - 1) * (1 - radius).unsqueeze(1)
    base = torch.tensor([_ROTATION[name][0] for name in SHAPE_CLASS_NAMES])[labels]
    jitter = torch.tensor([_ROTATION[name][1] for name in SHAPE_CLASS_NAMES])[labels]
    angle = base + (torch.rand(n, generator=gen) * 2 - 1) * jitter
    background = torch.rand(n, 3, generator=gen)
    foreground = torch.rand(n, 3, generator=gen)
    # Guarantee visible contrast: a colour too close to the background is replaced by its hue opposite.
    too_close = (foreground - background).abs().mean(dim=1) < 0.25
    foreground[too_close] = (background[too_close] + 0.5) % 1.0

    coords = (torch.arange(img_size, dtype=torch.float32) + 0.5) / img_size * 2 - 1
    grid_y, grid_x = torch.meshgrid(coords, coords, indexing="ij")
    images = torch.empty(n, 3, img_size, img_size, dtype=torch.uint8)
    for start in range(0, n, _RENDER_CHUNK):
        chunk = slice(start, min(n, start + _RENDER_CHUNK))
        alpha = _render_alpha(labels[chunk], radius[chunk], centre[chunk], angle[chunk], grid_x, grid_y)
        # In-place compositing: bg + (fg - bg) * alpha + noise, then quantise (keeps 20k images ~1-2 s).
        pixels = torch.randn((alpha.shape[0], 3, img_size, img_size), generator=gen).mul_(0.04 * 255)
        pixels.addcmul_(alpha.unsqueeze(1), (foreground[chunk] - background[chunk])[:, :, None, None] * 255)
        pixels.add_(background[chunk, :, None, None] * 255)
        images[chunk] = pixels.clamp_(0, 255).round_().to(torch.uint8)
    return ImageDataset(images, labels.to(torch.int64), SHAPE_CLASS_NAMES[:num_classes])


def _render_alpha(labels: torch.Tensor, radius: torch.Tensor, centre: torch.Tensor, angle: torch.Tensor,
                  grid_x: torch.Tensor, grid_y: torch.Tensor) -> torch.Tensor:
    """Anti-aliased coverage [c, H, W] in [0, 1] for a chunk of shapes, one class at a time."""
    img_size = grid_x.shape[0]
    alpha = torch.zeros(labels.shape[0], img_size, img_size)
    for class_id in labels.unique().tolist():
        members = (labels == class_id).nonzero().squeeze(1)
        r = radius[members, None, None]
        dx = grid_x - centre[members, 0, None, None]
        dy = grid_y - centre[members, 1, None, None]
        cos, sin = torch.cos(angle[members])[:, None, None], torch.sin(angle[members])[:, None, None]
        u = (cos * dx + sin * dy) / r
        v = (-sin * dx + cos * dy) / r
        # Distance in pixels = local distance * radius * pixels per unit; a 1-pixel ramp anti-aliases edges.
        dist_px = _shape_sdf(class_id, u, v) * r * (img_size / 2)
        alpha[members] = (0.5 - dist_px).clamp(0, 1)
    return alpha
