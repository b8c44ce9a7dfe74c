import math

import pytest
import torch
from torch import nn

from jepa_core.method.ema import ema_momentum, ema_update_


def pair() -> tuple[nn.Module, nn.Module]:
    torch.manual_seed(0)
    online = nn.Sequential(nn.Linear(4, 3), nn.BatchNorm1d(3))
    target = nn.Sequential(nn.Linear(4, 3), nn.BatchNorm1d(3))
    online[1].running_mean.fill_(2.0)
    return target, online


def test_momentum_zero_copies():
    target, online = pair()
    ema_update_(target, online, 0.0)
    for t, o in zip(target.parameters(), online.parameters()):
        assert torch.equal(t, o)
    assert torch.equal(target[1].running_mean, online[1].running_mean)


def test_momentum_one_leaves_unchanged():
    target, online = pair()
    before = [p.clone() for p in target.parameters()]
    ema_update_(target, online, 1.0)
    for t, b in zip(target.parameters(), before):
        assert torch.equal(t, b)


def test_momentum_half_averages():
    target, online = pair()
    expected = [(t + o) / 2 for t, o in zip(target.parameters(), online.parameters())]
    ema_update_(target, online, 0.5)
    for t, e in zip(target.parameters(), expected):
        assert torch.allclose(t, e, atol=1e-7)


def test_update_rejects_mismatch_and_bad_momentum():
    target, online = pair()
    with pytest.raises(ValueError, match="momentum"):
        ema_update_(target, online, 1.5)
    with pytest.raises(ValueError, match="parameter"):
        ema_update_(nn.Linear(4, 3), online, 0.5)


@pytest.mark.parametrize("schedule", ["linear", "cosine"])
def test_momentum_schedule_endpoints_and_monotone(schedule):
    values = [ema_momentum(s, 100, 0.99, 1.0, schedule) for s in range(0, 121)]
    assert values[0] == pytest.approx(0.99)
    assert values[100] == pytest.approx(1.0)
    assert values[120] == pytest.approx(1.0)  # clamped after the end
    assert all(b >= a for a, b in zip(values, values[1:]))
    assert ema_momentum(-5, 100, 0.99, 1.0, schedule) == pytest.approx(0.99)


def test_cosine_vs_linear_midpoint_and_quarter():
    assert ema_momentum(50, 100, 0.99, 1.0, "linear") == pytest.approx(0.995)
    assert ema_momentum(50, 100, 0.99, 1.0, "cosine") == pytest.approx(0.995)
    # cosine starts slower than linear
    q_cos = ema_momentum(25, 100, 0.99, 1.0, "cosine")
    assert q_cos == pytest.approx(1.0 - 0.01 * (math.cos(math.pi / 4) + 1) / 2)
    assert q_cos < ema_momentum(25, 100, 0.99, 1.0, "linear")


def test_momentum_schedule_errors():
    with pytest.raises(ValueError, match="ema.schedule"):
        ema_momentum(0, 10, schedule="step")
    with pytest.raises(ValueError, match="total_steps"):
        ema_momentum(0, 0)
