"""Instrumentation: each cadence group exactly at its steps, live cadence changes, the real training step."""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest
import torch

from jepa_core.config import ModelConfig

from jepa_core.config import DiagnosticsConfig
from jepa_core.method.ema import ema_update_
from jepa_core.metrics.instrument import CADENCE_KEYS, Instrumentation
from jepa_core.method.model import JEPA
from step_util import InstrumentedHooks

B, K, NT, NC = 4, 2, 3, 8  # batch, target blocks, tokens per block, context tokens

GROUP_KEYS = {
    "basic": {"loss", "grad_norm", "lr", "wd", "ema_tau", "global_batch_size", "time/step_seconds",
              "time/data_seconds", "time/samples_per_second", "time/eta_seconds", "system/cpu_percent",
              "system/ram_gb"},
    "representation": {"pred_target/mse", "pred_target/mae", "pred_target/cosine", "target/norm_mean",
                       "target/norm_std", "target/std_mean", "target/std_min", "target/std_l2n",
                       "target/dead_dim_fraction", "pred/norm_mean", "pred/std_mean", "pred/dead_dim_fraction"},
    "fixed_batch": {"target/fixed_batch_std_mean", "target/fixed_batch_norm_mean", "ema/fixed_batch_distance",
                    "online/fixed_batch_std_mean"},
    "covariance": {"target/effective_rank", "target/token_effective_rank", "target/cov_offdiag_abs_mean",
                   "pred/effective_rank"},
    "param_distance": {"ema/param_l2", "ema/relative_param_l2"},
    "mask_check": {"mask/context_count", "mask/target_count", "mask/context_ratio", "mask/target_ratio",
                   "mask/overlap_fraction", "ema/target_grad_params"},
    "weights_health": {"health/grad_cosine_prev", "health/gns", "health/stable_rank_min", "health/weight_drift_max",
                       "health/update_ratio"},
}
GROUP_CADENCE = dict(zip(GROUP_KEYS, CADENCE_KEYS))


def tiny_jepa() -> JEPA:
    torch.manual_seed(0)
    return JEPA(ModelConfig(img_size=16, patch_size=4, in_chans=3, embed_dim=32, depth=1, num_heads=2, mlp_ratio=2.0,
                pred_dim=16, pred_depth=1, pred_num_heads=2))


def cadences(**overrides: int) -> DiagnosticsConfig:
    values = dict(basic_every_steps=2, representation_every_steps=3, fixed_batch_every_steps=7,
                  covariance_every_steps=4, param_distance_every_steps=5, mask_check_every_steps=3,
                  weights_health_every_steps=4)
    values.update(overrides)
    return DiagnosticsConfig(**values)


class FakeTrainer:
    """The trainer's call order with random gradients and features instead of a forward pass."""

    def __init__(self, inst: Instrumentation, model: JEPA) -> None:
        self.inst, self.model = inst, model
        self.gen = torch.Generator().manual_seed(1)
        self.grad_steps: list[int] = []

    def step(self, step: int, before_after_step=None) -> dict[str, float]:
        micro = self.inst.wants_micro_grads(step)
        online = [*self.model.context_encoder.parameters(), *self.model.predictor.parameters()]
        for p in online:
            p.grad = torch.randn(p.shape, generator=self.gen)
        if self.inst.wants_grads(step):
            self.grad_steps.append(step)
            self.inst.after_backward(step, self.model)
        with torch.no_grad():
            for p in online:
                p.sub_(1e-3 * p.grad)
        ema_update_(self.model.target_encoder, self.model.context_encoder, 0.99)
        n, d = self.model.num_patches, 32
        out = SimpleNamespace(
            step=step, batch_size=B, loss=torch.tensor(1.0), grad_norm=torch.tensor(2.0), lr=1e-3, wd=0.04,
            ema_tau=0.99,
            context_idx=torch.arange(NC).repeat(B, 1),
            target_idx=(NC + torch.arange(K * NT)).reshape(1, K, NT).repeat(B, 1, 1),
            pred=torch.randn(B * K, NT, d, generator=self.gen), target=torch.randn(B * K, NT, d, generator=self.gen),
            target_tokens=torch.randn(B, n, d, generator=self.gen),
            micro_grad_sq_norms=[5.0, 4.0] if micro else None, micro_batch_size=B // 2 if micro else None)
        if before_after_step is not None:
            before_after_step()
        return self.inst.after_step(out, self.model, step_seconds=0.1, data_seconds=0.01)


def expected_keys(cfg: DiagnosticsConfig, step: int) -> set[str]:
    keys: set[str] = set()
    for group, names in GROUP_KEYS.items():
        if step % getattr(cfg, GROUP_CADENCE[group]) == 0:
            keys |= names
    return keys


def test_each_group_emits_exactly_at_its_steps() -> None:
    model = tiny_jepa()
    cfg = cadences()
    inst = Instrumentation(model, cfg, total_steps=20, device="cpu")
    trainer = FakeTrainer(inst, model)
    for step in range(1, 21):
        metrics = trainer.step(step)
        assert set(metrics) == expected_keys(cfg, step), f"step {step}"
        assert all(isinstance(v, float) for v in metrics.values())
    # Gradients are snapshot at each weights-health step and the step before it (for the cosine).
    assert trainer.grad_steps == [3, 4, 7, 8, 11, 12, 15, 16, 19, 20]


def test_metric_values_are_sane() -> None:
    model = tiny_jepa()
    inst = Instrumentation(model, cadences(**{k: 1 for k in CADENCE_KEYS}), total_steps=10, device="cpu")
    trainer = FakeTrainer(inst, model)
    first = trainer.step(1)
    assert "health/grad_cosine_prev" not in first  # no gradient from step 0 to compare with
    metrics = trainer.step(2)
    assert metrics["mask/overlap_fraction"] == 0.0
    assert metrics["mask/context_count"] == NC
    assert metrics["mask/target_ratio"] == pytest.approx(K * NT / model.num_patches)
    assert metrics["ema/target_grad_params"] == 0.0
    assert metrics["ema/param_l2"] > 0.0
    assert metrics["global_batch_size"] == B
    assert metrics["time/samples_per_second"] == pytest.approx(B / 0.1)
    assert metrics["time/eta_seconds"] == pytest.approx(8 * 0.1)
    assert abs(metrics["health/grad_cosine_prev"]) < 0.2  # independent random gradients
    assert 0.0 < metrics["health/weight_drift_max"] < 1.0
    assert 0.0 < metrics["health/update_ratio"] < 1.0
    # micro |g|^2 = 5, 4 at b=2, big |g|^2 = grad_norm^2 = 4 at b=4: tr(S) = 0.5/(1/2-1/4) = 2, |G|^2 = (16-9)/2
    assert metrics["health/gns"] == pytest.approx(2.0 / 3.5)
    assert 1.0 <= metrics["target/token_effective_rank"] <= 32.0


def test_nothing_due_returns_empty_without_work() -> None:
    model = tiny_jepa()
    inst = Instrumentation(model, cadences(**{k: 7 for k in CADENCE_KEYS}), total_steps=10, device="cpu")
    trainer = FakeTrainer(inst, model)
    for step in range(1, 7):
        assert trainer.step(step) == {}
    assert trainer.grad_steps == [6]  # the step before weights health, for the gradient cosine
    assert set(trainer.step(7)) == set().union(*GROUP_KEYS.values())


def test_set_cadences_takes_effect_from_the_next_step() -> None:
    model = tiny_jepa()
    inst = Instrumentation(model, cadences(**{k: 100 for k in CADENCE_KEYS}), total_steps=10, device="cpu")
    trainer = FakeTrainer(inst, model)
    assert trainer.step(1) == {}
    every_step = cadences(**{k: 1 for k in CADENCE_KEYS})
    # A change arriving mid-step (the notebook's thread) leaves the step in progress alone.
    assert trainer.step(2, before_after_step=lambda: inst.set_cadences(every_step)) == {}
    assert inst.cadences["basic_every_steps"] == 100
    assert set(trainer.step(3)) >= GROUP_KEYS["basic"] | GROUP_KEYS["covariance"]
    assert inst.cadences["basic_every_steps"] == 1
    inst.set_cadences({**every_step.__dict__, "covariance_every_steps": 2})  # a mapping works too
    assert "target/effective_rank" not in trainer.step(5)


@pytest.mark.parametrize("bad", [0, -3, 2.5, True, None])
def test_bad_cadence_names_the_key(bad: object) -> None:
    model = tiny_jepa()
    inst = Instrumentation(model, cadences(), total_steps=10, device="cpu")
    with pytest.raises(ValueError, match="diagnostics.mask_check_every_steps"):
        inst.set_cadences({**cadences().__dict__, "mask_check_every_steps": bad})
    with pytest.raises(ValueError, match="diagnostics.basic_every_steps"):
        Instrumentation(model, SimpleNamespace(), total_steps=10, device="cpu")


def test_start_metrics_and_stray_target_grads() -> None:
    model = tiny_jepa()
    inst = Instrumentation(model, cadences(mask_check_every_steps=1), total_steps=10, device="cpu")
    facts = inst.start_metrics()
    encoder = sum(p.numel() for p in model.context_encoder.parameters())
    assert facts["params/encoder"] == encoder
    assert facts["params/total"] == 2 * encoder + facts["params/predictor"]
    assert facts["params/trainable"] == encoder + facts["params/predictor"]
    model.target_encoder.blocks[0].attn.qkv.weight.requires_grad_(True)
    assert FakeTrainer(inst, model).step(1)["ema/target_grad_params"] == 1.0


def test_state_round_trip_and_initial_weights() -> None:
    model = tiny_jepa()
    inst = Instrumentation(model, cadences(**{k: 1 for k in CADENCE_KEYS}), total_steps=10, device="cpu")
    trainer = FakeTrainer(inst, model)
    for step in (1, 2, 3):
        trainer.step(step)
    other = Instrumentation(model, cadences(), total_steps=10, device="cpu")
    other.load_state_dict(inst.state_dict())
    assert other.gns.value == inst.gns.value
    assert other.smoothed_step_seconds == pytest.approx(inst.smoothed_step_seconds)
    other.load_state_dict({})  # an old checkpoint without instrumentation state is accepted
    init = {k: v.clone() for k, v in model.context_encoder.state_dict().items()}
    other.set_initial_weights(init)
    assert set(other.init_state) == {n for n, _ in model.context_encoder.named_parameters()}
    del init["patch_embed.weight"]
    with pytest.raises(ValueError, match="patch_embed.weight"):
        other.set_initial_weights(init)


def test_with_the_real_training_step() -> None:
    from jepa_core.method import step as step_mod
    from jepa_core.method.masks import MaskSampler

    model = tiny_jepa()
    state = step_mod.TrainState.plain(model, step_mod.build_optimizer(model, (0.9, 0.95)), batch_size=8)
    sampler = MaskSampler(4, 4, num_targets=2, target_scale=(0.15, 0.2), min_keep=2)
    inst = Instrumentation(model, cadences(**{k: 1 for k in CADENCE_KEYS}), total_steps=3, device="cpu")
    gen = torch.Generator().manual_seed(0)
    for step in (1, 2, 3):
        images = torch.randn(8, 3, 16, 16, generator=gen)
        masks = sampler.sample(8, gen)
        settings = step_mod.StepSettings(step=step, lr=1e-3, wd=0.04, ema_tau=0.99)
        out = step_mod.train_step(images, masks, state, settings, InstrumentedHooks(inst, step, model, state.online))
        metrics = inst.after_step(out, model, 0.1, 0.0)
    # health/gns is reported only once its smoothed estimates are positive, which 3 noisy steps may not reach.
    assert set(metrics) - {"health/gns"} == set().union(*GROUP_KEYS.values()) - {"health/gns"}
    assert all(math.isfinite(v) for v in metrics.values())
    assert metrics["mask/overlap_fraction"] == 0.0
    assert metrics["ema/target_grad_params"] == 0.0
    assert metrics["target/std_l2n"] > 0.0
