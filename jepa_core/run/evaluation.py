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
    mask_sampler_for,
    ImageDataset,
    ImageSource,
    eval_batches,
    eval_transform_for,
    normalize_images,
)
from jepa_core.method.masks import MaskBatch
from jepa_core.method.model import JEPA
from jepa_core.method.probes import extract_features, labelled_order, score_features
from jepa_core.metrics.representation import lidar_tensor
from jepa_core.metrics.artifacts import (
    mask_overlay_grid,
    retrieval_grid,
    save_png_with_meta,
)

# The nearest-neighbour artifact: this many held-out queries, each shown with its RETRIEVAL_K nearest among the rest.
# Config validation needs RETRIEVAL_QUERIES + RETRIEVAL_K held-out images when eval.artifacts is on.
RETRIEVAL_QUERIES, RETRIEVAL_K = 8, 5
LIDAR_SEED = 7411  # the masks of LiDAR's views: fixed, so that only the model changes between readings
LIDAR_NOISE_DRAWS = 4  # other sets of views at step 0, for the noise of one reading
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
    if cfg.eval.lidar_images:
        metrics.update(lidar_metrics(model, heldout, cfg, device, noise_draws=LIDAR_NOISE_DRAWS if step == 0 else 0))
    if artifacts_dir is not None:
        if images is not None and masks is not None:
            grid = mask_overlay_grid(images.cpu(), masks.context_idx.cpu(), masks.target_idx.cpu(),
                                     cfg.model.patch_size)
            save_png_with_meta(artifacts_dir, "masks", step, grid,
                               {"kind": "masks", "context_count": int(masks.context_idx.shape[1]),
                                "targets": int(masks.target_idx.shape[1])})
        save_retrieval(model, heldout, cfg, device, step, artifacts_dir, on_skipped=on_skipped)
    return metrics


@torch.no_grad()
def lidar_reading(model: JEPA, images: torch.Tensor, cfg: Config, draw: int = 0) -> float:
    """LiDAR of the target encoder over `images` (normalised, on the model's device): each image a class, its
    eval.lidar_views views the mean-pooled target-encoder tokens of one context mask of the run's own sampler. The
    masks come from a fixed seed (`draw` picks another set), so successive readings differ only by the model."""
    sampler = mask_sampler_for(cfg)
    generator = torch.Generator().manual_seed(LIDAR_SEED + draw)
    encoder, was_training = model.target_encoder, model.target_encoder.training
    encoder.eval()
    try:
        views = [encoder(images, sampler.sample(images.shape[0], generator).context_idx.to(images.device)
                         ).float().mean(dim=1) for _ in range(cfg.eval.lidar_views)]
    finally:
        encoder.train(was_training)
    return float(lidar_tensor(torch.stack(views, dim=1).cpu()))


def lidar_metrics(model: JEPA, heldout: Heldout, cfg: Config, device: torch.device,
                  noise_draws: int = 0) -> dict[str, float]:
    """{"target/lidar"} on the first eval.lidar_images held-out images (labels not needed); with `noise_draws`,
    also "target/lidar_noise": the spread of the reading over that many other sets of views (at step 0)."""
    count = min(cfg.eval.lidar_images, len(heldout))
    if count < 2:
        return {}
    images = normalize_images(heldout_images(heldout, torch.arange(count), cfg).to(device))
    metrics = {"target/lidar": lidar_reading(model, images, cfg)}
    if noise_draws:
        readings = [metrics["target/lidar"]] + [lidar_reading(model, images, cfg, draw) for draw in
                                                range(1, noise_draws + 1)]
        metrics["target/lidar_noise"] = float(torch.tensor(readings, dtype=torch.float64).std())
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
