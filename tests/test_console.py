"""Console line and duration formatting."""

from __future__ import annotations

import math

import pytest
import torch

from jepa_core.common.console import format_console_line, format_duration


@pytest.mark.parametrize("seconds, text", [(0, "0s"), (42.4, "42s"), (140, "2m20s"), (3600 + 5 * 60, "1h05m"),
                                           (3 * 86400 + 4 * 3600, "3d04h"), (-1, "--"), (math.nan, "--"),
                                           (None, "--"), (math.inf, "--")])
def test_format_duration(seconds, text):
    assert format_duration(seconds) == text


def test_console_line_picks_present_keys_in_order():
    line = format_console_line(120, 1000, {"loss": 0.43123, "lr": 8.1e-4, "ema_tau": 0.99681,
                                           "target/std_mean": 0.2101, "target/effective_rank": 31.24,
                                           "time/step_seconds": 1 / 6.3, "time/eta_seconds": 140})
    assert line == "step 120/1000 loss 0.4312 lr 8.1e-04 ema 0.9968 std 0.21 rank 31.2 6.3 it/s eta 2m20s"


def test_console_line_with_few_keys_tensors_and_non_finite():
    assert format_console_line(5, None, {}) == "step 5"
    line = format_console_line(5, 10, {"loss": torch.tensor(math.nan), "grad_norm": "Infinity",
                                       "time/step_seconds": 2.0})
    assert line == "step 5/10 loss nan gnorm inf 2.00 s/it eta 10s"
