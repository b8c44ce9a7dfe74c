"""research/readouts.py: which patches count as foreground, and what each readout pools."""

from __future__ import annotations

import numpy as np
import torch
from research_util import load_research
from torch import nn

readouts = load_research("readouts")


def test_a_patch_is_foreground_when_any_of_its_pixels_has_ink():
    images = torch.zeros(2, 3, 8, 8, dtype=torch.uint8)
    images[0, 1, 5, 2] = 200  # one bright pixel in patch (row 1, col 0) of a 2x2 grid of 4-pixel patches
    images[1, :, 0:4, 4:8] = 5  # faint everywhere in patch (0, 1): below the ink level
    ink = readouts.foreground(images, patch=4)
    assert ink.tolist() == [[False, False, True, False], [False, False, False, False]]


def test_centre_images_resizes_grey_and_colour_to_the_models_input():
    grey = np.zeros((2, 28, 28), dtype=np.uint8)
    colour = np.zeros((1, 40, 40, 3), dtype=np.uint8)
    assert readouts.centre_images(grey, 32).shape == (2, 3, 32, 32)
    assert readouts.centre_images(colour, 32).dtype == torch.uint8


class _Tokens(nn.Module):
    """An 'encoder' whose token i of every image is the vector (i, 10 * image mean): easy to check the pooling."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        n = x.shape[0]
        positions = torch.arange(4, dtype=torch.float32).expand(n, 4)
        level = x.mean(dim=(1, 2, 3)).unsqueeze(1).expand(n, 4) * 10
        return torch.stack([positions, level], dim=-1)  # [N, 4, 2]: a 2x2 grid


def test_each_readout_pools_the_tokens_it_names():
    images = torch.zeros(1, 3, 8, 8, dtype=torch.uint8)
    ink = torch.tensor([[True, False, False, True]])
    found = readouts.pooled(_Tokens(), images, ink)
    assert found["all"][0, 0].item() == 1.5  # mean of positions 0..3
    assert found["foreground"][0, 0].item() == 1.5  # tokens 0 and 3
    assert found["background"][0, 0].item() == 1.5  # tokens 1 and 2
    assert found["grid2"].shape == (1, 2 * 4)  # a 2x2 grid of 2-dim tokens stays as it is
    assert found["grid2"][0, :4].tolist() == [0.0, 1.0, 2.0, 3.0]
    only_first = readouts.pooled(_Tokens(), images, torch.tensor([[True, False, False, False]]))
    assert only_first["foreground"][0, 0].item() == 0.0
    assert only_first["background"][0, 0].item() == 2.0
    assert set(found) == set(readouts.READOUTS)
