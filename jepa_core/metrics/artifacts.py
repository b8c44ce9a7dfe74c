"""Image artifacts of a run (design §4 `artifacts/`): PNGs with a small metadata JSON beside each.

`mask_overlay_grid` draws I-JEPA block masks over their images (context one colour, targets another, patches in
both, i.e. a mask leak, a third), `retrieval_grid` shows nearest-neighbour retrieval. Both return (H, W, 3) uint8
arrays that `save_png_with_meta` writes atomically, so a notebook following the run never sees half a file.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image

from jepa_core.common.atomic import atomic_file, atomic_write
from jepa_core.metrics.stream import encode_row

CONTEXT_RGB = np.array([40, 200, 90], dtype=np.float32)  # green
TARGET_RGB = np.array([240, 120, 20], dtype=np.float32)  # orange
LEAK_RGB = np.array([230, 20, 200], dtype=np.float32)  # magenta: a patch both in context and target
TINT_ALPHA = 0.5
GAP = 2  # pixels between tiles
BACKGROUND = 255
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")


def _as_numpy(array: Any) -> np.ndarray:
    if hasattr(array, "detach"):  # torch tensor
        array = array.detach().cpu().numpy()
    return np.asarray(array)


def _check_images(images: Any, what: str, leading_dims: int) -> np.ndarray:
    array = _as_numpy(images)
    if array.dtype != np.uint8:
        raise ValueError(f"{what}: expected uint8 images, got dtype {array.dtype} (convert to 0..255 first)")
    if array.ndim != leading_dims + 3 or array.shape[leading_dims] != 3:
        raise ValueError(f"{what}: expected shape [{', '.join(['N'] * leading_dims)}, 3, H, W], got {array.shape}")
    return array


def auto_scale(height: int, width: int, target: int = 128) -> int:
    """Integer nearest-neighbour upscale so the longer side is about `target` pixels (a 32x32 image -> x4)."""
    return int(min(8, max(1, round(target / max(height, width)))))


def _upscale(image_hwc: np.ndarray, scale: int) -> np.ndarray:
    return image_hwc.repeat(scale, axis=0).repeat(scale, axis=1) if scale > 1 else image_hwc


def _tile_grid(rows: list[list[np.ndarray]], gap: int = GAP) -> np.ndarray:
    """Paste equally sized (h, w, 3) tiles into a grid with `gap` pixel gutters."""
    height, width = rows[0][0].shape[:2]
    columns = max(len(r) for r in rows)
    canvas = np.full((len(rows) * (height + gap) - gap, columns * (width + gap) - gap, 3), BACKGROUND, np.uint8)
    for r, row in enumerate(rows):
        for c, tile in enumerate(row):
            top, left = r * (height + gap), c * (width + gap)
            canvas[top:top + height, left:left + width] = tile
    return canvas


def _patch_mask(indices: np.ndarray, grid_h: int, grid_w: int, what: str) -> np.ndarray:
    flat = np.asarray(indices, dtype=np.int64).ravel()
    if flat.size and (flat.min() < 0 or flat.max() >= grid_h * grid_w):
        raise ValueError(f"{what}: patch index out of range 0..{grid_h * grid_w - 1}")
    mask = np.zeros(grid_h * grid_w, dtype=bool)
    mask[flat] = True
    return mask.reshape(grid_h, grid_w)


def mask_overlay_grid(images_uint8: Any, context_idx: Any, target_idx: Any, patch_size: int,
                      max_images: int = 8, scale: int | None = None) -> np.ndarray:
    """Top row: the images; bottom row: context patches tinted green, target patches orange, both magenta.

    images_uint8 [B, 3, H, W]; context_idx [B, Nc] and target_idx [B, K, Nt] are row-major patch indices
    (per-image sequences of different lengths are accepted too).
    """
    images = _check_images(images_uint8, "mask_overlay_grid images", 1)
    count, _, height, width = images.shape
    if patch_size <= 0 or height % patch_size or width % patch_size:
        raise ValueError(f"mask_overlay_grid: patch_size {patch_size} does not divide the image size {height}x{width}")
    if len(context_idx) < count or len(target_idx) < count:
        raise ValueError("mask_overlay_grid: need context and target indices for every image")
    grid_h, grid_w = height // patch_size, width // patch_size
    scale = scale or auto_scale(height, width)
    originals, overlays = [], []
    for b in range(min(count, max_images)):
        image = images[b].transpose(1, 2, 0)
        context = _patch_mask(_as_numpy(context_idx[b]), grid_h, grid_w, f"context_idx[{b}]")
        target = _patch_mask(_as_numpy(target_idx[b]), grid_h, grid_w, f"target_idx[{b}]")
        tint = np.zeros((grid_h, grid_w, 3), np.float32)
        alpha = np.zeros((grid_h, grid_w, 1), np.float32)
        for mask, colour in ((context & ~target, CONTEXT_RGB), (target & ~context, TARGET_RGB),
                             (context & target, LEAK_RGB)):
            tint[mask] = colour
            alpha[mask] = TINT_ALPHA
        tint = _upscale(tint, patch_size)
        alpha = _upscale(alpha, patch_size)
        blended = image.astype(np.float32) * (1 - alpha) + tint * alpha
        # Patches in neither set are dimmed so the masked-out area reads as "not seen".
        dim = _upscale((~(context | target))[..., None].astype(np.float32), patch_size)
        blended *= 1 - 0.5 * dim
        originals.append(_upscale(image, scale))
        overlays.append(_upscale(np.clip(blended, 0, 255).astype(np.uint8), scale))
    return _tile_grid([originals, overlays])


def retrieval_grid(query_images: Any, neighbour_images: Any, correct: Any = None,
                   scale: int | None = None) -> np.ndarray:
    """One row per query: the query, a gap, then its k neighbours (query_images [Q,3,H,W], neighbours [Q,k,3,H,W]).

    `correct` [Q, k] booleans (neighbour has the query's label) draws a green or red frame round each neighbour.
    """
    queries = _check_images(query_images, "retrieval_grid query_images", 1)
    neighbours = _check_images(neighbour_images, "retrieval_grid neighbour_images", 2)
    if neighbours.shape[0] != queries.shape[0] or neighbours.shape[3:] != queries.shape[2:]:
        raise ValueError(f"retrieval_grid: neighbours {neighbours.shape} do not match queries {queries.shape}")
    flags = None if correct is None else _as_numpy(correct).astype(bool)
    if flags is not None and flags.shape != neighbours.shape[:2]:
        raise ValueError(f"retrieval_grid: correct has shape {flags.shape}, expected {neighbours.shape[:2]}")
    height, width = queries.shape[2:]
    scale = scale or auto_scale(height, width, target=96)
    separator = np.full((height * scale, max(GAP, width * scale // 4), 3), BACKGROUND, np.uint8)
    gutter = np.full((height * scale, GAP, 3), BACKGROUND, np.uint8)
    rows = []
    for q in range(queries.shape[0]):
        tiles = [_upscale(queries[q].transpose(1, 2, 0), scale)]
        for j in range(neighbours.shape[1]):
            tile = _upscale(neighbours[q, j].transpose(1, 2, 0), scale).copy()
            if flags is not None:
                colour = (30, 190, 60) if flags[q, j] else (220, 30, 30)
                border = max(1, scale)
                tile[:border], tile[-border:], tile[:, :border], tile[:, -border:] = colour, colour, colour, colour
            tiles.append(tile)
        pieces = [tiles[0], separator]
        for tile in tiles[1:]:
            pieces += [tile, gutter]
        rows.append([np.concatenate(pieces[:-1], axis=1)])
    return _tile_grid(rows)


def artifact_stem(name: str, step: int) -> str:
    if not _NAME.match(name):
        raise ValueError(f"artifact name {name!r}: use letters, digits, '_', '.', '-' (no path separators)")
    if type(step) is not int or step < 0:
        raise ValueError(f"artifact {name!r}: step must be a non-negative int, got {step!r}")
    return f"{name}_step{step:07d}"


def save_png_with_meta(directory: str | os.PathLike, name: str, step: int, image: np.ndarray,
                       meta: dict | None = None) -> Path:
    """Write `<name>_stepXXXXXXX.png` and a `.json` beside it ({"step", "kind", "width", "height", ...meta})."""
    array = _as_numpy(image)
    if array.dtype != np.uint8 or array.ndim != 3 or array.shape[2] != 3:
        raise ValueError(f"artifact {name!r}: expected an (H, W, 3) uint8 image, got {array.dtype} {array.shape}")
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    stem = artifact_stem(name, step)
    png, sidecar = directory / f"{stem}.png", directory / f"{stem}.json"
    info = {"step": step, "kind": name, "width": int(array.shape[1]), "height": int(array.shape[0]), **(meta or {})}
    text = encode_row(info)  # strict JSON, tensors and non-finite floats handled like metric rows
    with atomic_file(png) as fh:
        Image.fromarray(np.ascontiguousarray(array), "RGB").save(fh, format="PNG")
    atomic_write(sidecar, (text + "\n").encode("utf-8"))
    return png


@dataclass
class ArtifactInfo:
    png: Path
    step: int
    kind: str
    meta: dict


def list_artifacts(directory: str | os.PathLike, kind: str | None = None) -> list[ArtifactInfo]:
    """Artifacts in a directory (those with a readable metadata file), sorted by step then kind."""
    found = []
    for sidecar in sorted(Path(directory).glob("*_step*.json")):
        png = sidecar.with_suffix(".png")
        try:
            meta = json.loads(sidecar.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError):
            continue  # being written, or not ours
        if not png.exists() or not isinstance(meta, dict) or (kind is not None and meta.get("kind") != kind):
            continue
        found.append(ArtifactInfo(png=png, step=int(meta.get("step", -1)), kind=str(meta.get("kind", "")),
                                  meta=meta))
    return sorted(found, key=lambda a: (a.step, a.kind))


