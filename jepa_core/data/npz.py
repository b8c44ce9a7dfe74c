"""An .npz archive, memory-mapped: "images" (required), "labels" (optional int, -1 = unlabelled), "class_names".

The images array is never read whole. An archive written by `np.savez` stores each array uncompressed, so its
bytes sit at a fixed offset inside the zip file and `np.memmap` can map them in place: a worker reading image i
touches only that image's pages. `np.savez_compressed` archives cannot be mapped and are refused with the fix.
The map is opened lazily in each process (a pickled source carries the offset, not the pixels).
"""

from __future__ import annotations

import struct
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch
from PIL import Image

from jepa_core.data.base import DataError, UnreadableImage

_CHECKED_AT_OPEN = 16  # float archives: this many leading images are range-checked at open, the rest when read


@dataclass(frozen=True)
class MappedArray:
    """Where an uncompressed .npy member lies inside its .npz file."""

    file: str
    offset: int
    shape: tuple[int, ...]
    dtype: str
    fortran_order: bool


def _locate(file: Path, member: str) -> MappedArray:
    with zipfile.ZipFile(file) as archive:
        info = archive.getinfo(member)
    if info.compress_type != zipfile.ZIP_STORED:
        raise DataError(f"{file}: '{member[:-4]}' is compressed (np.savez_compressed), so it cannot be memory-mapped; "
                        "re-save the arrays with np.savez (uncompressed)")
    with open(file, "rb") as fh:
        fh.seek(info.header_offset)
        local = fh.read(30)  # zip local file header: the data follows its variable-length name and extra field
        if len(local) < 30 or local[:4] != b"PK\x03\x04":
            raise DataError(f"{file}: damaged zip header for '{member}'")
        name_len, extra_len = struct.unpack("<HH", local[26:30])
        fh.seek(info.header_offset + 30 + name_len + extra_len)
        version = np.lib.format.read_magic(fh)
        reader = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
        shape, fortran_order, dtype = reader(fh)
        offset = fh.tell()
    if dtype.hasobject:
        raise DataError(f"{file} key '{member[:-4]}': object arrays need pickle, which is not allowed")
    return MappedArray(str(file), offset, tuple(int(s) for s in shape), dtype.str, bool(fortran_order))


def _layout(shape: tuple[int, ...], where: str) -> str:
    if len(shape) == 3:
        return "nhw"
    if len(shape) == 4:
        if shape[-1] in (1, 3, 4):
            return "nhwc"
        if shape[1] in (1, 3, 4):
            return "nchw"
        raise DataError(f"{where}: cannot find the channel axis in shape {shape}; expected "
                        "[N, H, W, C] or [N, C, H, W] with C in 1, 3 or 4")
    raise DataError(f"{where}: expected [N, H, W, C], [N, C, H, W] or [N, H, W], got shape {shape}")


def _to_uint8_hwc(array: np.ndarray, layout: str, where: str) -> np.ndarray:
    if layout == "nchw":
        array = np.transpose(array, (1, 2, 0))
    elif layout == "nhw":
        array = array[:, :, None]
    if array.dtype != np.uint8:
        if not np.isfinite(array).all():
            raise UnreadableImage(f"{where}: float image contains NaN or infinite values")
        lo, hi = float(array.min()), float(array.max())
        if lo < 0.0 or hi > 1.0:
            raise UnreadableImage(f"{where}: float images must lie in [0, 1], found range [{lo:.4g}, {hi:.4g}]")
        array = np.rint(array * 255.0).astype(np.uint8)
    channels = array.shape[2]
    if channels == 1:
        array = np.repeat(array, 3, axis=2)
    elif channels == 4:
        array = array[:, :, :3]  # drop alpha
    return np.ascontiguousarray(array)


@dataclass
class NpzSource:
    images: MappedArray
    layout: str  # nhwc | nchw | nhw
    rows: np.ndarray  # int64 [N]: which rows of the archive this source (or split) holds
    labels: torch.Tensor  # int64 [N]
    class_names: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._map: np.memmap | None = None

    def __getstate__(self) -> dict:
        state = dict(self.__dict__)
        state["_map"] = None  # each process maps the file itself
        return state

    def __len__(self) -> int:
        return int(self.rows.shape[0])

    @property
    def array(self) -> np.memmap:
        if self._map is None:
            a = self.images
            self._map = np.memmap(a.file, dtype=np.dtype(a.dtype), mode="r", offset=a.offset, shape=a.shape,
                                  order="F" if a.fortran_order else "C")
        return self._map

    def describe(self, index: int) -> str:
        return f"{self.images.file} images[{int(self.rows[index])}]"

    def pixels(self, index: int) -> np.ndarray:
        """uint8 [H, W, 3] of image `index`; UnreadableImage for a float image outside [0, 1]."""
        return _to_uint8_hwc(np.asarray(self.array[int(self.rows[index])]), self.layout, self.describe(index))

    def open(self, index: int) -> Image.Image:
        return Image.fromarray(self.pixels(index), mode="RGB")

    def subset(self, indices: torch.Tensor) -> NpzSource:
        rows = indices.numpy() if isinstance(indices, torch.Tensor) else np.asarray(indices)
        return NpzSource(self.images, self.layout, self.rows[rows], self.labels[torch.as_tensor(rows)],
                         list(self.class_names))


def open_npz(path: str | Path) -> NpzSource:
    """Map an .npz archive's images; every layout or dtype problem is a DataError naming the file and key."""
    file = Path(path)
    if not file.exists():
        raise DataError(f"data.path {file} does not exist")
    if not file.is_file():
        raise DataError(f"data.path {file} is not a file (the npz dataset needs an .npz file)")
    try:
        with zipfile.ZipFile(file) as archive:
            members = set(archive.namelist())
    except (OSError, zipfile.BadZipFile) as exc:
        raise DataError(f"cannot read {file} as .npz: {exc}") from exc
    if "images.npy" not in members:
        keys = ", ".join(sorted(m[:-4] for m in members if m.endswith(".npy"))) or "none"
        raise DataError(f"{file} has no key 'images' (keys: {keys})")
    where = f"{file} key 'images'"
    try:
        mapped = _locate(file, "images.npy")
    except (OSError, ValueError, zipfile.BadZipFile) as exc:
        if isinstance(exc, DataError):
            raise
        raise DataError(f"cannot read arrays from {file}: {exc}") from exc
    layout = _layout(mapped.shape, where)
    dtype = np.dtype(mapped.dtype)
    if dtype != np.uint8 and not np.issubdtype(dtype, np.floating):
        raise DataError(f"{where}: dtype must be uint8 or float in [0, 1], got {dtype}")
    n = mapped.shape[0]
    if n == 0:
        raise DataError(f"{where}: contains no images")
    labels, class_names = _labels(file, members, n)
    source = NpzSource(mapped, layout, np.arange(n, dtype=np.int64), labels, class_names)
    if dtype != np.uint8:  # the usual mistake (0-255 floats) is caught now, not as a skipped image per read
        for i in range(min(n, _CHECKED_AT_OPEN)):
            try:
                source.pixels(i)
            except UnreadableImage as exc:
                raise DataError(str(exc).replace(source.describe(i), where)) from exc
    return source


def _labels(file: Path, members: set[str], n: int) -> tuple[torch.Tensor, list[str]]:
    try:
        with np.load(file, allow_pickle=False) as archive:  # reads only the small members asked for
            raw_labels = archive["labels"] if "labels.npy" in members else None
            raw_names = archive["class_names"] if "class_names.npy" in members else None
    except (OSError, ValueError) as exc:
        raise DataError(f"cannot read arrays from {file}: {exc}") from exc
    if raw_labels is None:
        labels = torch.full((n,), -1, dtype=torch.int64)
    else:
        if raw_labels.shape != (n,) or not np.issubdtype(raw_labels.dtype, np.integer):
            raise DataError(f"{file} key 'labels': expected integer array of shape ({n},), got "
                            f"{raw_labels.dtype} {raw_labels.shape}")
        labels = torch.from_numpy(raw_labels.astype(np.int64))
        if (labels < -1).any():
            raise DataError(f"{file} key 'labels': labels must be >= 0 (or -1 for unlabelled)")
    num_classes = int(labels.max().item()) + 1
    if raw_names is not None:
        class_names = [str(name) for name in raw_names.reshape(-1).tolist()]
        if len(class_names) < num_classes:
            raise DataError(f"{file} key 'class_names': {len(class_names)} names for {num_classes} label values")
    else:
        class_names = [str(i) for i in range(num_classes)]
    return labels, class_names
