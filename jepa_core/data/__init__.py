"""Datasets and the streaming input pipeline (design §10). One concept per module:

- base.py: DataError, the in-memory ImageDataset, the ImageSource protocol, splits, normalisation
- shapes.py: the built-in procedural shapes (in memory, bit-exact per seed)
- folder.py / npz.py: a user's images, listed or memory-mapped, never loaded whole
- transforms.py: decoding (JPEG draft) and I-JEPA's RandomResizedCrop / flip; the evaluation centre crop
- batches.py: which images form step s's batch; the batch datasets the workers compute
- loader.py: DataLoader workers, pinning, prefetch; build.py: all of it from a Config

Owns: every image a run reads and every batch (with its masks) the trainer gets.
Every random draw comes from `jepa_core.common.seeds`, a pure function of (seed, step, rank, position).
May import: `jepa_core.common`, `config`, `method` (the mask sampler runs in the workers' collate).
"""

from jepa_core.data.base import (
                                 IMAGE_EXTENSIONS,
                                 DataError,
                                 ImageDataset,
                                 ImageSource,
                                 UnreadableImage,
                                 heldout_count,
                                 is_labelled,
                                 normalize_images,
                                 split_dataset,
)
from jepa_core.data.batches import (
                                 MAX_SUBSTITUTES,
                                 Batch,
                                 EvalBatches,
                                 TrainBatches,
                                 TrainPlan,
                                 batch_indices,
                                 epoch_of_step,
                                 read_image,
)
from jepa_core.data.build import (
                                 build_datasets,
                                 datasets_for,
                                 eval_transform_for,
                                 mask_sampler_for,
                                 train_feed_for,
                                 train_transform_for,
)
from jepa_core.data.folder import FolderSource, list_image_folder, open_image_folder
from jepa_core.data.loader import TrainFeed, eval_batches
from jepa_core.data.npz import NpzSource, open_npz
from jepa_core.data.shapes import SHAPE_CLASS_NAMES, SHAPE_RADIUS, make_shapes
from jepa_core.data.transforms import (
                                 DECODE_ERRORS,
                                 EvalTransform,
                                 TrainTransform,
                                 crop_to_tensor,
                                 random_resized_crop_box,
)

__all__ = [
    "IMAGE_EXTENSIONS", "DataError", "ImageDataset", "ImageSource", "UnreadableImage",
    "heldout_count", "is_labelled", "normalize_images", "split_dataset", "MAX_SUBSTITUTES", "Batch", "EvalBatches",
    "TrainBatches", "TrainPlan", "batch_indices", "epoch_of_step", "read_image", "build_datasets", "datasets_for",
    "eval_transform_for", "mask_sampler_for", "train_feed_for", "train_transform_for", "FolderSource",
    "list_image_folder", "open_image_folder", "TrainFeed", "eval_batches", "NpzSource", "open_npz",
    "SHAPE_CLASS_NAMES", "SHAPE_RADIUS", "make_shapes", "DECODE_ERRORS",
    "EvalTransform", "TrainTransform", "crop_to_tensor", "random_resized_crop_box",
]
