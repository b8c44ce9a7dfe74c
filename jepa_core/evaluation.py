"""Evaluation at its cadence: kNN / linear probe on the held-out split, plus the PNG artifacts a person looks at."""

from __future__ import annotations

from pathlib import Path

import torch
import torch.nn.functional as F

from jepa_core.artifacts import mask_overlay_grid, retrieval_grid, save_png_with_meta
from jepa_core.config import Config
from jepa_core.data import ImageDataset, normalize_images
from jepa_core.eval import evaluate, extract_features
from jepa_core.masks import MaskBatch
from jepa_core.model import JEPA

# The nearest-neighbour artifact: this many held-out queries, each shown with its RETRIEVAL_K nearest among the rest.
# Config validation needs RETRIEVAL_QUERIES + RETRIEVAL_K held-out images when eval.artifacts is on.
RETRIEVAL_QUERIES, RETRIEVAL_K = 8, 5


def run_evaluation(model: JEPA, heldout: ImageDataset, cfg: Config, device: torch.device, step: int,
                   artifacts_dir: Path | None, images: torch.Tensor | None, masks: MaskBatch | None) -> dict[str, float]:
    metrics = evaluate(model.target_encoder, heldout.images, heldout.labels, normalize_images, device,
                       knn_k=cfg.eval.knn_k, probe_epochs=cfg.eval.probe_epochs, seed=cfg.runtime.seed)
    if artifacts_dir is not None:
        if images is not None and masks is not None:
            grid = mask_overlay_grid(images.cpu(), masks.context_idx.cpu(), masks.target_idx.cpu(),
                                     cfg.model.patch_size)
            save_png_with_meta(artifacts_dir, "masks", step, grid,
                               {"kind": "masks", "context_count": int(masks.context_idx.shape[1]),
                                "targets": int(masks.target_idx.shape[1])})
        save_retrieval(model, heldout, device, step, artifacts_dir)
    return metrics


def save_retrieval(model: JEPA, heldout: ImageDataset, device: torch.device, step: int, artifacts_dir: Path,
                   queries: int = RETRIEVAL_QUERIES, gallery: int = 512, k: int = RETRIEVAL_K) -> Path:
    """Nearest neighbours of a few held-out images among the next `gallery` ones, by cosine of pooled features."""
    n = min(len(heldout), queries + gallery)
    feats = F.normalize(extract_features(model.target_encoder, heldout.images[:n], normalize_images, device=device),
                        dim=1)
    sims = feats[:queries] @ feats[queries:].T
    nearest = sims.topk(min(k, n - queries), dim=1).indices + queries
    grid = retrieval_grid(heldout.images[:queries], heldout.images[nearest])
    labels = heldout.labels
    hits = (labels[nearest] == labels[:queries, None]).float().mean().item() if labels.min() >= 0 else None
    return save_png_with_meta(artifacts_dir, "neighbours", step, grid,
                              {"kind": "nearest_neighbours", "queries": queries, "gallery": n - queries, "k": k,
                               "label_agreement": hits})
