"""Evaluation at its cadence: kNN / linear probe on the held-out split, plus the PNG artifacts a person looks at.

The held-out split is read through the same pipeline as training (jepa_core.data), with the evaluation transform
(centre square, resized; nothing random) and without holding it: features are computed batch by batch and only
they are kept. In-memory shapes are sliced exactly as they always were, so their figures are unchanged.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import torch
import torch.nn.functional as F

from jepa_core.config import Config
from jepa_core.data import (
    EvalBatches,
    ImageDataset,
    ImageSource,
    eval_batches,
    eval_transform_for,
    normalize_images,
)
from jepa_core.method.masks import MaskBatch
from jepa_core.method.model import JEPA
from jepa_core.method.probes import extract_features, labelled_order, score_features
from jepa_core.metrics.artifacts import (
    mask_overlay_grid,
    retrieval_grid,
    save_png_with_meta,
)

# The nearest-neighbour artifact: this many held-out queries, each shown with its RETRIEVAL_K nearest among the rest.
# Config validation needs RETRIEVAL_QUERIES + RETRIEVAL_K held-out images when eval.artifacts is on.
RETRIEVAL_QUERIES, RETRIEVAL_K = 8, 5
EVAL_BATCH_SIZE = 256

Heldout = ImageDataset | ImageSource
SkipReport = Callable[[str], None]


def _uint8_batches(heldout: Heldout, indices: torch.Tensor, cfg: Config, device: torch.device,
                   on_skipped: SkipReport | None) -> Iterator[torch.Tensor]:
    transform = None if isinstance(heldout, ImageDataset) else eval_transform_for(cfg)
    batches = EvalBatches(heldout, indices, EVAL_BATCH_SIZE, transform)
    for images, skipped in eval_batches(batches, cfg.data.num_workers, pin_memory=device.type == "cuda"):
        for what, why in skipped:
            if on_skipped is not None:
                on_skipped(f"warning: evaluation: skipped unreadable held-out image {what}: {why}")
        yield images


def heldout_features(model: JEPA, heldout: Heldout, indices: torch.Tensor, cfg: Config, device: torch.device,
                     on_skipped: SkipReport | None = None) -> torch.Tensor:
    """Pooled target-encoder features [len(indices), D] of the held-out images at `indices`, batch by batch."""
    return extract_features(model.target_encoder, _uint8_batches(heldout, indices, cfg, device, on_skipped),
                            normalize_images, device=device)


def heldout_images(heldout: Heldout, indices: torch.Tensor, cfg: Config) -> torch.Tensor:
    """uint8 [*indices.shape, 3, S, S]: a few held-out images as the evaluation sees them (for the artifacts)."""
    if isinstance(heldout, ImageDataset):
        return heldout.images[indices]
    flat = torch.cat(list(_uint8_batches(heldout, indices.flatten(), cfg, torch.device("cpu"), None)))
    return flat.reshape(*indices.shape, *flat.shape[1:])


def run_evaluation(model: JEPA, heldout: Heldout, cfg: Config, device: torch.device, step: int,
                   artifacts_dir: Path | None, images: torch.Tensor | None, masks: MaskBatch | None,
                   on_skipped: SkipReport | None = None) -> dict[str, float]:
    order = labelled_order(heldout.labels, seed=cfg.runtime.seed)
    metrics: dict[str, float] = {}
    if order is not None:
        features = heldout_features(model, heldout, order, cfg, device, on_skipped)
        metrics = score_features(features, heldout.labels[order], knn_k=cfg.eval.knn_k,
                                 probe_epochs=cfg.eval.probe_epochs, seed=cfg.runtime.seed,
                                 noise_splits=cfg.eval.noise_splits if step == 0 else 0)
    if artifacts_dir is not None:
        if images is not None and masks is not None:
            grid = mask_overlay_grid(images.cpu(), masks.context_idx.cpu(), masks.target_idx.cpu(),
                                     cfg.model.patch_size)
            save_png_with_meta(artifacts_dir, "masks", step, grid,
                               {"kind": "masks", "context_count": int(masks.context_idx.shape[1]),
                                "targets": int(masks.target_idx.shape[1])})
        save_retrieval(model, heldout, cfg, device, step, artifacts_dir, on_skipped=on_skipped)
    return metrics


def save_retrieval(model: JEPA, heldout: Heldout, cfg: Config, device: torch.device, step: int, artifacts_dir: Path,
                   queries: int = RETRIEVAL_QUERIES, gallery: int = 512, k: int = RETRIEVAL_K,
                   on_skipped: SkipReport | None = None) -> Path:
    """Nearest neighbours of a few held-out images among the next `gallery` ones, by cosine of pooled features."""
    n = min(len(heldout), queries + gallery)
    feats = F.normalize(heldout_features(model, heldout, torch.arange(n), cfg, device, on_skipped), dim=1)
    sims = feats[:queries] @ feats[queries:].T
    nearest = sims.topk(min(k, n - queries), dim=1).indices + queries
    grid = retrieval_grid(heldout_images(heldout, torch.arange(queries), cfg), heldout_images(heldout, nearest, cfg))
    labels = heldout.labels
    hits = (labels[nearest] == labels[:queries, None]).float().mean().item() if labels.min() >= 0 else None
    return save_png_with_meta(artifacts_dir, "neighbours", step, grid,
                              {"kind": "nearest_neighbours", "queries": queries, "gallery": n - queries, "k": k,
                               "label_agreement": hits})
