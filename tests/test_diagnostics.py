"""Known answers for every diagnostic on constructed tensors."""

from __future__ import annotations

import copy
import math

import pytest
import torch
from torch import nn

from jepa_core.method.runtime import eta_seconds
from jepa_core.metrics import diagnostics as dx
from jepa_core.metrics import masks_and_ema as masks
from jepa_core.metrics import representation as rep
from jepa_core.metrics import system_stats
from jepa_core.metrics import weights_health as health


def floats_of(measure, *args, **kwargs) -> dict[str, float]:
    return dx.to_floats(measure(*args, **kwargs))


def float_of(measure, *args) -> float:
    return float(measure(*args))


def _gen(seed: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _rankme_by_svd(x: torch.Tensor) -> float:
    s = torch.linalg.svdvals(x.double())
    p = s / s.sum()
    p = p[p > 0]
    return math.exp(-(p * p.log()).sum().item())


# ------------------------------------------------------------------------------------------ representation


def test_collapsed_features_read_as_dead() -> None:
    row = torch.randn(32, generator=_gen())
    feats = row.expand(100, 32).clone()
    stats = floats_of(rep.representation_stats_tensors, feats, "target")
    assert stats["target/std_mean"] == pytest.approx(0.0, abs=1e-6)
    assert stats["target/std_min"] == pytest.approx(0.0, abs=1e-6)
    assert stats["target/std_l2n"] == pytest.approx(0.0, abs=1e-6)
    assert stats["target/dead_dim_fraction"] == 1.0
    assert stats["target/norm_mean"] == pytest.approx(row.norm().item(), rel=1e-5)
    assert rep.effective_rank(feats) == pytest.approx(1.0, abs=1e-6)


def test_isotropic_gaussian_is_full_rank_and_spread() -> None:
    n, d = 4096, 64
    feats = torch.randn(n, d, generator=_gen(1))
    stats = floats_of(rep.representation_stats_tensors, feats, "target")
    # Measured 63.87 for seeds 0-2: a finite sample's RankMe sits just under D.
    assert rep.effective_rank(feats) > 0.99 * d
    assert stats["target/std_l2n"] == pytest.approx(1 / math.sqrt(d), rel=0.1)
    assert stats["target/std_mean"] == pytest.approx(1.0, rel=0.05)
    assert stats["target/dead_dim_fraction"] == 0.0
    assert stats["target/norm_mean"] == pytest.approx(math.sqrt(d), rel=0.05)
    assert rep.cov_offdiag_abs_mean(feats) < 0.03  # ~ sqrt(2/(pi n)) = 0.0125 for independent dims


def test_dead_dimensions_are_counted_relative_to_scale() -> None:
    feats = torch.randn(512, 10, generator=_gen(2)) * 1000.0
    feats[:, :3] = 7.0  # constant dims: dead whatever the scale
    stats = floats_of(rep.representation_stats_tensors, feats, "pred")
    assert stats["pred/dead_dim_fraction"] == pytest.approx(0.3)
    assert set(stats) >= {"pred/norm_mean", "pred/std_mean", "pred/dead_dim_fraction"}


def test_rank_k_data_has_effective_rank_k() -> None:
    k, d, n = 5, 64, 500
    basis = torch.linalg.qr(torch.randn(d, d, generator=_gen(3)))[0][:k]
    coeffs = torch.linalg.qr(torch.randn(n, n, generator=_gen(4)))[0][:, :k]
    feats = coeffs @ basis * 3.0  # k equal singular values
    assert rep.effective_rank(feats) == pytest.approx(k, rel=1e-6)
    generic = torch.randn(n, k, generator=_gen(5)) @ torch.randn(k, d, generator=_gen(6))
    assert rep.effective_rank(generic) == pytest.approx(k, rel=0.1)


@pytest.mark.parametrize("shape", [(20, 50), (50, 20), (33, 33)])
def test_gram_route_matches_svd(shape: tuple[int, int]) -> None:
    x = torch.randn(*shape, generator=_gen(7), dtype=torch.float64)
    assert rep.effective_rank(x) == pytest.approx(_rankme_by_svd(x), rel=1e-9)


def test_effective_rank_of_nan_features_is_nan() -> None:
    x = torch.randn(10, 4, generator=_gen(8))
    x[3, 1] = float("nan")
    assert math.isnan(rep.effective_rank(x))


def test_token_effective_rank_subsamples_reproducibly() -> None:
    tokens = torch.randn(8, 64, 16, generator=_gen(9))
    a = rep.token_effective_rank(tokens, max_tokens=100, generator=_gen(1))
    b = rep.token_effective_rank(tokens, max_tokens=100, generator=_gen(1))
    assert a == b
    assert 14.0 < a <= 16.0
    assert rep.subsample_rows(tokens.reshape(-1, 16), 100, _gen(1)).shape == (100, 16)
    with pytest.raises(ValueError, match="max_rows"):
        rep.subsample_rows(tokens.reshape(-1, 16), 0)


def test_correlation_offdiag_of_duplicated_dims_is_one() -> None:
    col = torch.randn(256, 1, generator=_gen(10))
    assert rep.cov_offdiag_abs_mean(torch.cat([col, -2 * col, 5 * col], dim=1)) == pytest.approx(1.0, rel=1e-6)


def test_prediction_agreement_known_values() -> None:
    target = torch.randn(6, 4, 8, generator=_gen(11))
    same = floats_of(rep.prediction_agreement_tensors, target, target)
    assert same == pytest.approx({"pred_target/mse": 0.0, "pred_target/mae": 0.0, "pred_target/cosine": 1.0}, abs=1e-6)
    flipped = floats_of(rep.prediction_agreement_tensors, -target, target)
    assert flipped["pred_target/cosine"] == pytest.approx(-1.0, abs=1e-6)
    assert flipped["pred_target/mse"] == pytest.approx((4 * target.pow(2)).mean().item(), rel=1e-5)
    with pytest.raises(ValueError, match="differ"):
        floats_of(rep.prediction_agreement_tensors, target, target[:, :2])


def test_representation_stats_rejects_flat_input() -> None:
    with pytest.raises(ValueError, match=r"representation_stats\[target\]"):
        floats_of(rep.representation_stats_tensors, torch.zeros(5), "target")


# ------------------------------------------------------------------------------------------------- masks


def test_disjoint_masks_have_no_overlap() -> None:
    ctx = torch.tensor([[0, 1, 2, 3], [4, 5, 6, 7]])
    tgt = torch.tensor([[[8, 9], [10, 11]], [[0, 1], [1, 2]]])  # sample 2: blocks overlap each other, not ctx
    stats = floats_of(masks.mask_stats_tensors, ctx, tgt, num_patches=16)
    assert stats["mask/overlap_fraction"] == 0.0
    assert stats["mask/context_count"] == 4.0
    assert stats["mask/target_count"] == pytest.approx((4 + 3) / 2)  # union of the blocks per sample
    assert stats["mask/context_ratio"] == pytest.approx(4 / 16)
    assert stats["mask/target_ratio"] == pytest.approx(3.5 / 16)


def test_planted_overlap_gives_its_exact_fraction() -> None:
    b, n = 4, 64
    tgt = torch.arange(10).repeat(b, 1).reshape(b, 2, 5)  # 10 target patches per sample
    ctx = torch.arange(20, 40).repeat(b, 1)
    ctx[:, :3] = torch.tensor([0, 4, 9])  # plant 3 of the 10 targets into every context
    assert floats_of(masks.mask_stats_tensors, ctx, tgt, n)["mask/overlap_fraction"] == pytest.approx(3 / 10)
    ctx[1:, :3] = torch.tensor([50, 51, 52])  # only the first sample leaks: 3 of 40 target patches
    assert floats_of(masks.mask_stats_tensors, ctx, tgt, n)["mask/overlap_fraction"] == pytest.approx(3 / 40)


def test_mask_stats_rejects_bad_indices() -> None:
    with pytest.raises(ValueError, match="target_idx"):
        floats_of(masks.mask_stats_tensors, torch.tensor([[0, 1]]), torch.tensor([[[16]]]), num_patches=16)
    with pytest.raises(ValueError, match=r"\[B, K, Nt\]"):
        floats_of(masks.mask_stats_tensors, torch.tensor([[0, 1]]), torch.tensor([[3]]), num_patches=16)


# --------------------------------------------------------------------------------------------------- EMA


def _mlp() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3))


def test_ema_distance_zero_for_identical_copies_and_exact_otherwise() -> None:
    online = _mlp()
    target = copy.deepcopy(online)
    assert floats_of(masks.ema_distance_tensors, target, online) == {"ema/param_l2": 0.0, "ema/relative_param_l2": 0.0}
    with torch.no_grad():
        target[0].bias.add_(3.0)  # 8 entries moved by 3 -> distance 3 * sqrt(8)
    online_norm = torch.cat([p.detach().reshape(-1) for p in online.parameters()]).norm().item()
    out = floats_of(masks.ema_distance_tensors, target, online)
    assert out["ema/param_l2"] == pytest.approx(3 * math.sqrt(8), rel=1e-6)
    assert out["ema/relative_param_l2"] == pytest.approx(3 * math.sqrt(8) / online_norm, rel=1e-6)
    with pytest.raises(ValueError, match="differ by name"):
        floats_of(masks.ema_distance_tensors, nn.Linear(4, 8), online)


def test_fixed_batch_distance_is_zero_only_for_the_same_weights() -> None:
    online = _mlp()
    target = copy.deepcopy(online)
    images = torch.randn(5, 4, generator=torch.Generator().manual_seed(3))
    same = float_of(masks.fixed_batch_distance_tensor, target(images), online(images))
    assert same == 0.0  # the same forward on the same input: exactly, not approximately
    with torch.no_grad():
        target[2].bias.add_(0.5)  # every output moves by 0.5
    moved_t, moved_o = target(images), online(images)
    expected = 0.5 * math.sqrt(moved_o.numel()) / moved_o.double().norm().item()
    assert float_of(masks.fixed_batch_distance_tensor, moved_t, moved_o) == pytest.approx(expected, rel=1e-6)
    with pytest.raises(ValueError, match="shapes differ"):
        masks.fixed_batch_distance_tensor(moved_t, moved_o[:4])


def test_target_grad_params_counts_stray_grads_and_requires_grad() -> None:
    target = _mlp().requires_grad_(False)
    assert masks.target_grad_params(target) == 0
    target[0].weight.grad = torch.zeros_like(target[0].weight)
    target[2].bias.requires_grad_(True)
    assert masks.target_grad_params(target) == 2


# --------------------------------------------------------------------------------------- optimisation health


def test_grad_cosine() -> None:
    g = torch.randn(100, generator=_gen(12))
    assert float_of(health.grad_cosine_tensor, g, 2 * g) == pytest.approx(1.0)
    assert float_of(health.grad_cosine_tensor, g, -g) == pytest.approx(-1.0)
    assert float_of(health.grad_cosine_tensor, torch.tensor([1.0, 0.0]), torch.tensor([0.0, 3.0])) == pytest.approx(0.0)
    with pytest.raises(ValueError, match="sizes differ"):
        float_of(health.grad_cosine_tensor, g, g[:5])


def test_gradient_noise_scale_recovers_known_noise() -> None:
    gen = _gen(13)
    dim, b_noise = 2000, 64.0
    true_grad = torch.randn(dim, generator=gen)
    true_grad /= true_grad.norm()  # |G|^2 = 1, so tr(Sigma) = b_noise
    per_sample_var = b_noise / dim
    b_small, micro = 8, 4
    gns = health.GradientNoiseScale(decay=0.95)
    assert gns.value is None
    for _ in range(200):
        # A micro-batch of b samples averages b per-sample gradients: noise variance per_sample_var / b.
        noise_std = math.sqrt(per_sample_var / b_small)
        grads = [true_grad + torch.randn(dim, generator=gen) * noise_std for _ in range(micro)]
        big = torch.stack(grads).mean(dim=0)
        value = gns.update([g.pow(2).sum().item() for g in grads], b_small, big.pow(2).sum().item(), b_small * micro)
    assert value == pytest.approx(b_noise, rel=0.2)
    restored = health.GradientNoiseScale()
    restored.load_state_dict(gns.state_dict())
    assert restored.value == value
    with pytest.raises(ValueError, match="b_small < b_big"):
        gns.update([1.0], 8, 1.0, 8)


def test_stable_rank_known_values() -> None:
    assert float_of(health.stable_rank_tensor, torch.eye(7)) == pytest.approx(7.0)
    rank1 = torch.outer(torch.randn(5, generator=_gen(14)), torch.randn(9, generator=_gen(15)))
    assert float_of(health.stable_rank_tensor, rank1) == pytest.approx(1.0)
    w = torch.randn(30, 12, generator=_gen(16))
    expected = (w.norm() ** 2 / torch.linalg.matrix_norm(w, ord=2) ** 2).item()
    assert float_of(health.stable_rank_tensor, w) == pytest.approx(expected, rel=1e-5)
    model = nn.Sequential(nn.Linear(4, 4), nn.Linear(4, 4))
    with torch.no_grad():
        model[0].weight.copy_(torch.eye(4))
        model[1].weight.copy_(torch.outer(torch.ones(4), torch.arange(4.0)))
    assert health.stable_rank_min(model) == {"health/stable_rank_min": pytest.approx(1.0)}


def test_weight_drift_and_update_ratio() -> None:
    model = _mlp()
    init = {n: p.detach().clone() for n, p in model.named_parameters()}
    assert health.weight_drift_max(model, init) == {"health/weight_drift_max": 0.0}
    before = [p.detach().clone() for p in model.parameters()]
    with torch.no_grad():
        model[2].weight.mul_(1.5)  # relative drift 0.5 on that matrix; biases are not part of the drift
        model[0].bias.add_(100.0)
    assert health.weight_drift_max(model, init)["health/weight_drift_max"] == pytest.approx(0.5, rel=1e-6)
    delta = torch.cat([(a - b).reshape(-1) for a, b in zip(model.parameters(), before)]).norm()
    expected = (delta / torch.cat([b.reshape(-1) for b in before]).norm()).item()
    assert health.update_ratio(before, model.parameters())["health/update_ratio"] == pytest.approx(expected, rel=1e-6)
    del init["2.weight"]
    with pytest.raises(ValueError, match="'2.weight'"):
        health.weight_drift_max(model, init)


# ------------------------------------------------------------------------------------------------ runtime


def test_runtime_helpers() -> None:
    assert system_stats.memory_stats("cpu") == {}
    system = system_stats.SystemStats()()
    assert set(system) == {"system/cpu_percent", "system/ram_gb"}
    assert system["system/ram_gb"] > 0
    assert eta_seconds(10, 100, 0.5) == pytest.approx(45.0)
    assert eta_seconds(100, 100, 0.5) == 0.0


def test_to_floats_keeps_order_and_converts_ints() -> None:
    out = dx.to_floats({"b": torch.tensor(2.5), "a": 3, "c": torch.tensor(1, dtype=torch.int64)})
    assert list(out) == ["b", "a", "c"]
    assert out == {"b": 2.5, "a": 3.0, "c": 1.0}
    assert all(isinstance(v, float) for v in out.values())
