"""I-JEPA multi-block masking on a patch grid (patch index = row * grid_w + col).

Per batch one target block size and one context block size are drawn; per sample, K target blocks and one
context block are placed, and the context keeps its block minus the union of the targets. Unlike the reference
collator this sampler
  * never lets the context overlap a target: placements that leave fewer than `min_keep` context patches are
    redrawn, and if `max_tries` redraws fail it raises instead of quietly leaking or falling back;
  * has no position bias: top-left corners are uniform over the full valid range 0..grid-h inclusive, and
    contexts are equalised to the batch minimum by uniform random subsampling (not by keeping the first,
    lowest, indices).
All randomness comes from the `torch.Generator` passed in, so masks are reproducible and resumable.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch


class MaskConfigError(ValueError):
    """Invalid masking configuration; the message names the config key (e.g. "masks.target_scale")."""


class MaskSamplingError(RuntimeError):
    """Could not place targets and a context of at least `min_keep` patches within `max_tries` redraws."""


@dataclass
class MaskBatch:
    context_idx: torch.Tensor  # int64 [B, Nc]  sorted patch indices visible to the context encoder
    target_idx: torch.Tensor  # int64 [B, K, Nt] patch indices of each of K target blocks (row-major order)


def _pair(value: object, key: str) -> tuple[float, float]:
    try:
        low, high = (float(v) for v in value)  # type: ignore[union-attr]
    except (TypeError, ValueError):
        raise MaskConfigError(f"{key} must be a pair of numbers [min, max], got {value!r}") from None
    if not (math.isfinite(low) and math.isfinite(high)):
        raise MaskConfigError(f"{key} must be finite, got {value!r}")
    if low > high:
        raise MaskConfigError(f"{key} has min > max: {value!r}")
    return low, high


def block_size(scale: float, aspect: float, grid_h: int, grid_w: int) -> tuple[int, int]:
    """(h, w) in patches of a block covering `scale` of the grid with height/width ratio `aspect`, before
    clamping to the grid (at least 1x1)."""
    area = scale * grid_h * grid_w
    return max(1, round(math.sqrt(area * aspect))), max(1, round(math.sqrt(area / aspect)))


def _size_extremes(scale: tuple[float, float], aspect: tuple[float, float], grid_h: int, grid_w: int,
                   ) -> list[tuple[int, int]]:
    # Block sizes reachable from the corners and a fine sweep of the (scale, aspect) box; rounding makes
    # h and w step functions, so a sweep catches the extreme sizes a config can produce.
    sizes = set()
    for i in range(21):
        s = scale[0] + (scale[1] - scale[0]) * i / 20
        for j in range(21):
            a = math.exp(math.log(aspect[0]) + (math.log(aspect[1]) - math.log(aspect[0])) * j / 20)
            sizes.add(block_size(s, a, grid_h, grid_w))
    return sorted(sizes)


def cell_coverage(grid_h: int, grid_w: int, h: int, w: int) -> torch.Tensor:
    """float64 [grid_h, grid_w]: exact probability that each cell lies in an h x w block whose top-left
    corner is uniform over all (grid_h - h + 1) x (grid_w - w + 1) valid positions."""
    def axis(n: int, size: int) -> torch.Tensor:
        cells = torch.arange(n)
        # Corners t with t <= cell < t + size and 0 <= t <= n - size.
        first = (cells - size + 1).clamp(min=0)
        last = cells.clamp(max=n - size)
        return (last - first + 1).clamp(min=0).double() / (n - size + 1)
    return axis(grid_h, h)[:, None] * axis(grid_w, w)[None, :]


def check_mask_config(grid_h: int, grid_w: int, num_targets: int, target_scale: tuple[float, float],
                      target_aspect: tuple[float, float], context_scale: tuple[float, float],
                      context_aspect: tuple[float, float], min_keep: int) -> None:
    """Raise MaskConfigError naming the key if the masking config is invalid or cannot produce masks."""
    if int(grid_h) != grid_h or int(grid_w) != grid_w or grid_h < 1 or grid_w < 1:
        raise MaskConfigError(f"patch grid must be at least 1x1, got {grid_h}x{grid_w} "
                              "(check model.img_size and model.patch_size)")
    if int(num_targets) != num_targets or num_targets < 1:
        raise MaskConfigError(f"masks.num_targets must be an integer >= 1, got {num_targets!r}")
    if int(min_keep) != min_keep or min_keep < 1:
        raise MaskConfigError(f"masks.min_keep must be an integer >= 1, got {min_keep!r}")
    t_scale = _pair(target_scale, "masks.target_scale")
    c_scale = _pair(context_scale, "masks.context_scale")
    t_aspect = _pair(target_aspect, "masks.target_aspect")
    c_aspect = _pair(context_aspect, "masks.context_aspect")
    if not (0 < t_scale[0] and t_scale[1] < 1):
        raise MaskConfigError(f"masks.target_scale must lie in (0, 1), got {target_scale!r}")
    if not (0 < c_scale[0] and c_scale[1] <= 1):
        raise MaskConfigError(f"masks.context_scale must lie in (0, 1], got {context_scale!r}")
    for key, aspect in (("masks.target_aspect", t_aspect), ("masks.context_aspect", c_aspect)):
        if aspect[0] <= 0:
            raise MaskConfigError(f"{key} must be > 0, got {aspect!r}")
    num_cells = grid_h * grid_w
    if min_keep > num_cells:
        raise MaskConfigError(f"masks.min_keep={min_keep} exceeds the {grid_h}x{grid_w} patch grid")

    target_sizes = _size_extremes(t_scale, t_aspect, grid_h, grid_w)
    too_big = [(h, w) for h, w in target_sizes if h > grid_h or w > grid_w]
    if too_big:
        h, w = too_big[-1]
        key = "masks.target_scale" if block_size(t_scale[1], 1.0, grid_h, grid_w)[0] > min(grid_h, grid_w) \
            else "masks.target_aspect"
        raise MaskConfigError(f"{key}: target blocks up to {h}x{w} patches do not fit the {grid_h}x{grid_w} "
                              f"patch grid (target_scale={target_scale!r}, target_aspect={target_aspect!r})")

    # Feasibility at the hardest size (largest target block, smallest context block): the expected number of
    # patches left free by K uniformly placed targets, times the context block's share of the grid. Below
    # min_keep, most placements would be rejected and sampling would stall or fail mid-training.
    largest = max(target_sizes, key=lambda hw: hw[0] * hw[1])
    free = ((1 - cell_coverage(grid_h, grid_w, *largest)) ** num_targets).sum().item()
    ctx_h, ctx_w = min(_size_extremes(c_scale, c_aspect, grid_h, grid_w), key=lambda hw: hw[0] * hw[1])
    context_share = min(ctx_h, grid_h) * min(ctx_w, grid_w) / num_cells
    expected_keep = free * context_share
    if expected_keep < min_keep:
        raise MaskConfigError(
            f"masks.num_targets={num_targets} target blocks of up to {largest[0]}x{largest[1]} patches leave "
            f"on average only {expected_keep:.1f} context patches on the {grid_h}x{grid_w} grid, fewer than "
            f"masks.min_keep={min_keep}; lower masks.num_targets or masks.target_scale, raise "
            "masks.context_scale, or lower masks.min_keep")


class MaskSampler:
    """Samples I-JEPA multi-block masks for batches of images on a grid_h x grid_w patch grid."""

    def __init__(self, grid_h: int, grid_w: int, num_targets: int = 4,
                 target_scale: tuple[float, float] = (0.15, 0.2), target_aspect: tuple[float, float] = (0.75, 1.5),
                 context_scale: tuple[float, float] = (0.85, 1.0), context_aspect: tuple[float, float] = (1.0, 1.0),
                 min_keep: int = 4, max_tries: int = 200) -> None:
        check_mask_config(grid_h, grid_w, num_targets, target_scale, target_aspect, context_scale,
                          context_aspect, min_keep)
        if int(max_tries) != max_tries or max_tries < 1:
            raise MaskConfigError(f"masks.max_tries must be an integer >= 1, got {max_tries!r}")
        self.grid_h, self.grid_w = int(grid_h), int(grid_w)
        self.num_patches = self.grid_h * self.grid_w
        self.num_targets, self.min_keep, self.max_tries = int(num_targets), int(min_keep), int(max_tries)
        self.target_scale = _pair(target_scale, "masks.target_scale")
        self.target_aspect = _pair(target_aspect, "masks.target_aspect")
        self.context_scale = _pair(context_scale, "masks.context_scale")
        self.context_aspect = _pair(context_aspect, "masks.context_aspect")

    def _draw_size(self, scale: tuple[float, float], aspect: tuple[float, float],
                   generator: torch.Generator) -> tuple[int, int]:
        u_scale, u_aspect = torch.rand(2, generator=generator).tolist()
        s = scale[0] + (scale[1] - scale[0]) * u_scale
        # Log-uniform aspect: h/w and w/h are equally likely for a symmetric range such as (0.5, 2).
        a = math.exp(math.log(aspect[0]) + (math.log(aspect[1]) - math.log(aspect[0])) * u_aspect)
        h, w = block_size(s, a, self.grid_h, self.grid_w)
        return min(h, self.grid_h), min(w, self.grid_w)  # only a context block can reach the clamp

    def _place_targets(self, count: int, h: int, w: int, generator: torch.Generator
                       ) -> tuple[torch.Tensor, torch.Tensor]:
        """Top-left rows/cols [count, K], uniform over 0..grid_h-h and 0..grid_w-w inclusive."""
        tops = torch.randint(0, self.grid_h - h + 1, (count, self.num_targets), generator=generator)
        lefts = torch.randint(0, self.grid_w - w + 1, (count, self.num_targets), generator=generator)
        return tops, lefts

    def _block_masks(self, tops: torch.Tensor, lefts: torch.Tensor, h: int, w: int) -> torch.Tensor:
        """bool [..., grid_h, grid_w] membership of blocks with the given top-left corners."""
        rows = torch.arange(self.grid_h)
        cols = torch.arange(self.grid_w)
        in_rows = (rows >= tops[..., None]) & (rows < tops[..., None] + h)
        in_cols = (cols >= lefts[..., None]) & (cols < lefts[..., None] + w)
        return in_rows[..., :, None] & in_cols[..., None, :]

    def _attempt(self, count: int, target_hw: tuple[int, int], context_hw: tuple[int, int],
                 generator: torch.Generator) -> tuple[torch.Tensor, ...]:
        """One placement try for `count` samples: target corners, free-cell map, chosen context position
        (flat index over valid context corners) and whether the context keeps at least min_keep patches."""
        (t_h, t_w), (c_h, c_w) = target_hw, context_hw
        ctx_rows, ctx_cols = self.grid_h - c_h + 1, self.grid_w - c_w + 1
        tops, lefts = self._place_targets(count, t_h, t_w, generator)
        free = ~self._block_masks(tops, lefts, t_h, t_w).any(dim=1)  # [count, H, W]
        # Free patches inside every possible context block, via an integral image.
        integral = torch.zeros(count, self.grid_h + 1, self.grid_w + 1, dtype=torch.int64)
        integral[:, 1:, 1:] = free.long().cumsum(1).cumsum(2)
        kept = (integral[:, c_h:, c_w:] - integral[:, :ctx_rows, c_w:]
                - integral[:, c_h:, :ctx_cols] + integral[:, :ctx_rows, :ctx_cols]).flatten(1)
        valid = kept >= self.min_keep
        # Uniform choice among context positions that keep enough patches: random scores, invalid positions
        # pushed below every valid one. A sample with no valid position is redrawn by the caller.
        scores = torch.rand(valid.shape, generator=generator).masked_fill(~valid, -1.0)
        return tops, lefts, free, scores.argmax(dim=1), valid.any(dim=1)

    def sample(self, batch_size: int, generator: torch.Generator) -> MaskBatch:
        """Masks for one batch: context [B, Nc] sorted, targets [B, K, h*w]; never overlapping."""
        if int(batch_size) != batch_size or batch_size < 1:
            raise ValueError(f"batch_size must be an integer >= 1, got {batch_size!r}")
        t_h, t_w = self._draw_size(self.target_scale, self.target_aspect, generator)
        c_h, c_w = self._draw_size(self.context_scale, self.context_aspect, generator)

        tops, lefts, free, choice, ok = self._attempt(batch_size, (t_h, t_w), (c_h, c_w), generator)
        for _ in range(self.max_tries - 1):
            if bool(ok.all()):
                break
            # Redraw only the failed samples (rare); integer indexing keeps the common path copy-free.
            failed = (~ok).nonzero().squeeze(1)
            redo = self._attempt(len(failed), (t_h, t_w), (c_h, c_w), generator)
            for whole, part in zip((tops, lefts, free, choice, ok), redo):
                whole[failed] = part
        if not bool(ok.all()):
            raise MaskSamplingError(
                f"could not place masks.num_targets={self.num_targets} target blocks of {t_h}x{t_w} patches and "
                f"a context of at least masks.min_keep={self.min_keep} patches on the {self.grid_h}x{self.grid_w} "
                f"grid within masks.max_tries={self.max_tries} attempts ({int((~ok).sum())} of {batch_size} "
                "samples failed); lower masks.num_targets or masks.target_scale")
        ctx_cols = self.grid_w - c_w + 1
        context = self._block_masks(choice // ctx_cols, choice % ctx_cols, c_h, c_w) & free

        offsets = (torch.arange(t_h)[:, None] * self.grid_w + torch.arange(t_w)[None, :]).flatten()
        target_idx = (tops * self.grid_w + lefts)[..., None] + offsets  # [B, K, h*w], row-major in each block
        context_idx = subsample_sorted(context.flatten(1), int(context.flatten(1).sum(1).min()), generator)
        return MaskBatch(context_idx=context_idx, target_idx=target_idx)


def subsample_sorted(member: torch.Tensor, keep: int, generator: torch.Generator) -> torch.Tensor:
    """int64 [B, keep]: for each row of bool `member` [B, N], `keep` of its True positions chosen uniformly at
    random (every member equally likely, whatever its index), returned in ascending order."""
    if (member.sum(1) < keep).any():
        raise ValueError(f"cannot keep {keep} positions: some rows have fewer members")
    scores = torch.rand(member.shape, generator=generator).masked_fill(~member, -1.0)
    return scores.topk(keep, dim=1).indices.sort(dim=1).values


def membership(idx: torch.Tensor, num_patches: int) -> torch.Tensor:
    """bool [B, num_patches]: which patches appear in idx [B, ...]."""
    out = torch.zeros(idx.shape[0], num_patches, dtype=torch.bool)
    out.scatter_(1, idx.reshape(idx.shape[0], -1), True)
    return out


def overlap_fraction(masks: MaskBatch, num_patches: int) -> torch.Tensor:
    """float [B]: per sample, the share of its (distinct) target patches that also appear in its context.
    0 for correct masks; this is what `mask/overlap_fraction` reports (averaged over the batch)."""
    targets = membership(masks.target_idx, num_patches)
    leaked = (targets & membership(masks.context_idx, num_patches)).sum(1)
    return leaked.double() / targets.sum(1).double()


def leak_targets(masks: MaskBatch, fraction: float, generator: torch.Generator) -> MaskBatch:
    """Fault injection: put round(fraction * T) of each sample's T distinct target patches (at least one when
    fraction > 0, at most the Nc patches its context holds) into its context, in place of randomly chosen context
    patches so Nc is unchanged."""
    if not 0.0 <= fraction <= 1.0:
        raise ValueError(f"mask leak fraction must be in [0, 1], got {fraction}")
    if fraction == 0.0:
        return MaskBatch(masks.context_idx.clone(), masks.target_idx.clone())
    num_patches = int(max(masks.context_idx.max(), masks.target_idx.max())) + 1
    targets = membership(masks.target_idx, num_patches)  # [B, P]
    num_context = masks.context_idx.shape[1]
    rows = []
    for b in range(targets.shape[0]):  # per-sample leak counts differ (targets may overlap each other)
        target_cells = targets[b].nonzero().squeeze(1)
        # A small context cannot take every leaked patch: leak what fits, so the fault never stops a run.
        num_leak = min(max(1, round(fraction * len(target_cells))), num_context)
        leaked = target_cells[torch.randperm(len(target_cells), generator=generator)[:num_leak]]
        kept = masks.context_idx[b][torch.randperm(num_context, generator=generator)[:num_context - num_leak]]
        rows.append(torch.cat([kept, leaked]).sort().values)
    return MaskBatch(torch.stack(rows), masks.target_idx.clone())
