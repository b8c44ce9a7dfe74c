"""The training step itself: what it logs and what it updates."""

import copy

import torch

from jepa_core.config import ModelConfig

from jepa_core.config import FaultsConfig
from jepa_core.method.faults import HEALTHY, StepFaults, faulty_settings, step_faults
from jepa_core.method.masks import MaskSampler
from jepa_core.method.noise_scale import MicroBatchBackward, full_batch_backward
from jepa_core.method.model import JEPA
from jepa_core.method.step import StepHooks, StepSettings, TrainState, build_optimizer, train_step


def one_step(model: JEPA, settings: StepSettings, poison: bool = False, faults: StepFaults = HEALTHY):
    torch.manual_seed(0)
    images = torch.randn(8, 3, 16, 16)
    if poison:
        images[0, 0, 0, 0] = float("inf")  # what a corrupt batch or an overflowing layer feeds the step
    masks = MaskSampler(4, 4, num_targets=2, target_scale=(0.15, 0.2), context_scale=(0.85, 1.0),
                        min_keep=2).sample(8, torch.Generator().manual_seed(1))
    optimizer = build_optimizer(model, (0.9, 0.95))
    out = train_step(images, masks, TrainState.plain(model, optimizer, 8), settings, StepHooks(faults=faults))
    grads = [p.grad.clone() for p in model.context_encoder.parameters() if p.grad is not None]
    return out, grads, optimizer


def tiny_model() -> JEPA:
    torch.manual_seed(0)
    return JEPA(ModelConfig(img_size=16, patch_size=4, in_chans=3, embed_dim=32, depth=2, num_heads=4, mlp_ratio=2.0,
                pred_dim=16, pred_depth=1, pred_num_heads=4))


def test_collapse_fault_shapes_the_gradient_but_not_the_logged_loss():
    base = tiny_model()
    healthy, healthy_grads, _ = one_step(copy.deepcopy(base), StepSettings(step=1, lr=1e-3, wd=0.0, ema_tau=0.99))
    faulty, faulty_grads, _ = one_step(copy.deepcopy(base), StepSettings(step=1, lr=1e-3, wd=0.0, ema_tau=0.99),
                                       faults=StepFaults(collapse_weight=3.0))
    assert torch.equal(healthy.loss, faulty.loss)  # the penalty is no part of the regression loss a user sees
    assert any(not torch.allclose(a, b) for a, b in zip(healthy_grads, faulty_grads))


def test_a_non_finite_loss_or_gradient_is_not_applied():
    model = tiny_model()
    before = copy.deepcopy(model.state_dict())
    out, _, optimizer = one_step(model, StepSettings(step=1, lr=1e-3, wd=0.0, ema_tau=0.5), poison=True)
    assert not out.finite
    after = model.state_dict()
    assert all(torch.equal(before[k], after[k]) for k in before)  # online, predictor and target untouched
    assert not optimizer.state  # Adam's moments were never fed the NaN gradient


def test_a_finite_step_is_applied():
    model = tiny_model()
    before = copy.deepcopy(model.state_dict())
    out, _, _ = one_step(model, StepSettings(step=1, lr=1e-3, wd=0.0, ema_tau=0.5))
    assert out.finite
    changed = [k for k in before if not torch.equal(before[k], model.state_dict()[k])]
    assert any(k.startswith("context_encoder.") for k in changed) and any(k.startswith("target_encoder.") for k in changed)


def test_a_frozen_target_is_not_updated_and_a_training_target_gets_gradients():
    base = tiny_model()
    frozen = copy.deepcopy(base)
    one_step(frozen, StepSettings(step=1, lr=1e-3, wd=0.0, ema_tau=0.5), faults=StepFaults(update_target=False))
    assert all(torch.equal(a, b) for a, b in zip(frozen.target_encoder.parameters(), base.target_encoder.parameters()))
    training = copy.deepcopy(base)
    one_step(training, StepSettings(step=1, lr=1e-3, wd=0.0, ema_tau=0.5), faults=StepFaults(target_gradients=True))
    assert all(p.requires_grad and p.grad is not None for p in training.target_encoder.parameters())


def test_faults_start_at_their_step_and_change_only_what_they_name():
    settings = StepSettings(step=1, lr=1e-3, wd=0.04, ema_tau=0.99)
    f = FaultsConfig(lr_blowup_factor=10.0, target_copies_online=True, frozen_target=True, start_step=5)
    assert faulty_settings(f, 4, settings) is settings and step_faults(f, 4) == HEALTHY
    assert faulty_settings(f, 5, settings) == StepSettings(step=1, lr=1e-2, wd=0.04, ema_tau=0.0)
    assert step_faults(f, 5) == StepFaults(update_target=False)
    assert step_faults(FaultsConfig(), 10**6) == HEALTHY and HEALTHY.healthy  # no fault configured: always healthy


def gradient_of_one_step(backward) -> tuple[list[torch.Tensor], torch.Tensor, object]:
    model = tiny_model()
    torch.manual_seed(0)
    images = torch.randn(8, 3, 16, 16)
    masks = MaskSampler(4, 4, num_targets=2, target_scale=(0.15, 0.2), context_scale=(0.85, 1.0),
                        min_keep=2).sample(8, torch.Generator().manual_seed(1))
    optimizer = build_optimizer(model, (0.9, 0.95))
    grads = []

    class ReadGradients(StepHooks):
        def after_backward(self) -> None:
            grads.extend(p.grad.clone() for p in model.context_encoder.parameters())

    out = train_step(images, masks, TrainState.plain(model, optimizer, 8),
                     StepSettings(step=1, lr=1e-3, wd=0.0, ema_tau=0.99), ReadGradients(backward=backward))
    return grads, out.loss, out


def test_measuring_the_noise_scale_leaves_the_same_gradient_up_to_rounding():
    plain, plain_loss, plain_out = gradient_of_one_step(full_batch_backward)
    measured, measured_loss, measured_out = gradient_of_one_step(MicroBatchBackward(2))
    assert plain_out.micro_grad_sq_norms is None
    assert len(measured_out.micro_grad_sq_norms) == 2 and measured_out.micro_batch_size == 4
    assert torch.allclose(plain_loss, measured_loss, rtol=1e-6, atol=0)
    for a, b in zip(plain, measured):
        assert torch.allclose(a, b, rtol=1e-4, atol=1e-7), (a - b).abs().max()
    # ... and the micro-batches' |g|^2 are real readings: each differs from the full batch's
    full_sq = sum(float(g.pow(2).sum()) for g in plain)
    assert all(r > 0 and abs(r - full_sq) > 1e-6 * full_sq for r in measured_out.micro_grad_sq_norms)
