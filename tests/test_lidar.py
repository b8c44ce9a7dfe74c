"""LiDAR (jepa_core.metrics.representation.lidar_tensor): the effective rank of the linear-discriminant matrix of
surrogate classes, and the step's own surrogate classes (each image's target blocks)."""

from __future__ import annotations

import math

import pytest
import torch

from jepa_core.metrics.representation import lidar_tensor


def classes(n: int, q: int, dim: int, informative: int, spread: float, seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    centres = torch.zeros(n, 1, dim)
    centres[:, :, :informative] = torch.randn(n, 1, informative, generator=g)
    return centres + spread * torch.randn(n, q, dim, generator=g)


def test_lidar_counts_the_directions_that_separate_the_classes():
    # well separated along k directions, with a tiny within-class spread: about k discriminative directions
    for k in (2, 5, 12):
        value = float(lidar_tensor(classes(200, 4, 32, k, 0.01)))
        assert 0.7 * k < value < 1.3 * k, (k, value)


def test_lidar_is_bounded_and_invariant_to_scale_and_rotation():
    x = classes(64, 3, 24, 6, 0.2)
    value = float(lidar_tensor(x))
    assert 1.0 <= value <= min(64 - 1, 24)
    assert math.isclose(float(lidar_tensor(5.0 * x)), value, rel_tol=1e-4)
    rotation, _ = torch.linalg.qr(torch.randn(24, 24, generator=torch.Generator().manual_seed(1)))
    assert math.isclose(float(lidar_tensor(x @ rotation)), value, rel_tol=1e-3)


def test_lidar_is_nan_for_non_finite_input_and_refuses_a_bad_shape():
    x = classes(8, 3, 4, 2, 0.1)
    x[0, 0, 0] = float("nan")
    assert math.isnan(float(lidar_tensor(x)))
    with pytest.raises(ValueError, match="lidar"):
        lidar_tensor(torch.randn(8, 1, 4))
    with pytest.raises(ValueError, match="lidar"):
        lidar_tensor(torch.randn(8, 4))


def small_setup():
    from jepa_core.config import apply_overrides, preset
    from jepa_core.data import make_shapes
    from jepa_core.method.model import JEPA

    cfg = apply_overrides(preset("tiny"), ["model.img_size=16", "model.embed_dim=32", "model.depth=1",
                                           "model.num_heads=2", "model.pred_dim=16", "model.pred_depth=1",
                                           "model.pred_num_heads=2", "masks.num_targets=2", "eval.lidar_images=24"])
    torch.manual_seed(0)
    return cfg, JEPA(cfg.model), make_shapes(40, 16, cfg.data.num_classes, seed=1)


def test_the_evaluation_reads_lidar_from_fixed_views_and_measures_its_noise_at_step_0():
    from jepa_core.run.evaluation import lidar_metrics

    cfg, model, heldout = small_setup()
    plain = lidar_metrics(model, heldout, cfg, torch.device("cpu"))
    assert set(plain) == {"target/lidar"} and 1.0 <= plain["target/lidar"] <= 23
    assert lidar_metrics(model, heldout, cfg, torch.device("cpu")) == plain  # the same views every time
    at_start = lidar_metrics(model, heldout, cfg, torch.device("cpu"), noise_draws=3)
    assert at_start["target/lidar"] == plain["target/lidar"] and at_start["target/lidar_noise"] > 0
    assert model.target_encoder.training  # left as it was found


def test_lidar_settings_are_validated():
    from jepa_core.config import Config, ConfigError
    from jepa_core.run.validation import validate_config

    for key, value in (("lidar_images", 1), ("lidar_images", -2), ("lidar_views", 1)):
        cfg = Config()
        setattr(cfg.eval, key, value)
        with pytest.raises(ConfigError, match=f"eval.{key}"):
            validate_config(cfg)
