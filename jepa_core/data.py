"""Datasets for JEPA training: the built-in procedural "shapes" set, image folders and .npz arrays.

Everything here is deterministic per seed and never downloads anything. Images are held in memory as
uint8 [N, 3, H, W] CPU tensors; `normalize_images` turns a batch into float32 model input.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

IMAGE_EXTENSIONS = {".png", ".jpg", ".jpeg", ".bmp", ".gif", ".webp", ".tif", ".tiff"}
HELDOUT_SEED_OFFSET = 1_000_003  # held-out shapes come from a different seed stream than training shapes
SHAPE_CLASS_NAMES = ["disc", "square", "triangle", "ring", "plus", "bars", "diamond", "x_cross"]
_RENDER_CHUNK = 4096  # images rendered per vectorised pass; bounds peak memory
_NORMALIZE_EPS = 0.01  # variance floor (in [0,1] units) so flat channels are not blown up into pure noise


class DataError(ValueError):
    """Bad dataset input; the message names the file, path or config key at fault."""


@dataclass
class ImageDataset:
    images: torch.Tensor  # uint8 [N, 3, H, W], CPU
    labels: torch.Tensor  # int64 [N]; -1 where unlabelled
    class_names: list[str]

    def __post_init__(self) -> None:
        if self.images.dtype != torch.uint8 or self.images.ndim != 4 or self.images.shape[1] != 3:
            raise DataError(f"ImageDataset.images must be uint8 [N, 3, H, W], got {self.images.dtype} "
                            f"{tuple(self.images.shape)}")
        if self.labels.dtype != torch.int64 or self.labels.shape != (self.images.shape[0],):
            raise DataError(f"ImageDataset.labels must be int64 [{self.images.shape[0]}], got "
                            f"{self.labels.dtype} {tuple(self.labels.shape)}")

    def __len__(self) -> int:
        return int(self.images.shape[0])

    @property
    def is_labelled(self) -> bool:
        return bool(len(self) > 0 and (self.labels >= 0).all())

    def subset(self, indices: torch.Tensor) -> ImageDataset:
        """The images and labels at `indices` (int64), same class names."""
        return ImageDataset(self.images[indices], self.labels[indices], list(self.class_names))


# ----------------------------------------------------------------------------------------------------------
# Built-in procedural dataset
# ----------------------------------------------------------------------------------------------------------

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


# ----------------------------------------------------------------------------------------------------------
# User data: image folders and .npz arrays
# ----------------------------------------------------------------------------------------------------------

def _image_files(folder: Path) -> list[Path]:
    return sorted(p for p in folder.iterdir()
                  if p.is_file() and not p.name.startswith(".") and p.suffix.lower() in IMAGE_EXTENSIONS)


def _read_image(path: Path, img_size: int) -> torch.Tensor:
    from PIL import Image, ImageOps, UnidentifiedImageError

    try:
        with Image.open(path) as img:
            # Centre crop to a square, then resize: keeps the aspect ratio of the content.
            fitted = ImageOps.fit(img.convert("RGB"), (img_size, img_size), method=Image.Resampling.BICUBIC)
    except (UnidentifiedImageError, OSError, ValueError) as exc:
        raise DataError(f"cannot read image file {path}: {exc}") from exc
    return torch.from_numpy(np.asarray(fitted, dtype=np.uint8).copy()).permute(2, 0, 1)


def load_image_folder(path: str | Path, img_size: int) -> ImageDataset:
    """Images under `path`: one subfolder per class (labelled), or image files directly in it (unlabelled)."""
    root = Path(path)
    if not root.exists():
        raise DataError(f"data.path {root} does not exist")
    if not root.is_dir():
        raise DataError(f"data.path {root} is not a folder (the folder dataset needs a directory)")
    class_dirs = sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith("."))
    loose_files = _image_files(root)
    if class_dirs and loose_files:
        raise DataError(f"data.path {root} mixes class subfolders with loose images (e.g. {loose_files[0].name}); "
                        "use either one subfolder per class or a flat folder of unlabelled images")
    files: list[Path] = []
    labels: list[int] = []
    if class_dirs:
        for class_id, class_dir in enumerate(class_dirs):
            class_files = _image_files(class_dir)
            if not class_files:
                raise DataError(f"class folder {class_dir} contains no images ({', '.join(sorted(IMAGE_EXTENSIONS))})")
            files += class_files
            labels += [class_id] * len(class_files)
        class_names = [d.name for d in class_dirs]
    else:
        files, labels, class_names = loose_files, [-1] * len(loose_files), []
    if not files:
        raise DataError(f"data.path {root} contains no images ({', '.join(sorted(IMAGE_EXTENSIONS))})")
    images = torch.stack([_read_image(f, img_size) for f in files])
    return ImageDataset(images, torch.tensor(labels, dtype=torch.int64), class_names)


def _images_to_nchw_uint8(array: np.ndarray, path: Path) -> torch.Tensor:
    where = f"{path} key 'images'"
    if array.ndim == 3:  # [N, H, W] greyscale
        array = array[:, None, :, :]
    elif array.ndim == 4:
        if array.shape[-1] in (1, 3, 4):
            array = np.transpose(array, (0, 3, 1, 2))
        elif array.shape[1] not in (1, 3, 4):
            raise DataError(f"{where}: cannot find the channel axis in shape {array.shape}; expected "
                            "[N, H, W, C] or [N, C, H, W] with C in 1, 3 or 4")
    else:
        raise DataError(f"{where}: expected [N, H, W, C], [N, C, H, W] or [N, H, W], got shape {array.shape}")
    if array.shape[0] == 0:
        raise DataError(f"{where}: contains no images")
    if array.dtype == np.uint8:
        tensor = torch.from_numpy(np.ascontiguousarray(array))
    elif np.issubdtype(array.dtype, np.floating):
        if not np.isfinite(array).all():
            raise DataError(f"{where}: float images contain NaN or infinite values")
        lo, hi = float(array.min()), float(array.max())
        if lo < 0.0 or hi > 1.0:
            raise DataError(f"{where}: float images must lie in [0, 1], found range [{lo:.4g}, {hi:.4g}]")
        tensor = torch.from_numpy(np.rint(array * 255.0).astype(np.uint8))
    else:
        raise DataError(f"{where}: dtype must be uint8 or float in [0, 1], got {array.dtype}")
    channels = tensor.shape[1]
    if channels == 1:
        tensor = tensor.expand(-1, 3, -1, -1)
    elif channels == 4:
        tensor = tensor[:, :3]  # drop alpha
    return tensor.contiguous()


def _resize_uint8(images: torch.Tensor, img_size: int) -> torch.Tensor:
    if images.shape[-2:] == (img_size, img_size):
        return images
    out = torch.empty(images.shape[0], 3, img_size, img_size, dtype=torch.uint8)
    for start in range(0, images.shape[0], 1024):  # chunked so big arrays do not need a float copy at once
        chunk = images[start:start + 1024].float()
        resized = F.interpolate(chunk, size=(img_size, img_size), mode="bilinear", align_corners=False,
                                antialias=True)
        out[start:start + 1024] = resized.round().clamp(0, 255).to(torch.uint8)
    return out


def load_npz(path: str | Path, img_size: int) -> ImageDataset:
    """Arrays from an .npz: "images" (required), "labels" (optional int, -1 = unlabelled), "class_names" (optional)."""
    file = Path(path)
    if not file.exists():
        raise DataError(f"data.path {file} does not exist")
    if not file.is_file():
        raise DataError(f"data.path {file} is not a file (the npz dataset needs an .npz file)")
    try:
        archive = np.load(file, allow_pickle=False)
    except (OSError, ValueError) as exc:
        raise DataError(f"cannot read {file} as .npz: {exc}") from exc
    if not isinstance(archive, np.lib.npyio.NpzFile):
        raise DataError(f"{file} is a single .npy array, not an .npz archive with an 'images' key")
    with archive:
        if "images" not in archive.files:
            raise DataError(f"{file} has no key 'images' (keys: {', '.join(archive.files) or 'none'})")
        try:
            images = _images_to_nchw_uint8(archive["images"], file)
            raw_labels = archive["labels"] if "labels" in archive.files else None
            raw_names = archive["class_names"] if "class_names" in archive.files else None
        except ValueError as exc:  # e.g. an object array that would need pickle
            raise DataError(f"cannot read arrays from {file}: {exc}") from exc
    n = images.shape[0]
    if raw_labels is None:
        labels = torch.full((n,), -1, dtype=torch.int64)
    else:
        if raw_labels.shape != (n,) or not np.issubdtype(raw_labels.dtype, np.integer):
            raise DataError(f"{file} key 'labels': expected integer array of shape ({n},), got "
                            f"{raw_labels.dtype} {raw_labels.shape}")
        labels = torch.from_numpy(raw_labels.astype(np.int64))
        if (labels < -1).any():
            raise DataError(f"{file} key 'labels': labels must be >= 0 (or -1 for unlabelled)")
    num_classes = int(labels.max().item()) + 1 if n else 0
    if raw_names is not None:
        class_names = [str(name) for name in raw_names.reshape(-1).tolist()]
        if len(class_names) < num_classes:
            raise DataError(f"{file} key 'class_names': {len(class_names)} names for {num_classes} label values")
    else:
        class_names = [str(i) for i in range(num_classes)]
    return ImageDataset(_resize_uint8(images, img_size), labels, class_names)


# ----------------------------------------------------------------------------------------------------------
# Splits, batching, normalisation
# ----------------------------------------------------------------------------------------------------------

def heldout_count(n: int, heldout_fraction: float) -> int:
    """How many of `n` images `split_dataset` holds out (config validation checks it before loading anything)."""
    num_heldout = int(round(n * heldout_fraction))
    if heldout_fraction > 0 and num_heldout == 0 and n >= 2:
        num_heldout = 1  # a requested held-out split is never silently empty
    return num_heldout


def split_dataset(data: ImageDataset, heldout_fraction: float, seed: int) -> tuple[ImageDataset, ImageDataset]:
    """Deterministic seeded split into (train, heldout); each keeps the original order of its images."""
    if not 0.0 <= heldout_fraction < 1.0:
        raise DataError(f"data.heldout_fraction must be in [0, 1), got {heldout_fraction}")
    n = len(data)
    num_heldout = heldout_count(n, heldout_fraction)
    if n - num_heldout < 1:
        raise DataError(f"data.heldout_fraction={heldout_fraction} leaves no training images out of {n}")
    order = torch.randperm(n, generator=torch.Generator().manual_seed(int(seed)))
    heldout_idx, train_idx = order[:num_heldout].sort().values, order[num_heldout:].sort().values
    return data.subset(train_idx), data.subset(heldout_idx)


def build_datasets(dataset: str, path: str, img_size: int, num_classes: int, num_train: int, num_heldout: int,
                   heldout_fraction: float, seed: int) -> tuple[ImageDataset, ImageDataset]:
    """(train, heldout). "shapes" renders `num_train`/`num_heldout` images from two seed streams;
    "folder"/"npz" load `path` and split it by `heldout_fraction` (num_train/num_heldout/num_classes unused)."""
    if img_size < 4:
        raise DataError(f"data.img_size must be at least 4, got {img_size}")
    if dataset == "shapes":
        if num_train < 1:
            raise DataError(f"data.num_train must be >= 1, got {num_train}")
        if num_heldout < 0:
            raise DataError(f"data.num_heldout must be >= 0, got {num_heldout}")
        train = make_shapes(num_train, img_size, num_classes, seed)
        heldout = make_shapes(num_heldout, img_size, num_classes, seed + HELDOUT_SEED_OFFSET)
        return train, heldout
    if dataset in ("folder", "npz"):
        if not path:
            raise DataError(f"data.path must be set when data.dataset is {dataset!r}")
        loaded = load_image_folder(path, img_size) if dataset == "folder" else load_npz(path, img_size)
        return split_dataset(loaded, heldout_fraction, seed)
    raise DataError(f"data.dataset must be one of 'shapes', 'folder', 'npz', got {dataset!r}")


def normalize_images(batch_uint8: torch.Tensor) -> torch.Tensor:
    """float32 [B, C, H, W]: each image's channels shifted to zero mean and scaled to about unit std."""
    if batch_uint8.dtype != torch.uint8 or batch_uint8.ndim != 4:
        raise ValueError(f"normalize_images expects a uint8 [B, C, H, W] batch, got {batch_uint8.dtype} "
                         f"{tuple(batch_uint8.shape)}")
    x = batch_uint8.float() / 255.0
    mean = x.mean(dim=(2, 3), keepdim=True)
    var = x.var(dim=(2, 3), keepdim=True, unbiased=False)
    return (x - mean) / torch.sqrt(var + _NORMALIZE_EPS)


def _epoch_permutation(n: int, seed: int, epoch: int) -> torch.Tensor:
    # Mix seed and epoch into one 63-bit generator seed (golden-ratio multiplier spreads nearby seeds apart).
    mixed = (int(seed) * 0x9E3779B97F4A7C15 + int(epoch) * 0xBF58476D1CE4E5B9 + 1) % (2**63)
    return torch.randperm(n, generator=torch.Generator().manual_seed(mixed))


def batch_indices(n: int, batch_size: int, step: int, seed: int) -> torch.Tensor:
    """int64 [batch_size]: dataset indices for training step `step`, a pure function of its arguments.

    Steps walk through a fresh seeded permutation each epoch (epoch = position // n); a batch that straddles
    an epoch boundary takes the end of one permutation and the start of the next.
    """
    if n < 1:
        raise DataError(f"cannot draw batches from an empty dataset (n={n})")
    if batch_size < 1:
        raise DataError(f"batch size must be >= 1, got {batch_size}")
    if step < 0:
        raise DataError(f"step must be >= 0, got {step}")
    start, stop = step * batch_size, (step + 1) * batch_size
    parts = []
    for epoch in range(start // n, (stop - 1) // n + 1):
        perm = _epoch_permutation(n, seed, epoch)
        lo, hi = max(start, epoch * n) - epoch * n, min(stop, (epoch + 1) * n) - epoch * n
        parts.append(perm[lo:hi])
    return torch.cat(parts)


def epoch_of_step(n: int, batch_size: int, step: int) -> float:
    """Fractional epoch reached after `step` batches (for the `epoch` metric)."""
    return step * batch_size / n
