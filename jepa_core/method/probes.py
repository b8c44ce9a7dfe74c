"""Evaluation of frozen target-encoder features on a labelled held-out split: kNN and a linear probe.

The same code runs at step 0 (random-init baseline) and later, so "it learns" is the gap between the two.
Everything here is deterministic: the probe starts from zeros and is fitted by full-batch L-BFGS, the split is a
seeded permutation, and kNN has no randomness.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import torch
import torch.nn.functional as F
from torch import Tensor, nn

__all__ = ["MIN_LABELLED_IMAGES", "extract_features", "knn_accuracy", "linear_probe", "labelled_order",
           "score_features", "evaluate"]

# The probe-train and probe-val halves need two images each; config validation checks data.num_heldout against it.
MIN_LABELLED_IMAGES = 4


@torch.no_grad()
def extract_features(
    encoder: nn.Module,
    images_uint8: Tensor | Iterable[Tensor],
    preprocess: Callable[[Tensor], Tensor],
    batch_size: int = 256,
    device: torch.device | str = "cpu",
    spatial_grid: int = 0,
) -> Tensor:
    """Frozen features ``[N, F]`` float32 on CPU.

    ``F = D`` (mean of the encoder's tokens) when ``spatial_grid == 0``; with ``spatial_grid = g > 0`` the mean is
    followed by the tokens average-pooled onto a ``g x g`` grid, ``F = D * (1 + g * g)``. ``preprocess`` receives
    a uint8 batch already on ``device`` and returns the encoder's float input. ``images_uint8`` is either one
    tensor, cut into ``batch_size`` batches here, or an iterable of uint8 batches (a data loader over a held-out
    split that is never held whole): only the pooled features are kept.
    """
    if batch_size < 1:
        raise ValueError(f"extract_features: batch_size must be at least 1, got {batch_size}")
    if spatial_grid < 0:
        raise ValueError(f"extract_features: spatial_grid must be >= 0, got {spatial_grid}")
    was_training = encoder.training
    encoder.eval()
    chunks: list[Tensor] = []
    try:
        if isinstance(images_uint8, Tensor):
            batches: Iterable[Tensor] = (images_uint8[first : first + batch_size]
                                         for first in range(0, images_uint8.shape[0], batch_size))
        else:
            batches = images_uint8
        for batch in batches:
            tokens = encoder(preprocess(batch.to(device, non_blocking=True))).float()  # [B, N, D]
            chunks.append(_pool_tokens(tokens, spatial_grid).cpu())
    finally:
        encoder.train(was_training)
    if not chunks:
        raise ValueError("extract_features: no images given")
    return torch.cat(chunks)


def _pool_tokens(tokens: Tensor, spatial_grid: int) -> Tensor:
    pooled = [tokens.mean(dim=1)]
    if spatial_grid > 0:
        batch, num_tokens, dim = tokens.shape
        side = int(round(num_tokens**0.5))
        if side * side != num_tokens:
            raise ValueError(f"extract_features: spatial pooling needs a square token grid, got {num_tokens} tokens")
        grid = tokens.transpose(1, 2).reshape(batch, dim, side, side)
        pooled.append(F.adaptive_avg_pool2d(grid, spatial_grid).flatten(1))
    return torch.cat(pooled, dim=1)


def _check_xy(name: str, x: Tensor, y: Tensor) -> None:
    if x.dim() != 2 or y.dim() != 1 or x.shape[0] != y.shape[0]:
        raise ValueError(f"{name}: expected features [N, F] and labels [N], got {tuple(x.shape)} and {tuple(y.shape)}")
    if x.shape[0] == 0:
        raise ValueError(f"{name}: empty feature set")


@torch.no_grad()
def knn_accuracy(
    train_x: Tensor, train_y: Tensor, test_x: Tensor, test_y: Tensor, k: int = 20, temperature: float = 0.07
) -> float:
    """Weighted kNN (DINO style) on L2-normalised features: each of the ``k`` nearest training points votes for
    its class with weight ``exp(cosine / temperature)``. Returns accuracy in [0, 1]."""
    _check_xy("knn_accuracy train", train_x, train_y)
    _check_xy("knn_accuracy test", test_x, test_y)
    if k < 1 or temperature <= 0:
        raise ValueError(f"knn_accuracy: need k >= 1 and temperature > 0, got k={k}, temperature={temperature}")
    train_n = F.normalize(train_x.float(), dim=1)
    test_n = F.normalize(test_x.float(), dim=1)
    train_y, test_y = train_y.long().to(train_n.device), test_y.long().to(train_n.device)
    num_classes = int(max(train_y.max().item(), test_y.max().item())) + 1
    k = min(k, train_n.shape[0])
    correct = 0
    for first in range(0, test_n.shape[0], 1024):  # bounded memory: [chunk, N_train] similarities at a time
        sims, nn_idx = (test_n[first : first + 1024] @ train_n.T).topk(k, dim=1)
        votes = torch.zeros(sims.shape[0], num_classes, device=sims.device)
        votes.scatter_add_(1, train_y[nn_idx], (sims / temperature).exp())
        correct += int((votes.argmax(dim=1) == test_y[first : first + 1024]).sum().item())
    return correct / test_n.shape[0]


def linear_probe(
    train_x: Tensor,
    train_y: Tensor,
    val_x: Tensor,
    val_y: Tensor,
    epochs: int = 100,
    lr: float = 1.0,
    weight_decay: float = 1e-3,
    seed: int = 0,
) -> tuple[float, float]:
    """Multinomial logistic regression on standardised features; returns ``(train_acc, val_acc)``.

    Features are standardised with the probe-train mean/std. Weights start at zero and are fitted by full-batch
    L-BFGS (at most ``epochs`` iterations, initial step ``lr`` with a strong-Wolfe line search) on cross-entropy + ``weight_decay * ||W||^2 / 2``, so the
    result is deterministic; ``seed`` is kept for API stability (nothing random remains).
    """
    _check_xy("linear_probe train", train_x, train_y)
    _check_xy("linear_probe val", val_x, val_y)
    if epochs < 1 or lr <= 0 or weight_decay < 0:
        raise ValueError(f"linear_probe: need epochs >= 1, lr > 0, weight_decay >= 0; got {epochs}, {lr}, {weight_decay}")
    del seed
    with torch.no_grad():
        mean = train_x.double().mean(dim=0)
        std = train_x.double().std(dim=0, correction=0).clamp_min(1e-6)
        xs_train = (train_x.double() - mean) / std
        xs_val = (val_x.double() - mean) / std
    ys_train, ys_val = train_y.long(), val_y.long()
    num_classes = int(max(ys_train.max().item(), ys_val.max().item())) + 1

    weight = torch.zeros(xs_train.shape[1], num_classes, dtype=torch.float64, requires_grad=True)
    bias = torch.zeros(num_classes, dtype=torch.float64, requires_grad=True)
    optimizer = torch.optim.LBFGS(
        [weight, bias], lr=lr, max_iter=epochs, history_size=20, line_search_fn="strong_wolfe",
        tolerance_grad=1e-9, tolerance_change=1e-12,
    )

    def closure() -> Tensor:
        optimizer.zero_grad()
        loss = F.cross_entropy(xs_train @ weight + bias, ys_train) + 0.5 * weight_decay * weight.pow(2).sum()
        loss.backward()
        return loss

    with torch.enable_grad():
        optimizer.step(closure)
    with torch.no_grad():
        train_acc = ((xs_train @ weight + bias).argmax(dim=1) == ys_train).double().mean().item()
        val_acc = ((xs_val @ weight + bias).argmax(dim=1) == ys_val).double().mean().item()
    return train_acc, val_acc


def evaluate(
    encoder: nn.Module,
    heldout_images: Tensor,
    heldout_labels: Tensor,
    preprocess: Callable[[Tensor], Tensor],
    device: torch.device | str = "cpu",
    knn_k: int = 20,
    probe_epochs: int = 100,
    seed: int = 0,
    batch_size: int = 256,
    spatial_grid: int = 0,
) -> dict[str, float]:
    """kNN and linear-probe accuracy of ``encoder`` on the labelled part of a held-out split.

    Images with a label < 0 are ignored; with no labelled image the result is ``{}``. The labelled images are
    split by a permutation seeded with ``seed`` into probe-train and probe-val halves; kNN classifies probe-val
    against probe-train. Returns ``{"knn/accuracy", "linear_probe/train_acc", "linear_probe/val_acc"}``.
    """
    if heldout_labels.dim() != 1 or heldout_labels.shape[0] != heldout_images.shape[0]:
        raise ValueError(
            f"evaluate: {heldout_images.shape[0]} held-out images but labels of shape {tuple(heldout_labels.shape)}"
        )
    order = labelled_order(heldout_labels, seed)
    if order is None:
        return {}
    features = extract_features(encoder, heldout_images[order], preprocess, batch_size, device, spatial_grid)
    return score_features(features, heldout_labels[order], knn_k, probe_epochs, seed)


def labelled_order(labels: Tensor, seed: int = 0) -> Tensor | None:
    """The labelled held-out indices in a seeded random order (the first half trains the probe), or None when no
    image is labelled. ValueError when there are too few for a probe."""
    labelled = (labels >= 0).nonzero().flatten()
    if labelled.numel() == 0:
        return None
    if labelled.numel() < MIN_LABELLED_IMAGES:
        raise ValueError(f"evaluate: need at least {MIN_LABELLED_IMAGES} labelled held-out images, "
                         f"got {labelled.numel()}")
    return labelled[torch.randperm(labelled.numel(), generator=torch.Generator().manual_seed(seed))]


def score_features(features: Tensor, labels: Tensor, knn_k: int = 20, probe_epochs: int = 100,
                   seed: int = 0, noise_splits: int = 0) -> dict[str, float]:
    """kNN and linear probe on features in `labelled_order`: the first half is probe-train, the rest probe-val.

    `noise_splits` > 0 also measures the noise of one evaluation: the same features scored on that many other
    random halvings (seeded by `seed`), and the standard deviation of the readings over all of them logged as
    `knn/accuracy_noise` and `linear_probe/val_acc_noise`. A probe is deterministic given its split, so which images
    fall in which half is the whole of an evaluation's noise; the rules compare readings against it.
    """
    labels = labels.long()
    scores = _score_split(features, labels, knn_k, probe_epochs)
    if noise_splits > 0:
        generator = torch.Generator().manual_seed(seed + 1)
        readings = [scores] + [_score_split(features[order], labels[order], knn_k, probe_epochs)
                               for order in (torch.randperm(features.shape[0], generator=generator)
                                             for _ in range(noise_splits))]
        for key in ("knn/accuracy", "linear_probe/val_acc"):
            scores[f"{key}_noise"] = float(torch.tensor([r[key] for r in readings], dtype=torch.float64).std())
    return scores


def _score_split(features: Tensor, labels: Tensor, knn_k: int, probe_epochs: int) -> dict[str, float]:
    half = features.shape[0] // 2
    train_x, val_x, train_y, val_y = features[:half], features[half:], labels[:half], labels[half:]
    train_acc, val_acc = linear_probe(train_x, train_y, val_x, val_y, epochs=probe_epochs)
    return {
        "knn/accuracy": knn_accuracy(train_x, train_y, val_x, val_y, k=knn_k),
        "linear_probe/train_acc": train_acc,
        "linear_probe/val_acc": val_acc,
    }
