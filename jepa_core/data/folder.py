"""An image folder, streamed: one subfolder per class (labelled) or image files directly in it (unlabelled).

Opening the folder lists it and nothing more; pixels are decoded by index in the DataLoader workers. File names are
held in one numpy bytes array, not a list of Python strings: forked workers read it without touching reference
counts, so a million-file listing is not copied page by page into every worker.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch
from PIL import Image

from jepa_core.data.base import IMAGE_EXTENSIONS, DataError, UnreadableImage
from jepa_core.data.transforms import DECODE_ERRORS


@dataclass(frozen=True)
class FolderListing:
    files: list[str]  # paths relative to the root, sorted within each class
    labels: list[int]  # class id per file, -1 for a flat (unlabelled) folder
    class_names: list[str]
    ignored: int  # files skipped because their extension is not an image's


def _entries(folder: Path) -> list[os.DirEntry]:
    with os.scandir(folder) as it:
        return sorted((e for e in it if not e.name.startswith(".")), key=lambda e: e.name)


def _split_images(entries: list[os.DirEntry]) -> tuple[list[str], int]:
    images, ignored = [], 0
    for e in entries:
        if e.is_file():
            if os.path.splitext(e.name)[1].lower() in IMAGE_EXTENSIONS:
                images.append(e.name)
            else:
                ignored += 1
    return images, ignored


def list_image_folder(path: str | Path) -> FolderListing:
    """The folder's images and labels from its listing; DataError naming the path for a layout it cannot use."""
    root = Path(path)
    if not root.exists():
        raise DataError(f"data.path {root} does not exist")
    if not root.is_dir():
        raise DataError(f"data.path {root} is not a folder (the folder dataset needs a directory)")
    entries = _entries(root)
    class_dirs = [e for e in entries if e.is_dir()]
    loose, ignored = _split_images(entries)
    if class_dirs and loose:
        raise DataError(f"data.path {root} mixes class subfolders with loose images (e.g. {loose[0]}); "
                        "use either one subfolder per class or a flat folder of unlabelled images")
    kinds = ", ".join(sorted(IMAGE_EXTENSIONS))
    if not class_dirs:
        if not loose:
            raise DataError(f"data.path {root} contains no images ({kinds})")
        return FolderListing(loose, [-1] * len(loose), [], ignored)
    files: list[str] = []
    labels: list[int] = []
    for class_id, class_dir in enumerate(class_dirs):
        names, skipped = _split_images(_entries(Path(class_dir.path)))
        ignored += skipped
        if not names:
            raise DataError(f"class folder {class_dir.path} contains no images ({kinds})")
        files += [f"{class_dir.name}/{name}" for name in names]
        labels += [class_id] * len(names)
    return FolderListing(files, labels, [e.name for e in class_dirs], ignored)


@dataclass
class FolderSource:
    """Images of a folder by index; `open(i)` is lazy (PIL reads the header), so JPEGs can be drafted."""

    root: str
    files: np.ndarray  # bytes [N], paths relative to root (os.fsencode)
    labels: torch.Tensor  # int64 [N]
    class_names: list[str] = field(default_factory=list)
    ignored: int = 0

    def __len__(self) -> int:
        return int(self.files.shape[0])

    def path(self, index: int) -> str:
        return os.path.join(self.root, os.fsdecode(bytes(self.files[index])))

    def describe(self, index: int) -> str:
        return self.path(index)

    def open(self, index: int) -> Image.Image:
        path = self.path(index)
        try:
            return Image.open(path)
        except DECODE_ERRORS as exc:
            raise UnreadableImage(f"cannot read image file {path}: {exc}") from exc

    def subset(self, indices: torch.Tensor) -> FolderSource:
        rows = indices.numpy() if isinstance(indices, torch.Tensor) else np.asarray(indices)
        return FolderSource(self.root, self.files[rows], self.labels[torch.as_tensor(rows)], list(self.class_names),
                            self.ignored)


def open_image_folder(path: str | Path) -> FolderSource:
    listing = list_image_folder(path)
    files = np.array([os.fsencode(f) for f in listing.files], dtype=np.bytes_)
    return FolderSource(str(Path(path)), files, torch.tensor(listing.labels, dtype=torch.int64),
                        listing.class_names, listing.ignored)
