"""Tests for jepa_core.method.masks: no context/target overlap, no position bias, validation, fault injection.

Tolerances (stated once, used below): with corners sampled uniformly, each corner/cell count is binomial.
Tests use fixed seeds and enough samples that the stated relative tolerance is at least ~5 standard deviations
of the sampling noise, so a failure means bias, not bad luck.
"""

from __future__ import annotations

import math

import pytest
import torch

from jepa_core.method.masks import (
    MaskBatch, MaskConfigError, MaskSampler, MaskSamplingError, cell_coverage, check_mask_config, leak_targets,
    membership, overlap_fraction, subsample_sorted,
)

HARD = dict(num_targets=6, target_scale=(0.2, 0.3))


def _gen(seed: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _block_shape(target_idx: torch.Tensor, grid_w: int) -> tuple[int, int]:
    first, last = int(target_idx[0, 0, 0]), int(target_idx[0, 0, -1])
    return last // grid_w - first // grid_w + 1, last % grid_w - first % grid_w + 1


def _check_batch(masks: MaskBatch, grid: int, min_keep: int) -> None:
    n = grid * grid
    ctx, tgt = masks.context_idx, masks.target_idx
    assert ctx.dtype == torch.int64 and tgt.dtype == torch.int64
    assert ctx.shape[1] >= min_keep
    assert (ctx[:, 1:] > ctx[:, :-1]).all(), "context must be sorted and without duplicates"
    assert not (membership(ctx, n) & membership(tgt, n)).any(), "context overlaps a target"
    # Every target is a full h x w rectangle of the grid, the same size across the batch.
    h, w = _block_shape(tgt, grid)
    assert h * w == tgt.shape[2]
    first = tgt[:, :, :1]
    offsets = (torch.arange(h)[:, None] * grid + torch.arange(w)[None, :]).flatten()
    assert torch.equal(tgt, first + offsets)
    assert (first // grid + h <= grid).all() and (first % grid + w <= grid).all()


@pytest.mark.parametrize("grid,config", [(8, {}), (14, {}), (8, HARD), (14, HARD)],
                         ids=["8x8-default", "14x14-default", "8x8-hard", "14x14-hard"])
def test_context_never_overlaps_targets(grid: int, config: dict) -> None:
    sampler = MaskSampler(grid, grid, **config)
    gen = _gen(1)
    for _ in range(2000):
        _check_batch(sampler.sample(16, gen), grid, sampler.min_keep)


def _corner_and_coverage_counts(sampler: MaskSampler, grid: int, batches: int, batch_size: int
                                ) -> tuple[torch.Tensor, torch.Tensor, int, int]:
    gen = _gen(2)
    corners = torch.zeros(grid * grid)
    coverage = torch.zeros(grid * grid)
    for _ in range(batches):
        tgt = sampler.sample(batch_size, gen).target_idx
        corners.index_add_(0, tgt[:, :, 0].flatten(), torch.ones(tgt[:, :, 0].numel()))
        coverage.index_add_(0, tgt.flatten(), torch.ones(tgt.numel()))
    h, w = _block_shape(tgt, grid)
    return corners.view(grid, grid), coverage.view(grid, grid), h, w


@pytest.mark.parametrize("grid,num_targets,scale,batch_size", [
    (8, 4, 0.14, 16),   # 3x3 blocks: 36 corners, ~3,600 blocks per corner
    (14, 4, 0.13, 32),  # 5x5 blocks: 100 corners, ~2,600 per corner
    (8, 6, 0.25, 16),   # hard: six 4x4 blocks on 8x8, placements are often redrawn
], ids=["8x8", "14x14", "8x8-hard-6x4x4"])
def test_target_positions_are_unbiased(grid: int, num_targets: int, scale: float, batch_size: int) -> None:
    sampler = MaskSampler(grid, grid, num_targets=num_targets, target_scale=(scale, scale), target_aspect=(1, 1))
    corners, coverage, h, w = _corner_and_coverage_counts(sampler, grid, 2000, batch_size)
    blocks = 2000 * batch_size * num_targets
    valid = corners[: grid - h + 1, : grid - w + 1]
    # Corners only in the valid range, and every valid corner (incl. last row/column 0..grid-h) used.
    assert valid.sum() == blocks
    assert (valid > 0).all()
    expected = blocks / valid.numel()
    # Flat top-left-corner histogram: every corner within 10% of uniform (>= 5 sd of binomial noise).
    assert ((valid - expected).abs() / expected).max() < 0.10
    # Per-cell coverage equals the exact analytic expectation within 10% (edges and corners included).
    expected_cov = cell_coverage(grid, grid, h, w) * blocks
    rel = (coverage - expected_cov).abs() / expected_cov
    assert rel.max() < 0.10, f"max relative coverage error {rel.max():.3f}"
    assert coverage[-1, :].min() > 0 and coverage[:, -1].min() > 0  # last row and column are reachable


def test_hard_random_size_config_has_no_edge_bias() -> None:
    # Hard config with per-batch random block sizes: group blocks by size, the row and column corner
    # marginals are flat over the full valid range for the common sizes (10% tolerance, >= 5 sd).
    grid = 8
    sampler = MaskSampler(grid, grid, **HARD)
    gen = _gen(3)
    per_size: dict[tuple[int, int], torch.Tensor] = {}
    for _ in range(2000):
        tgt = sampler.sample(16, gen).target_idx
        size = _block_shape(tgt, grid)
        counts = per_size.setdefault(size, torch.zeros(grid * grid))
        counts.index_add_(0, tgt[:, :, 0].flatten(), torch.ones(tgt[:, :, 0].numel()))
    checked = 0
    for (h, w), counts in per_size.items():
        valid = counts.view(grid, grid)[: grid - h + 1, : grid - w + 1]
        assert valid.sum() == counts.sum()
        if counts.sum() < 15_000:
            continue
        for marginal in (valid.sum(1), valid.sum(0)):
            expected = marginal.sum() / marginal.numel()
            assert ((marginal - expected).abs() / expected).max() < 0.10, (h, w, marginal)
        checked += 1
    assert checked >= 2


def test_cell_coverage_is_exact() -> None:
    cov = cell_coverage(4, 4, 2, 2)  # corners at 0..2 on each axis: cell 0 covered by 1/3, cells 1-2 by 2/3
    axis = torch.tensor([1 / 3, 2 / 3, 2 / 3, 1 / 3], dtype=torch.float64)
    assert torch.allclose(cov, axis[:, None] * axis[None, :])
    assert math.isclose(cov.sum().item(), 4.0)  # expected block area


def test_subsample_sorted_is_uniform_over_members() -> None:
    # Row 0 has all 64 positions, row 1 only 10: row 0 must keep a uniform random 10, not the first 10.
    member = torch.zeros(2, 64, dtype=torch.bool)
    member[0] = True
    member[1, 54:] = True
    gen = _gen(4)
    counts = torch.zeros(64)
    draws = 4000
    for _ in range(draws):
        kept = subsample_sorted(member, 10, gen)
        assert torch.equal(kept[1], torch.arange(54, 64))
        assert (kept[0, 1:] > kept[0, :-1]).all()
        counts.index_add_(0, kept[0], torch.ones(10))
    expected = draws * 10 / 64  # 625 per position; 15% tolerance is ~6 sd
    assert ((counts - expected).abs() / expected).max() < 0.15
    assert abs(counts[:32].sum() / counts[32:].sum() - 1) < 0.03  # low indices are not favoured


def test_context_subsampling_has_no_index_bias() -> None:
    # The sampling process is symmetric under a 180-degree rotation of the grid, so the frequency with which
    # each cell is kept in the context must be too; keeping the first indices would load the top rows.
    grid = 8
    sampler = MaskSampler(grid, grid)
    gen = _gen(5)
    kept = torch.zeros(grid * grid)
    for _ in range(1000):
        ctx = sampler.sample(16, gen).context_idx
        kept.index_add_(0, ctx.flatten(), torch.ones(ctx.numel()))
    kept = kept.view(grid, grid)
    rotated = kept.flip(0).flip(1)
    assert ((kept - rotated).abs() / rotated).max() < 0.10
    assert abs(kept[: grid // 2].sum() / kept[grid // 2:].sum() - 1) < 0.03


def test_sampling_is_deterministic_per_generator() -> None:
    sampler = MaskSampler(14, 14)
    a, b, c = (sampler.sample(8, _gen(seed)) for seed in (7, 7, 8))
    assert torch.equal(a.context_idx, b.context_idx) and torch.equal(a.target_idx, b.target_idx)
    assert not (a.context_idx.shape == c.context_idx.shape and torch.equal(a.context_idx, c.context_idx)
                and torch.equal(a.target_idx, c.target_idx))


@pytest.mark.parametrize("kwargs,key", [
    (dict(target_scale=(0.3, 0.2)), "masks.target_scale"),
    (dict(target_scale=(0.0, 0.2)), "masks.target_scale"),
    (dict(target_scale=(0.1, 1.0)), "masks.target_scale"),
    (dict(target_scale="big"), "masks.target_scale"),
    (dict(context_scale=(0.9, 0.8)), "masks.context_scale"),
    (dict(context_scale=(0.5, 1.1)), "masks.context_scale"),
    (dict(context_scale=(0.0, 1.0)), "masks.context_scale"),
    (dict(target_aspect=(1.5, 0.75)), "masks.target_aspect"),
    (dict(target_aspect=(0.0, 1.0)), "masks.target_aspect"),
    (dict(context_aspect=(2.0, 1.0)), "masks.context_aspect"),
    (dict(num_targets=0), "masks.num_targets"),
    (dict(min_keep=0), "masks.min_keep"),
    (dict(min_keep=65), "masks.min_keep"),
    (dict(max_tries=0), "masks.max_tries"),
    (dict(target_scale=(0.5, 0.6), target_aspect=(1.0, 4.0)), "masks.target_aspect"),  # 12x4 block on 8x8
    (dict(num_targets=12, target_scale=(0.45, 0.45)), "masks.num_targets"),  # ~3.5 context patches left
    (dict(num_targets=4, target_scale=(0.2, 0.2), min_keep=30), "masks.min_keep"),
])
def test_validation_errors_name_the_key(kwargs: dict, key: str) -> None:
    with pytest.raises(MaskConfigError, match=key.replace(".", r"\.")):
        MaskSampler(8, 8, **kwargs)


def test_target_block_wider_than_a_non_square_grid_names_target_scale() -> None:
    with pytest.raises(MaskConfigError, match=r"masks\.target_scale"):
        check_mask_config(4, 16, 1, (0.5, 0.5), (1.0, 1.0), (0.85, 1.0), (1.0, 1.0), 4)


def test_defaults_are_valid_on_common_grids() -> None:
    for grid in (4, 8, 14, 16):
        check_mask_config(grid, grid, 4, (0.15, 0.2), (0.75, 1.5), (0.85, 1.0), (1.0, 1.0), 4)
        _check_batch(MaskSampler(grid, grid).sample(4, _gen()), grid, 4)


def test_unplaceable_masks_raise_instead_of_leaking() -> None:
    # Two 3x3 targets on a 4x4 grid leave between 2 and 7 free cells (4.25 on average); min_keep=4 passes the
    # average-case config check but some placements cannot satisfy it, so with one try per batch some fail.
    sampler = MaskSampler(4, 4, num_targets=2, target_scale=(0.5, 0.5), target_aspect=(1, 1),
                          context_scale=(1.0, 1.0), min_keep=4, max_tries=1)
    with pytest.raises(MaskSamplingError, match=r"masks\.max_tries"):
        sampler.sample(256, _gen())
    generous = MaskSampler(4, 4, num_targets=2, target_scale=(0.5, 0.5), target_aspect=(1, 1),
                           context_scale=(1.0, 1.0), min_keep=4, max_tries=200)
    _check_batch(generous.sample(256, _gen()), 4, 4)


@pytest.mark.parametrize("fraction", [0.1, 0.25, 0.5])
def test_leak_targets_creates_the_requested_overlap(fraction: float) -> None:
    grid = 14
    masks = MaskSampler(grid, grid).sample(16, _gen(6))
    leaked = leak_targets(masks, fraction, _gen(7))
    assert torch.equal(leaked.target_idx, masks.target_idx)
    assert leaked.context_idx.shape == masks.context_idx.shape
    assert (leaked.context_idx[:, 1:] > leaked.context_idx[:, :-1]).all()
    num_targets = membership(masks.target_idx, grid * grid).sum(1)
    expected = torch.clamp((fraction * num_targets.double()).round(), min=1) / num_targets
    got = overlap_fraction(leaked, grid * grid)
    assert torch.allclose(got, expected)
    assert ((got - fraction).abs() <= 0.5 / num_targets + 1e-9).all()  # rounding to whole patches
    assert (overlap_fraction(masks, grid * grid) == 0).all()


def test_leak_targets_zero_fraction_is_a_copy_and_bad_fraction_raises() -> None:
    masks = MaskSampler(8, 8).sample(4, _gen())
    same = leak_targets(masks, 0.0, _gen())
    assert torch.equal(same.context_idx, masks.context_idx)
    with pytest.raises(ValueError, match="fraction"):
        leak_targets(masks, 1.5, _gen())
