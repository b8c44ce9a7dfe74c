"""The training step itself: what it logs and what it updates."""

import copy

import torch

from jepa_core.method.masks import MaskSampler
from jepa_core.method.model import JEPA
from jepa_core.method.step import OnlineNetwork, StepSettings, build_optimizer, train_step


def one_step(model: JEPA, settings: StepSettings, poison: bool = False):
    torch.manual_seed(0)
    images = torch.randn(8, 3, 16, 16)
    if poison:
        images[0, 0, 0, 0] = float("inf")  # what a corrupt batch or an overflowing layer feeds the step
    masks = MaskSampler(4, 4, num_targets=2, target_scale=(0.15, 0.2), context_scale=(0.85, 1.0),
                        min_keep=2).sample(8, torch.Generator().manual_seed(1))
    optimizer = build_optimizer(model, (0.9, 0.95))
    out = train_step(1, OnlineNetwork(model), model, optimizer, images, masks, settings, 8)
    grads = [p.grad.clone() for p in model.context_encoder.parameters() if p.grad is not None]
    return out, grads, optimizer


def tiny_model() -> JEPA:
    torch.manual_seed(0)
    return JEPA(img_size=16, patch_size=4, in_chans=3, embed_dim=32, depth=2, num_heads=4, mlp_ratio=2.0,
                pred_dim=16, pred_depth=1, pred_num_heads=4)


def test_collapse_fault_shapes_the_gradient_but_not_the_logged_loss():
    base = tiny_model()
    healthy, healthy_grads, _ = one_step(copy.deepcopy(base), StepSettings(lr=1e-3, wd=0.0, ema_tau=0.99))
    faulty, faulty_grads, _ = one_step(copy.deepcopy(base), StepSettings(lr=1e-3, wd=0.0, ema_tau=0.99,
                                                                      collapse_weight=3.0))
    assert torch.equal(healthy.loss, faulty.loss)  # the penalty is no part of the regression loss a user sees
    assert any(not torch.allclose(a, b) for a, b in zip(healthy_grads, faulty_grads))


def test_a_non_finite_loss_or_gradient_is_not_applied():
    model = tiny_model()
    before = copy.deepcopy(model.state_dict())
    out, _, optimizer = one_step(model, StepSettings(lr=1e-3, wd=0.0, ema_tau=0.5), poison=True)
    assert not out.finite
    after = model.state_dict()
    assert all(torch.equal(before[k], after[k]) for k in before)  # online, predictor and target untouched
    assert not optimizer.state  # Adam's moments were never fed the NaN gradient


def test_a_finite_step_is_applied():
    model = tiny_model()
    before = copy.deepcopy(model.state_dict())
    out, _, _ = one_step(model, StepSettings(lr=1e-3, wd=0.0, ema_tau=0.5))
    assert out.finite
    changed = [k for k in before if not torch.equal(before[k], model.state_dict()[k])]
    assert any(k.startswith("context_encoder.") for k in changed) and any(k.startswith("target_encoder.") for k in changed)
