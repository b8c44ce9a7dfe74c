"""Decoding and I-JEPA's augmentation, one image at a time, in the DataLoader workers.

Training: RandomResizedCrop (torchvision's algorithm: area fraction uniform in `crop_scale`, aspect ratio log-uniform
in `crop_ratio`, 10 tries, then a centre crop) and an optional horizontal flip; every draw comes from the numpy
Generator the caller passes (see common.seeds.sample_rng), never from global state. Evaluation: the central square,
resized (no randomness). A JPEG is drafted before it is decoded: libjpeg decodes it directly at 1/2, 1/4 or 1/8 scale
when the crop still covers at least the output size there, so a 500-px photo cropped to 32 px costs a fraction of a
full decode. Crop and resize are one PIL call (`resize(box=...)`, antialiased bilinear). A photo's EXIF orientation
is honoured: crops are drawn on the upright image, as a viewer shows it.
"""

from __future__ import annotations

import math
import struct
from dataclasses import dataclass

import numpy as np
import torch
from PIL import Image

# What a damaged, truncated or mislabelled file can raise while PIL opens or decodes it. SyntaxError is PIL's
# "broken PNG file"; DecompressionBombError guards against a header that claims a gigantic image.
DECODE_ERRORS: tuple[type[BaseException], ...] = (OSError, ValueError, SyntaxError, EOFError, struct.error,
                                                  Image.DecompressionBombError)

Box = tuple[float, float, float, float]  # left, top, width, height in the upright image's pixels

# EXIF orientation (tag 0x0112): how a camera's stored pixels are turned to show the photo upright. Boxes are drawn
# on the upright image; the stored pixels are cropped (so a JPEG can still be drafted) and only the small output
# is turned.
ORIENTATION_TAG = 0x0112
_UPRIGHT = {2: Image.Transpose.FLIP_LEFT_RIGHT, 3: Image.Transpose.ROTATE_180, 4: Image.Transpose.FLIP_TOP_BOTTOM,
            5: Image.Transpose.TRANSPOSE, 6: Image.Transpose.ROTATE_270, 7: Image.Transpose.TRANSVERSE,
            8: Image.Transpose.ROTATE_90}


def orientation(image: Image.Image) -> int:
    """The image's EXIF orientation, 1 (as stored) when it has none or an invalid one."""
    value = image.getexif().get(ORIENTATION_TAG, 1)
    return value if value in _UPRIGHT else 1


def upright_size(image: Image.Image) -> tuple[int, int]:
    width, height = image.size
    return (height, width) if orientation(image) in (5, 6, 7, 8) else (width, height)


def _stored_point(u: float, v: float, turn: int, width: int, height: int) -> tuple[float, float]:
    """The stored pixel position shown at (u, v) of the upright image (width x height: the stored size)."""
    return {2: (width - u, v), 3: (width - u, height - v), 4: (u, height - v), 5: (v, u), 6: (v, height - u),
            7: (width - v, height - u), 8: (width - v, u)}[turn]


def _stored_box(box: Box, turn: int, width: int, height: int) -> Box:
    left, top, w, h = box
    (x0, y0), (x1, y1) = (_stored_point(left, top, turn, width, height),
                          _stored_point(left + w, top + h, turn, width, height))
    return min(x0, x1), min(y0, y1), abs(x1 - x0), abs(y1 - y0)


def random_resized_crop_box(width: int, height: int, scale: tuple[float, float], ratio: tuple[float, float],
                            rng: np.random.Generator) -> Box:
    """torchvision's RandomResizedCrop.get_params, drawing from `rng`."""
    area = width * height
    log_ratio = (math.log(ratio[0]), math.log(ratio[1]))
    for _ in range(10):
        target_area = area * rng.uniform(scale[0], scale[1])
        aspect = math.exp(rng.uniform(log_ratio[0], log_ratio[1]))
        w = int(round(math.sqrt(target_area * aspect)))
        h = int(round(math.sqrt(target_area / aspect)))
        if 0 < w <= width and 0 < h <= height:
            top = int(rng.integers(0, height - h + 1))
            left = int(rng.integers(0, width - w + 1))
            return float(left), float(top), float(w), float(h)
    # Fallback: the whole image, trimmed to the nearest allowed aspect ratio, centred.
    in_ratio = width / height
    if in_ratio < ratio[0]:
        w, h = width, int(round(width / ratio[0]))
    elif in_ratio > ratio[1]:
        w, h = int(round(height * ratio[1])), height
    else:
        w, h = width, height
    return float((width - w) // 2), float((height - h) // 2), float(w), float(h)


def centre_square_box(width: int, height: int) -> Box:
    side = min(width, height)
    return (width - side) / 2, (height - side) / 2, float(side), float(side)


def crop_to_tensor(image: Image.Image, box: Box, size: int, draft: bool = True, flip: bool = False) -> torch.Tensor:
    """uint8 [3, size, size]: `box` of the upright `image` resized to size x size (and mirrored when `flip`)."""
    turn = orientation(image)
    left, top, width, height = box if turn == 1 else _stored_box(box, turn, *image.size)
    if draft and image.format == "JPEG":
        full_w, full_h = image.size
        # Ask for the largest reduction at which the crop still spans `size` pixels each way (no upsampling
        # introduced by drafting); PIL picks scale 1/1, 1/2, 1/4 or 1/8 and updates image.size.
        drafted = image.draft("RGB", (math.ceil(full_w * size / width), math.ceil(full_h * size / height)))
        if drafted is not None and image.size != (full_w, full_h):
            scale = full_w / drafted[1][2]  # PIL's box: (0, 0, full_w / scale, full_h / scale)
            left, top, width, height = left / scale, top / scale, width / scale, height / scale
            # The reduced image is rounded up, so the scaled crop always fits; clamp for float round-off.
            width, height = min(width, image.size[0] - left), min(height, image.size[1] - top)
    rgb = image if image.mode == "RGB" else image.convert("RGB")
    out = rgb.resize((size, size), Image.Resampling.BILINEAR, box=(left, top, left + width, top + height))
    if turn != 1:
        out = out.transpose(_UPRIGHT[turn])
    if flip:
        out = out.transpose(Image.Transpose.FLIP_LEFT_RIGHT)
    return torch.from_numpy(np.array(out, dtype=np.uint8)).permute(2, 0, 1).contiguous()


@dataclass(frozen=True)
class TrainTransform:
    """I-JEPA's training augmentation for a streamed image."""

    size: int
    scale: tuple[float, float] = (0.3, 1.0)
    ratio: tuple[float, float] = (3 / 4, 4 / 3)
    hflip: bool = False
    draft: bool = True

    def __call__(self, image: Image.Image, rng: np.random.Generator) -> torch.Tensor:
        box = random_resized_crop_box(*upright_size(image), self.scale, self.ratio, rng)
        flip = self.hflip and bool(rng.random() < 0.5)
        return crop_to_tensor(image, box, self.size, self.draft, flip)


@dataclass(frozen=True)
class EvalTransform:
    """Held-out images: the central square, resized (what the probe and kNN see, the same at every evaluation)."""

    size: int
    draft: bool = True

    def __call__(self, image: Image.Image, rng: np.random.Generator | None = None) -> torch.Tensor:
        return crop_to_tensor(image, centre_square_box(*upright_size(image)), self.size, self.draft)
