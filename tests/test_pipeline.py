"""The streaming input pipeline on images written by the test: a folder of 2,000 JPEGs of mixed sizes (up to 500 px)
with a corrupt file and a non-image file in it, and a memory-mapped .npz.

What must hold: a step's batch (images, crops, masks) is a pure function of (seed, step, rank) whatever the number
of workers; a corrupt image is skipped and counted, never a crashed run; a killed-and-resumed run with
data.num_workers=2 equals the uninterrupted one metric for metric."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image, ImageOps

from jepa_core.common.seeds import sample_rng
from jepa_core.config import apply_overrides, preset
from jepa_core.data import (EvalBatches, EvalTransform, TrainBatches, TrainPlan, TrainTransform, batch_indices,
                            crop_to_tensor, datasets_for, eval_batches, mask_sampler_for, open_image_folder,
                            random_resized_crop_box, train_feed_for)
from jepa_core.run.rundir import load_run_config
from jepa_core.metrics.reader import read_metrics
from jepa_core.run.trainer import Trainer
from test_train import SMALL_MODEL

CLASSES = 4


def write_jpeg_folder(root: Path, count: int, max_side: int = 500, seed: int = 0) -> Path:
    """`count` JPEGs in CLASSES class folders, sides 24..max_side px, plus bad.jpg (corrupt) and README.txt."""
    rng = np.random.default_rng(seed)
    for i in range(count):
        cls = root / f"class{i % CLASSES}"
        cls.mkdir(parents=True, exist_ok=True)
        w, h = (int(v) for v in rng.integers(24, max_side + 1, 2))
        colour = rng.integers(0, 256, 3)
        ramp = np.linspace(0.3, 1.0, w)[None, :, None] * colour  # a gradient: cheap to encode, not flat
        pixels = np.broadcast_to(ramp, (h, w, 3)).astype(np.uint8)
        Image.fromarray(pixels).save(cls / f"{i:05d}.jpg", quality=80)
    (root / "class0" / "bad.jpg").write_bytes(b"\xff\xd8\xff\xe0 this is not really a JPEG")
    (root / "class1" / "README.txt").write_text("not an image: the listing ignores it")
    return root


@pytest.fixture(scope="module")
def big_folder(tmp_path_factory) -> Path:
    return write_jpeg_folder(tmp_path_factory.mktemp("jpegs"), 2000)


def folder_config(path: Path, *extra: str):
    return apply_overrides(preset("tiny"), ["data.dataset=folder", f"data.path={json.dumps(str(path))}",
                                            "optim.batch_size=32", "optim.steps=40", "eval.knn_k=5", *extra])


def bad_index(source) -> int:
    return next(i for i in range(len(source)) if source.describe(i).endswith("bad.jpg"))


# ------------------------------------------------------------------------------------------------- listing, batches

def test_the_folder_is_listed_with_its_corrupt_file_and_without_the_text_file(big_folder: Path) -> None:
    source = open_image_folder(big_folder)
    assert len(source) == 2001 and source.ignored == 1
    assert source.class_names == [f"class{c}" for c in range(CLASSES)]
    assert torch.bincount(source.labels).tolist() == [501, 500, 500, 500]


def test_batches_are_identical_with_0_and_2_workers(big_folder: Path) -> None:
    cfg = folder_config(big_folder)
    train, _ = datasets_for(cfg)
    in_process = train_feed_for(cfg, train)
    cfg.data.num_workers = 2
    workers = train_feed_for(cfg, train)
    try:
        for step in [0, 1, 2, 3, 17, 18, 5]:  # in order, then a jump ahead and one back (the iterator restarts)
            a, b = in_process.get(step), workers.get(step)
            assert a.step == b.step == step
            assert torch.equal(a.images, b.images), step
            assert torch.equal(a.masks.context_idx, b.masks.context_idx)
            assert torch.equal(a.masks.target_idx, b.masks.target_idx)
            assert a.images.shape == (32, 3, 32, 32) and a.images.dtype == torch.uint8
    finally:
        workers.close()


def test_a_corrupt_image_is_replaced_by_the_next_and_reported(big_folder: Path) -> None:
    cfg = folder_config(big_folder)
    train, _ = datasets_for(cfg)
    bad = bad_index(train)
    step = next(s for s in range(200) if bad in batch_indices(len(train), 32, s, cfg.runtime.seed).tolist())
    feed = train_feed_for(cfg, train)
    batch = feed.get(step)
    assert len(batch.skipped) == 1 and batch.skipped[0][0].endswith("bad.jpg")
    assert batch.skipped[0][1].startswith("OSError")  # a JPEG header, then garbage: it fails while decoding
    assert batch.images.shape[0] == 32  # the batch is whole: the next image of the dataset took the place
    position = batch_indices(len(train), 32, step, cfg.runtime.seed).tolist().index(bad)
    with train.open(bad + 1) as image:
        expected = TrainTransform(32)(image, sample_rng(cfg.runtime.seed, step, 0, position))
    assert torch.equal(batch.images[position], expected)
    assert torch.equal(feed.get(step).images, batch.images)  # and deterministically so


def test_ranks_read_disjoint_slices_with_their_own_crops(big_folder: Path) -> None:
    cfg = folder_config(big_folder)
    train, _ = datasets_for(cfg)
    transform, sampler = TrainTransform(32), mask_sampler_for(cfg)
    ranks = [TrainBatches(train, TrainPlan(0, 32, rank, 2, transform=transform), sampler) for rank in (0, 1)]
    whole = batch_indices(len(train), 32, 7, 0)
    assert torch.equal(torch.cat([r.indices(7) for r in ranks]), whole)
    first, second = ranks[0][7], ranks[1][7]
    assert first.images.shape == second.images.shape == (16, 3, 32, 32)
    assert not torch.equal(first.masks.context_idx, second.masks.context_idx)  # masks from (seed, step, rank)


def test_held_out_batches_are_the_same_with_workers_and_have_no_randomness(big_folder: Path) -> None:
    cfg = folder_config(big_folder)
    _, heldout = datasets_for(cfg)
    batches = EvalBatches(heldout, torch.arange(100), 40, EvalTransform(32))
    in_process = [images for images, _ in eval_batches(batches, num_workers=0)]
    with_workers = [images for images, _ in eval_batches(batches, num_workers=2)]
    assert [b.shape[0] for b in in_process] == [40, 40, 20]
    assert all(torch.equal(a, b) for a, b in zip(in_process, with_workers))


# ------------------------------------------------------------------------------------------------------ transforms

def test_random_resized_crop_boxes_respect_scale_ratio_and_bounds() -> None:
    rng = np.random.default_rng(0)
    for _ in range(500):
        width = int(rng.integers(8, 600))
        height = int(width * rng.uniform(3 / 4, 4 / 3)) or 1  # a crop of any allowed aspect fits, rarely the fallback
        left, top, w, h = random_resized_crop_box(width, height, (0.3, 1.0), (3 / 4, 4 / 3), rng)
        assert 0 <= left and 0 <= top and left + w <= width and top + h <= height and w >= 1 and h >= 1
        if (w, h) != (width, height):  # a sampled crop (not the whole-image fallback): area and aspect hold
            assert w * h >= 0.3 * width * height - (w + h + 1)  # to rounding of each side
            assert 3 / 4 - 1 / min(w, h) <= w / h <= 4 / 3 + 1 / min(w, h)


def test_random_resized_crop_falls_back_to_a_centred_crop_of_the_widest_allowed_aspect() -> None:
    # A 600 x 20 strip: no crop of 30-100% of its area has an aspect in [3/4, 4/3], so (as torchvision does) the
    # centre of the strip is taken at the nearest allowed aspect.
    assert random_resized_crop_box(600, 20, (0.3, 1.0), (3 / 4, 4 / 3), np.random.default_rng(0)) == (
        286.0, 0.0, 27.0, 20.0)


def test_augmentation_draws_come_from_seed_step_rank_and_position_only() -> None:
    draws = lambda *key: sample_rng(*key).random(4).tolist()  # noqa: E731
    assert draws(0, 5, 0, 3) == draws(0, 5, 0, 3)
    keys = [(0, 5, 0, 3), (1, 5, 0, 3), (0, 6, 0, 3), (0, 5, 1, 3), (0, 5, 0, 4), (-1, 5, 0, 3)]
    assert len({tuple(draws(*k)) for k in keys}) == len(keys)


def test_draft_decoding_matches_full_decoding_of_a_large_jpeg(tmp_path: Path) -> None:
    y, x = np.mgrid[0:480, 0:480]
    pixels = np.stack([x * 255 // 479, y * 255 // 479, (x + y) * 255 // 958], axis=2).astype(np.uint8)
    Image.fromarray(pixels).save(tmp_path / "big.jpg", quality=95)
    box = (40.0, 60.0, 400.0, 380.0)
    with Image.open(tmp_path / "big.jpg") as image:
        drafted = crop_to_tensor(image, box, 32, draft=True)
        assert image.size == (60, 60)  # decoded at 1/8 scale: the crop still spans more than 32 pixels
    with Image.open(tmp_path / "big.jpg") as image:
        full = crop_to_tensor(image, box, 32, draft=False)
    assert drafted.shape == full.shape == (3, 32, 32)
    assert (drafted.float() - full.float()).abs().mean() < 4  # grey levels out of 255


def test_horizontal_flip_mirrors_the_crop(tmp_path: Path) -> None:
    pixels = np.zeros((40, 40, 3), np.uint8)
    pixels[:, :10] = 255  # a bright left edge
    image = Image.fromarray(pixels)
    plain = crop_to_tensor(image, (0.0, 0.0, 40.0, 40.0), 20)
    flipped = crop_to_tensor(image, (0.0, 0.0, 40.0, 40.0), 20, flip=True)
    assert torch.equal(flipped, plain.flip(-1))
    assert plain[:, :, 0].float().mean() > 200 and flipped[:, :, -1].float().mean() > 200


@pytest.mark.parametrize("turn", range(1, 9))
def test_a_photo_is_cropped_upright_as_its_exif_orientation_says(tmp_path: Path, turn: int) -> None:
    # A camera stores the pixels as shot and says in EXIF how to turn them. Crops must be drawn on the upright photo:
    # the same as cropping the photo turned by Pillow's own exif_transpose (within a grey level of resampling).
    pixels = (np.random.default_rng(turn).random((48, 80, 3)) * 255).astype(np.uint8)
    pixels[:12, :24] = 255  # a bright corner, so every turn looks different
    exif = Image.Exif()
    exif[0x0112] = turn
    Image.fromarray(pixels).save(tmp_path / "photo.png", exif=exif)
    with Image.open(tmp_path / "photo.png") as stored, Image.open(tmp_path / "photo.png") as raw:
        upright = ImageOps.exif_transpose(raw)
        assert upright.size == ((48, 80) if turn >= 5 else (80, 48))
        for box in ((5.0, 7.0, 30.0, 20.0), (0.0, 0.0, float(upright.size[0]), float(upright.size[1]))):
            ours, theirs = crop_to_tensor(stored, box, 16, draft=False), crop_to_tensor(upright, box, 16, draft=False)
            assert (ours.int() - theirs.int()).abs().max() <= 1, box
        rng = np.random.default_rng(0)
        assert TrainTransform(16)(stored, rng).shape == EvalTransform(16)(stored).shape == (3, 16, 16)


def test_a_turned_jpeg_is_still_drafted(tmp_path: Path) -> None:
    y, x = np.mgrid[0:320, 0:480]
    pixels = np.stack([x * 255 // 479, y * 255 // 319, (x + y) * 255 // 798], axis=2).astype(np.uint8)
    exif = Image.Exif()
    exif[0x0112] = 6  # stored landscape, shown portrait
    Image.fromarray(pixels).save(tmp_path / "turned.jpg", quality=95, exif=exif)
    box = (20.0, 40.0, 280.0, 400.0)  # on the upright 320 x 480 photo
    with Image.open(tmp_path / "turned.jpg") as image:
        drafted = crop_to_tensor(image, box, 32, draft=True)
        assert image.size == (60, 40)  # decoded at 1/8 scale
    with Image.open(tmp_path / "turned.jpg") as image:
        full = crop_to_tensor(ImageOps.exif_transpose(image), box, 32, draft=False)
    assert (drafted.float() - full.float()).abs().mean() < 4  # grey levels out of 255


# ------------------------------------------------------------------------------------------------- training runs

FAST = [*SMALL_MODEL, "optim.steps=8", "optim.batch_size=16", "optim.warmup_steps=2", "eval.probe_epochs=5",
        "diagnostics.eval_every_steps=4", "logging.checkpoint_every_steps=4", "diagnostics.basic_every_steps=2",
        "diagnostics.covariance_every_steps=3", "diagnostics.weights_health_every_steps=4",
        "diagnostics.param_distance_every_steps=3", "diagnostics.fixed_batch_every_steps=3",
        "logging.tensorboard=false", "logging.progress_bar=false", "eval.knn_k=5"]
NONDETERMINISTIC_PREFIXES = ("time/", "system/", "memory/")


def deterministic_rows(path: Path):
    frame = read_metrics(path).scalars
    keep = [c for c in frame.columns if not c.startswith(NONDETERMINISTIC_PREFIXES) and c != "attempt"]
    return frame[keep].sort_values("step", kind="stable").reset_index(drop=True)


def test_resume_with_two_workers_reproduces_the_uninterrupted_run(tmp_path: Path, capfd) -> None:
    folder = write_jpeg_folder(tmp_path / "jpegs", 240, max_side=300, seed=1)
    cfg = lambda: folder_config(folder, *FAST, "data.num_workers=2",  # noqa: E731
                                f"logging.runs_dir={json.dumps(str(tmp_path / 'runs'))}")
    straight = Trainer(cfg(), run_dir=tmp_path / "runs" / "straight", quiet=True)
    assert straight.run() == "finished"

    first = Trainer(cfg(), run_dir=tmp_path / "runs" / "resumed", quiet=True)
    assert first.run(max_steps=4) == "paused"
    first.close()  # what a kill leaves: the step-4 checkpoint, the stream up to step 4
    second = Trainer(load_run_config(tmp_path / "runs" / "resumed"), run_dir=tmp_path / "runs" / "resumed",
                     resume=True, quiet=True)
    assert second.step == 4 and second.run() == "finished"

    a = deterministic_rows(tmp_path / "runs" / "straight" / "metrics.jsonl")
    b = deterministic_rows(tmp_path / "runs" / "resumed" / "metrics.jsonl")
    assert list(a.columns) == list(b.columns) and a["step"].tolist() == b["step"].tolist()
    assert "knn/accuracy" in a.columns and "data/skipped_images" in a.columns
    for column in a.columns:
        for x, y in zip(a[column].tolist(), b[column].tolist()):
            assert (math.isnan(x) and math.isnan(y)) or x == pytest.approx(y, rel=1e-5, abs=1e-7), column
    # The corrupt file reached training in both runs: named on stderr, counted in the stream, never a crash.
    assert "skipped unreadable image" in capfd.readouterr().err
    skipped = a["data/skipped_images"].dropna()
    assert skipped.is_monotonic_increasing and skipped.iloc[-1] >= 1


def test_training_on_a_memory_mapped_npz_streams_crops(tmp_path: Path) -> None:
    rng = np.random.default_rng(3)
    images = rng.integers(0, 256, size=(120, 40, 48, 3), dtype=np.uint8)  # not square, not the model size
    np.savez(tmp_path / "d.npz", images=images, labels=np.arange(120) % 3)
    cfg = apply_overrides(preset("tiny"), [*FAST, "optim.steps=4", "data.dataset=npz",
                                           f"data.path={json.dumps(str(tmp_path / 'd.npz'))}",
                                           f"logging.runs_dir={json.dumps(str(tmp_path / 'runs'))}"])
    trainer = Trainer(cfg, run_dir=tmp_path / "runs" / "npz", quiet=True)
    assert trainer.run() == "finished"
    images_seen, _ = trainer.last_batch
    assert images_seen.shape == (16, 3, 32, 32)
    frame = read_metrics(tmp_path / "runs" / "npz" / "metrics.jsonl").scalars
    assert frame["step"][frame["knn/accuracy"].notna()].tolist() == [0, 4]  # random init, end: held-out npz rows
    assert (frame["data/skipped_images"].dropna() == 0).all()
