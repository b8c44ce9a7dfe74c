"""PNG artifacts with metadata, mask overlays and retrieval grids."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from PIL import Image

from jepa_core.metrics.artifacts import (
    CONTEXT_RGB,
    LEAK_RGB,
    TARGET_RGB,
    list_artifacts,
    mask_overlay_grid,
    retrieval_grid,
    save_png_with_meta,
)


def grey_images(count: int, size: int = 32) -> np.ndarray:
    return np.full((count, 3, size, size), 128, np.uint8)


def test_save_png_with_meta_writes_png_and_json(tmp_path):
    image = np.zeros((20, 30, 3), np.uint8)
    image[:, :, 0] = 200
    png = save_png_with_meta(tmp_path / "artifacts", "masks", 120, image, {"patch_size": 4, "score": float("nan")})
    assert png.name == "masks_step0000120.png"
    with Image.open(png) as loaded:
        assert loaded.size == (30, 20)
        assert np.array_equal(np.asarray(loaded), image)
    meta = json.loads(png.with_suffix(".json").read_text(), parse_constant=lambda t: pytest.fail(t))
    assert meta == {"step": 120, "kind": "masks", "width": 30, "height": 20, "patch_size": 4, "score": "NaN"}
    found = list_artifacts(tmp_path / "artifacts")
    assert [(a.step, a.kind, a.png) for a in found] == [(120, "masks", png)]


@pytest.mark.parametrize("name", ["../evil", "a/b", ""])
def test_save_rejects_path_like_names(tmp_path, name):
    with pytest.raises(ValueError, match="artifact name"):
        save_png_with_meta(tmp_path, name, 0, np.zeros((4, 4, 3), np.uint8), {})


def test_save_rejects_wrong_image_shape(tmp_path):
    with pytest.raises(ValueError, match="uint8"):
        save_png_with_meta(tmp_path, "x", 0, np.zeros((4, 4), np.float32), {})


def test_mask_overlay_colours_context_target_and_leak():
    patch = 8
    images = grey_images(2)
    context = torch.tensor([[0, 1, 5], [0, 2, 3]])  # 4x4 patch grid
    targets = torch.tensor([[[2, 3]], [[3, 15]]])  # image 1: patch 3 is in both (a leak)
    grid = mask_overlay_grid(images, context, targets, patch_size=patch)
    scale = 4  # 32x32 images are shown at x4
    tile = 32 * scale
    assert grid.dtype == np.uint8 and grid.shape == (2 * tile + 2, 2 * tile + 2, 3)

    def overlay_pixel(image_index: int, patch_index: int) -> np.ndarray:
        row, col = divmod(patch_index, 4)
        top = tile + 2 + row * patch * scale + 3
        left = image_index * (tile + 2) + col * patch * scale + 3
        return grid[top, left].astype(float)

    def expected(colour: np.ndarray) -> np.ndarray:
        return np.floor(128 * 0.5 + colour * 0.5)

    assert np.allclose(overlay_pixel(0, 0), expected(CONTEXT_RGB), atol=1)
    assert np.allclose(overlay_pixel(0, 2), expected(TARGET_RGB), atol=1)
    assert np.allclose(overlay_pixel(1, 3), expected(LEAK_RGB), atol=1)
    assert np.allclose(overlay_pixel(0, 10), [64, 64, 64], atol=1)  # in neither: dimmed
    assert np.array_equal(grid[5, 5], [128, 128, 128])  # the top row shows the untouched image


def test_mask_overlay_validates_inputs():
    with pytest.raises(ValueError, match="uint8"):
        mask_overlay_grid(np.zeros((1, 3, 32, 32), np.float32), [[0]], [[[1]]], 8)
    with pytest.raises(ValueError, match="patch_size"):
        mask_overlay_grid(grey_images(1), [[0]], [[[1]]], 5)
    with pytest.raises(ValueError, match="out of range"):
        mask_overlay_grid(grey_images(1), [[99]], [[[1]]], 8)


def test_mask_overlay_limits_images():
    grid = mask_overlay_grid(grey_images(10), [[0]] * 10, [[[1]]] * 10, 8, max_images=3)
    assert grid.shape[1] == 3 * 128 + 2 * 2


def test_retrieval_grid_layout_and_frames():
    queries = np.zeros((2, 3, 16, 16), np.uint8)
    neighbours = np.full((2, 3, 3, 16, 16), 100, np.uint8)
    correct = np.array([[True, False, True], [False, False, False]])
    grid = retrieval_grid(queries, neighbours, correct=correct)
    scale = 6  # 16x16 shown at about 96 px
    tile = 16 * scale
    separator = tile // 4
    assert grid.shape == (2 * tile + 2, tile + separator + 3 * tile + 2 * 2, 3)
    first_neighbour_left = tile + separator
    assert np.array_equal(grid[0, first_neighbour_left], [30, 190, 60])  # correct: green frame
    assert np.array_equal(grid[0, first_neighbour_left + tile + 2], [220, 30, 30])  # wrong: red frame
    assert np.array_equal(grid[tile // 2, first_neighbour_left + tile // 2], [100, 100, 100])
    with pytest.raises(ValueError, match="do not match"):
        retrieval_grid(queries, neighbours[:1])
