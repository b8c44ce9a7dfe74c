"""Tests for jepa_core.data: procedural shapes, folder/npz sources, splits, normalisation, batch order.

The streaming pipeline itself (workers, crops, corrupt files, resume) is tested in test_pipeline.py."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from jepa_core.common.seeds import HELDOUT_SEED_OFFSET
from jepa_core.data import (
    SHAPE_CLASS_NAMES, DataError, EvalTransform, ImageDataset, NpzSource, UnreadableImage,
    batch_indices, build_datasets, is_labelled, make_shapes, normalize_images, open_image_folder, open_npz, split_dataset,
)


def read_all(source, size: int) -> torch.Tensor:
    """uint8 [N, 3, size, size]: every image of a streamed source as the evaluation reads it."""
    transform = EvalTransform(size)
    images = []
    for i in range(len(source)):
        with source.open(i) as image:
            images.append(transform(image))
    return torch.stack(images)


# ---------------------------------------------------------------------------------------------- shapes

def test_make_shapes_layout_and_balance() -> None:
    data = make_shapes(803, 32, 8, seed=0)
    assert len(data) == 803
    assert data.images.dtype == torch.uint8 and data.images.shape == (803, 3, 32, 32)
    assert data.labels.dtype == torch.int64 and data.labels.min() >= 0 and data.labels.max() < 8
    counts = torch.bincount(data.labels, minlength=8)
    assert counts.max() - counts.min() <= 1  # balanced
    assert data.class_names == SHAPE_CLASS_NAMES
    assert make_shapes(40, 16, 3, seed=0).class_names == SHAPE_CLASS_NAMES[:3]
    assert set(make_shapes(40, 16, 3, seed=0).labels.tolist()) == {0, 1, 2}


def test_make_shapes_is_deterministic_per_seed() -> None:
    a, b, c = make_shapes(64, 24, 8, seed=5), make_shapes(64, 24, 8, seed=5), make_shapes(64, 24, 8, seed=6)
    assert torch.equal(a.images, b.images) and torch.equal(a.labels, b.labels)
    assert not torch.equal(a.images, c.images)


def test_shapes_images_have_foreground_and_varied_nuisances() -> None:
    data = make_shapes(256, 32, 8, seed=1)
    x = data.images.float()
    # Every image shows a shape: clear contrast inside the image, not a flat colour.
    per_image_range = (x.amax(dim=(1, 2, 3)) - x.amin(dim=(1, 2, 3)))
    assert per_image_range.min() > 60
    # Colour is a nuisance: mean colours vary widely across images of the same class.
    disc_means = x[data.labels == 0].mean(dim=(2, 3))
    assert disc_means.std(dim=0).min() > 20


def _nearest_centroid_accuracy(features, train: ImageDataset, test: ImageDataset) -> torch.Tensor:
    """Per-class recall [8] of a nearest-centroid classifier on features(images)."""
    train_feats = features(train.images)
    centroids = torch.stack([train_feats[train.labels == k].mean(0) for k in range(8)])
    pred = torch.cdist(features(test.images), centroids).argmin(1)
    return torch.stack([(pred[test.labels == k] == k).float().mean() for k in range(8)])


def _silhouette_spectrum(images: torch.Tensor) -> torch.Tensor:
    # Colour-free and translation-invariant: distance of each pixel from the image's median (background)
    # colour, then the magnitude of its 2-D Fourier transform.
    x = images.float() / 255
    background = x.flatten(2).median(dim=2).values[:, :, None, None]
    silhouette = (x - background).norm(dim=1)
    silhouette = silhouette / silhouette.flatten(1).amax(1)[:, None, None]
    spectrum = torch.fft.rfft2(silhouette).abs().flatten(1)
    return spectrum / spectrum.norm(dim=1, keepdim=True)


def test_shape_classes_are_carried_by_shape_not_colour() -> None:
    train, test = make_shapes(1600, 32, 8, seed=2), make_shapes(400, 32, 8, seed=3)
    by_shape = _nearest_centroid_accuracy(_silhouette_spectrum, train, test)
    assert by_shape.mean() > 0.6, by_shape  # chance is 0.125
    assert by_shape.min() > 0.3, by_shape  # every class is recognisable
    by_colour = _nearest_centroid_accuracy(lambda imgs: imgs.float().mean(dim=(2, 3)), train, test)
    assert by_colour.mean() < 0.25, by_colour  # colour carries (almost) no label information


def test_make_shapes_rejects_bad_arguments() -> None:
    with pytest.raises(DataError, match="data.num_classes"):
        make_shapes(10, 32, 9, seed=0)
    with pytest.raises(DataError, match="data.img_size"):
        make_shapes(10, 2, 4, seed=0)
    assert len(make_shapes(0, 16, 4, seed=0)) == 0


# ---------------------------------------------------------------------------------------------- builders

def test_build_datasets_shapes_uses_separate_seed_streams() -> None:
    train, heldout = build_datasets("shapes", "", 16, 4, 100, 40, 0.2, seed=7)
    assert len(train) == 100 and len(heldout) == 40
    assert torch.equal(train.images, make_shapes(100, 16, 4, 7).images)
    assert torch.equal(heldout.images, make_shapes(40, 16, 4, 7 + HELDOUT_SEED_OFFSET).images)
    # No held-out image is a copy of a training image.
    flat_train, flat_held = train.images.flatten(1).float(), heldout.images.flatten(1).float()
    assert torch.cdist(flat_held, flat_train).min() > 0


def test_build_datasets_errors_name_the_key(tmp_path: Path) -> None:
    with pytest.raises(DataError, match="data.dataset"):
        build_datasets("imagenet", "", 16, 4, 10, 10, 0.2, 0)
    with pytest.raises(DataError, match="data.num_train"):
        build_datasets("shapes", "", 16, 4, 0, 10, 0.2, 0)
    with pytest.raises(DataError, match="data.path"):
        build_datasets("folder", "", 16, 4, 10, 10, 0.2, 0)
    missing = tmp_path / "nope"
    with pytest.raises(DataError, match=str(missing)):
        build_datasets("npz", str(missing), 16, 4, 10, 10, 0.2, 0)


def _write_png(path: Path, color: tuple[int, int, int], size: tuple[int, int] = (20, 12)) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.new("RGB", size, color).save(path)


def test_image_folder_with_classes_is_listed_not_loaded(tmp_path: Path) -> None:
    for i in range(3):
        _write_png(tmp_path / "cats" / f"c{i}.png", (200, 10, 10))
    for i in range(2):
        _write_png(tmp_path / "dogs" / f"d{i}.jpg", (10, 10, 200))
    (tmp_path / "cats" / "notes.txt").write_text("ignored: not an image")
    data = open_image_folder(tmp_path)
    assert data.class_names == ["cats", "dogs"] and data.ignored == 1
    assert data.labels.tolist() == [0, 0, 0, 1, 1] and is_labelled(data)
    assert data.files.dtype.kind == "S"  # one bytes array: forked workers share it without refcount copies
    images = read_all(data, 16)
    assert images.shape == (5, 3, 16, 16) and images.dtype == torch.uint8
    assert images[0, 0].float().mean() > 190 and images[4, 2].float().mean() > 180


def test_image_folder_flat_is_unlabelled(tmp_path: Path) -> None:
    for i in range(4):
        _write_png(tmp_path / f"img{i}.png", (i * 50, 0, 0))
    data = open_image_folder(tmp_path)
    assert (data.labels == -1).all() and data.class_names == [] and not is_labelled(data)
    train, heldout = split_dataset(data, 0.25, seed=0)
    assert len(train) == 3 and len(heldout) == 1
    assert sorted(train.files.tolist() + heldout.files.tolist()) == [f"img{i}.png".encode() for i in range(4)]


def test_image_folder_errors_name_the_path(tmp_path: Path) -> None:
    with pytest.raises(DataError, match=str(tmp_path / "missing")):
        open_image_folder(tmp_path / "missing")
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(DataError, match=f"{empty}.*no images"):
        open_image_folder(empty)
    empty_class = tmp_path / "empty_class"
    _write_png(empty_class / "a" / "x.png", (1, 2, 3))
    (empty_class / "b").mkdir()
    with pytest.raises(DataError, match=str(empty_class / "b")):
        open_image_folder(empty_class)
    mixed = tmp_path / "mixed"
    _write_png(mixed / "a" / "x.png", (1, 2, 3))
    _write_png(mixed / "loose.png", (1, 2, 3))
    with pytest.raises(DataError, match="mixes class subfolders with loose images"):
        open_image_folder(mixed)


def test_a_broken_file_is_listed_and_fails_only_when_read(tmp_path: Path) -> None:
    # Listing never decodes (a million files would take hours); the pipeline skips what fails when read.
    _write_png(tmp_path / "cls" / "ok.png", (1, 2, 3))
    (tmp_path / "cls" / "bad.png").write_bytes(b"this is not a png")
    data = open_image_folder(tmp_path)
    assert len(data) == 2
    bad = [i for i in range(2) if data.describe(i).endswith("bad.png")][0]
    with pytest.raises(UnreadableImage, match="bad.png"):
        data.open(bad)


@pytest.mark.parametrize("layout", ["nhwc_uint8", "nchw_float", "nhw_gray"])
def test_npz_layouts(tmp_path: Path, layout: str) -> None:
    rng = np.random.default_rng(0)
    base = rng.integers(0, 256, size=(6, 20, 20, 3), dtype=np.uint8)
    if layout == "nhwc_uint8":
        images = base
    elif layout == "nchw_float":
        images = base.transpose(0, 3, 1, 2).astype(np.float32) / 255.0
    else:
        images = base[..., 0]
    file = tmp_path / "d.npz"
    np.savez(file, images=images, labels=np.array([0, 1, 2, 0, 1, 2]))
    data = open_npz(file)
    assert data.labels.tolist() == [0, 1, 2, 0, 1, 2] and data.class_names == ["0", "1", "2"]
    expected = torch.from_numpy(base).permute(0, 3, 1, 2)
    if layout == "nhw_gray":
        expected = expected[:, :1].expand(-1, 3, -1, -1)
    same_size = read_all(data, 20)
    assert same_size.dtype == torch.uint8 and torch.equal(same_size, expected)  # no resampling: exact bytes
    assert read_all(data, 8).shape == (6, 3, 8, 8)


def test_npz_is_memory_mapped_not_copied(tmp_path: Path) -> None:
    file = tmp_path / "big.npz"
    images = np.random.default_rng(1).integers(0, 256, size=(64, 16, 16, 3), dtype=np.uint8)
    np.savez(file, images=images)
    data = open_npz(file)
    assert isinstance(data.array, np.memmap) and data.array.shape == (64, 16, 16, 3)
    assert np.array_equal(data.pixels(37), images[37])
    # A split maps the same file; a pickled source (what a spawned worker receives) carries no pixels.
    _, heldout = split_dataset(data, 0.25, seed=0)
    import pickle

    payload = pickle.dumps(heldout)
    assert len(payload) < images.nbytes // 4
    again: NpzSource = pickle.loads(payload)
    assert np.array_equal(again.pixels(0), images[heldout.rows[0]])


def test_compressed_npz_is_refused_with_the_fix(tmp_path: Path) -> None:
    file = tmp_path / "c.npz"
    np.savez_compressed(file, images=np.zeros((4, 8, 8, 3), np.uint8))
    with pytest.raises(DataError, match=r"compressed.*np\.savez") as info:
        open_npz(file)
    assert str(file) in str(info.value)


def test_npz_without_labels_is_unlabelled(tmp_path: Path) -> None:
    file = tmp_path / "u.npz"
    np.savez(file, images=np.zeros((3, 8, 8, 3), dtype=np.uint8))
    data = open_npz(file)
    assert (data.labels == -1).all()


@pytest.mark.parametrize("arrays,pattern", [
    ({"pixels": np.zeros((2, 8, 8, 3), np.uint8)}, "key 'images'"),
    ({"images": np.zeros((2, 8, 8, 5, 5), np.uint8)}, "key 'images'.*shape"),
    ({"images": np.zeros((2, 8, 8, 7), np.uint8)}, "key 'images'.*channel"),
    ({"images": np.full((2, 8, 8, 3), 2.0, np.float32)}, r"key 'images'.*\[0, 1\]"),
    ({"images": np.full((2, 8, 8, 3), np.nan, np.float32)}, r"key 'images'.*NaN"),
    ({"images": np.zeros((2, 8, 8, 3), np.int16)}, "key 'images'.*dtype"),
    ({"images": np.zeros((0, 8, 8, 3), np.uint8)}, "key 'images'.*no images"),
    ({"images": np.zeros((2, 8, 8, 3), np.uint8), "labels": np.zeros(3, np.int64)}, "key 'labels'"),
    ({"images": np.zeros((2, 8, 8, 3), np.uint8), "labels": np.array([0.5, 1.0])}, "key 'labels'"),
    ({"images": np.zeros((2, 8, 8, 3), np.uint8), "labels": np.array([0, -3])}, "key 'labels'"),
])
def test_npz_errors_name_path_and_key(tmp_path: Path, arrays: dict, pattern: str) -> None:
    file = tmp_path / "bad.npz"
    np.savez(file, **arrays)
    with pytest.raises(DataError, match=pattern) as info:
        open_npz(file)
    assert str(file) in str(info.value)


def test_npz_float_image_out_of_range_beyond_the_first_is_skipped_when_read(tmp_path: Path) -> None:
    images = np.zeros((40, 4, 4, 3), np.float32)
    images[30] = 3.0  # past the images checked at open: found when read, as an unreadable image
    file = tmp_path / "f.npz"
    np.savez(file, images=images)
    data = open_npz(file)
    with pytest.raises(UnreadableImage, match=r"images\[30\].*\[0, 1\]"):
        data.pixels(30)


def test_npz_unreadable_and_missing(tmp_path: Path) -> None:
    garbage = tmp_path / "garbage.npz"
    garbage.write_bytes(b"not a zip file at all")
    with pytest.raises(DataError, match=str(garbage)):
        open_npz(garbage)
    with pytest.raises(DataError, match=str(tmp_path / "absent.npz")):
        open_npz(tmp_path / "absent.npz")


def test_build_datasets_npz_split_is_deterministic(tmp_path: Path) -> None:
    file = tmp_path / "d.npz"
    images = np.arange(50, dtype=np.uint8)[:, None, None, None].repeat(4, 1).repeat(4, 2).repeat(3, 3)
    np.savez(file, images=images, labels=np.arange(50) % 5)
    train, heldout = build_datasets("npz", str(file), 4, 0, 0, 0, 0.2, seed=3)
    again, _ = build_datasets("npz", str(file), 4, 0, 0, 0, 0.2, seed=3)
    other, _ = build_datasets("npz", str(file), 4, 0, 0, 0, 0.2, seed=4)
    assert len(train) == 40 and len(heldout) == 10
    ids_train = set(read_all(train, 4)[:, 0, 0, 0].tolist())
    ids_held = set(read_all(heldout, 4)[:, 0, 0, 0].tolist())
    assert not ids_train & ids_held and len(ids_train | ids_held) == 50
    assert np.array_equal(train.rows, again.rows) and not np.array_equal(train.rows, other.rows)
    with pytest.raises(DataError, match="data.heldout_fraction"):
        build_datasets("npz", str(file), 4, 0, 0, 0, 1.0, seed=3)


# ---------------------------------------------------------------------------------------------- batches

def test_normalize_images_standardises_each_channel() -> None:
    batch = make_shapes(16, 32, 8, seed=4).images
    x = normalize_images(batch)
    assert x.dtype == torch.float32 and x.shape == batch.shape
    assert x.mean(dim=(2, 3)).abs().max() < 1e-4
    std = x.std(dim=(2, 3), unbiased=False)
    assert std.max() <= 1.0 + 1e-4 and std.max(dim=1).values.min() > 0.5  # the contrast channel is near unit std
    flat = normalize_images(torch.full((1, 3, 8, 8), 77, dtype=torch.uint8))
    assert torch.isfinite(flat).all() and flat.abs().max() == 0  # flat images do not blow up
    with pytest.raises(ValueError, match="uint8"):
        normalize_images(batch.float())


@pytest.mark.parametrize("n,batch_size", [(10, 3), (12, 4), (7, 16), (1, 5)])
def test_batch_indices_cover_each_epoch_exactly_once(n: int, batch_size: int) -> None:
    steps = (4 * n) // batch_size + 3
    stream = torch.cat([batch_indices(n, batch_size, s, seed=11) for s in range(steps)])
    assert all(len(batch_indices(n, batch_size, s, seed=11)) == batch_size for s in range(steps))
    for epoch in range(len(stream) // n):
        assert sorted(stream[epoch * n:(epoch + 1) * n].tolist()) == list(range(n))


def test_batch_indices_is_pure_and_seeded() -> None:
    late = batch_indices(1000, 32, 500, seed=1)  # computed first, without visiting earlier steps
    for s in range(3):
        batch_indices(1000, 32, s, seed=1)
    assert torch.equal(late, batch_indices(1000, 32, 500, seed=1))
    assert not torch.equal(batch_indices(1000, 32, 0, seed=1), batch_indices(1000, 32, 0, seed=2))
    # Consecutive epochs use different orders.
    assert not torch.equal(batch_indices(100, 100, 0, seed=1), batch_indices(100, 100, 1, seed=1))
    with pytest.raises(DataError, match="empty"):
        batch_indices(0, 4, 0, 0)
