import pytest
import torch

from jepa_core.config import ModelConfig
from torch import nn

from jepa_core.method.probes import evaluate, extract_features, knn_accuracy, linear_probe
from jepa_core.method.model import VisionTransformer


def blobs(n_per_class: int, num_classes: int = 4, dim: int = 16, spread: float = 0.3, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    centres = torch.randn(num_classes, dim, generator=g) * 3.0
    y = torch.arange(num_classes).repeat_interleave(n_per_class)
    x = centres[y] + spread * torch.randn(len(y), dim, generator=g)
    perm = torch.randperm(len(y), generator=g)
    return x[perm], y[perm]


def halves(x, y):
    h = len(y) // 2
    return x[:h], y[:h], x[h:], y[h:]


def test_knn_separable_blobs_near_perfect():
    assert knn_accuracy(*halves(*blobs(100))) >= 0.99


def test_knn_random_labels_near_chance():
    x, _ = blobs(200)
    y = torch.randint(0, 4, (len(x),), generator=torch.Generator().manual_seed(1))
    assert abs(knn_accuracy(*halves(x, y)) - 0.25) < 0.08


def test_probe_separable_blobs_near_perfect():
    train_acc, val_acc = linear_probe(*halves(*blobs(100)))
    assert train_acc >= 0.99 and val_acc >= 0.99


def test_probe_random_labels_near_chance_on_val():
    x, _ = blobs(200)
    y = torch.randint(0, 4, (len(x),), generator=torch.Generator().manual_seed(1))
    _, val_acc = linear_probe(*halves(x, y))
    assert abs(val_acc - 0.25) < 0.08


def test_probe_deterministic():
    data = halves(*blobs(50, spread=3.0))
    assert linear_probe(*data) == linear_probe(*data)


def test_bad_shapes_raise():
    x, y = blobs(10)
    with pytest.raises(ValueError, match="knn_accuracy"):
        knn_accuracy(x, y[:-1], x, y)
    with pytest.raises(ValueError, match="linear_probe"):
        linear_probe(x, y, x[:, :3].flatten(), y)


class MeanColour(nn.Module):
    """Stand-in encoder: 4 'tokens' each holding the mean colour of one image quadrant."""

    def forward(self, images):
        quads = nn.functional.adaptive_avg_pool2d(images, 2)  # [B, C, 2, 2]
        return quads.flatten(2).transpose(1, 2)  # [B, 4, C]


def colour_images(n: int = 80, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    labels = torch.arange(n) % 2
    images = torch.randint(0, 60, (n, 3, 8, 8), generator=g, dtype=torch.uint8)
    images[labels == 1, 0] += 150  # class 1 is red
    return images, labels


def to_float(batch):
    return batch.float() / 255.0


def test_extract_features_shapes_and_pooling():
    images, _ = colour_images(10)
    feats = extract_features(MeanColour(), images, to_float, batch_size=3)
    assert feats.shape == (10, 3) and feats.dtype == torch.float32
    assert torch.allclose(feats, to_float(images).mean(dim=(2, 3)), atol=1e-6)
    with_grid = extract_features(MeanColour(), images, to_float, batch_size=4, spatial_grid=2)
    assert with_grid.shape == (10, 3 * 5)
    assert torch.allclose(with_grid[:, :3], feats, atol=1e-6)


def test_extract_features_restores_training_mode():
    vit = VisionTransformer(img_size=8, patch_size=4, in_chans=3, embed_dim=16, depth=1, num_heads=2, mlp_ratio=2.0)
    vit.train()
    images, _ = colour_images(5)
    assert extract_features(vit, images, to_float).shape == (5, 16)
    assert vit.training


def test_evaluate_keys_values_and_unlabelled():
    images, labels = colour_images(80)
    labels[:6] = -1  # ignored
    result = evaluate(MeanColour(), images, labels, to_float, "cpu", knn_k=5, probe_epochs=50, seed=3)
    assert set(result) == {"knn/accuracy", "linear_probe/train_acc", "linear_probe/val_acc"}
    assert result["knn/accuracy"] >= 0.95 and result["linear_probe/val_acc"] >= 0.95
    assert result == evaluate(MeanColour(), images, labels, to_float, "cpu", knn_k=5, probe_epochs=50, seed=3)
    assert evaluate(MeanColour(), images, torch.full((80,), -1), to_float, "cpu") == {}
    with pytest.raises(ValueError, match="labels"):
        evaluate(MeanColour(), images, labels[:10], to_float, "cpu")


def test_extract_features_from_an_iterable_of_batches_equals_the_tensor_path():
    images, _ = colour_images(10)
    streamed = extract_features(MeanColour(), (images[i:i + 4] for i in range(0, 10, 4)), to_float)
    assert torch.equal(streamed, extract_features(MeanColour(), images, to_float, batch_size=4))


def test_evaluation_streams_a_held_out_source_through_the_pipeline(tmp_path):
    # The held-out split of an .npz is read batch by batch (centre crop, resize; nothing random) and gives exactly
    # what `evaluate` gives on the same images held in memory.
    import json

    import numpy as np

    from jepa_core.config import apply_overrides, preset
    from jepa_core.data import EvalTransform, open_npz
    from jepa_core.data.base import normalize_images
    from jepa_core.run.evaluation import run_evaluation
    from jepa_core.method.model import JEPA

    rng = np.random.default_rng(0)
    labels = np.arange(300) % 3
    pixels = rng.integers(0, 60, size=(300, 20, 24, 3)).astype(np.uint8)
    pixels[labels == 1, ..., 0] += 150
    np.savez(tmp_path / "d.npz", images=pixels, labels=labels)
    cfg = apply_overrides(preset("tiny"), ["data.dataset=npz", f"data.path={json.dumps(str(tmp_path / 'd.npz'))}",
                                           "eval.probe_epochs=20", "eval.knn_k=5", "model.img_size=16"])
    heldout = open_npz(tmp_path / "d.npz")
    model = JEPA(ModelConfig(16, 4, 3, 32, 1, 2, 2.0, 16, 1, 2))
    streamed = run_evaluation(model, heldout, cfg, torch.device("cpu"), 0, tmp_path / "artifacts", None, None)
    whole = torch.stack([EvalTransform(16)(heldout.open(i)) for i in range(len(heldout))])
    in_memory = evaluate(model.target_encoder, whole, heldout.labels, normalize_images, "cpu", knn_k=5,
                         probe_epochs=20, seed=cfg.runtime.seed)
    noise = {k: streamed.pop(k) for k in ("knn/accuracy_noise", "linear_probe/val_acc_noise")}  # step 0 measures it
    assert streamed.pop("target/lidar") >= 1 and streamed.pop("target/lidar_noise") >= 0  # label-free, beside
    assert streamed == in_memory
    assert all(0 <= v < 0.2 for v in noise.values())
    assert sorted(p.name for p in (tmp_path / "artifacts").iterdir()) == ["neighbours_step0000000.json",
                                                                            "neighbours_step0000000.png"]
