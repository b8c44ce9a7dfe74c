"""I-JEPA model: a ViT context encoder, its EMA copy as target encoder, and a narrow predictor.

Token layout conventions used everywhere in jepa_core:

- patch index ``p = row * grid_w + col`` (row-major over the patch grid);
- ``context_idx`` is ``int64 [B, Nc]``, ``target_idx`` is ``int64 [B, K, Nt]`` (K target blocks per image);
- predictions and targets for the K blocks are flattened batch-major: row ``b * K + k`` holds block ``k`` of
  image ``b``. :func:`select_targets` and :meth:`Predictor.forward` both follow this order, so a loss can compare
  them element-wise.
"""

from __future__ import annotations

import copy
import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from jepa_core.config import ModelConfig
from jepa_core.method.linear import Linear

__all__ = [
    "sincos_pos_embed_2d",
    "VisionTransformer",
    "Predictor",
    "JEPA",
    "select_tokens",
    "select_targets",
    "param_counts",
]


def _sincos_1d(positions: Tensor, dim: int) -> Tensor:
    """Sine/cosine features of scalar positions: [P] -> [P, dim] (first half sin, second half cos)."""
    freqs = 1.0 / (10000.0 ** (torch.arange(dim // 2, dtype=torch.float64) / (dim // 2)))
    angles = positions.to(torch.float64)[:, None] * freqs[None, :]
    return torch.cat([torch.sin(angles), torch.cos(angles)], dim=1)


def sincos_pos_embed_2d(grid_h: int, grid_w: int, dim: int) -> Tensor:
    """Fixed 2-D sine/cosine position embedding, ``[grid_h * grid_w, dim]`` float32, row-major patch order.

    Half of the channels encode the row, half the column (as in MAE / I-JEPA). ``dim`` must be divisible by 4.
    """
    if grid_h < 1 or grid_w < 1:
        raise ValueError(f"sincos_pos_embed_2d: grid must be at least 1x1, got {grid_h}x{grid_w}")
    if dim < 4 or dim % 4 != 0:
        raise ValueError(f"sincos_pos_embed_2d: dim must be a positive multiple of 4, got {dim}")
    rows = torch.arange(grid_h).repeat_interleave(grid_w)  # row of each patch, row-major
    cols = torch.arange(grid_w).repeat(grid_h)
    emb = torch.cat([_sincos_1d(rows, dim // 2), _sincos_1d(cols, dim // 2)], dim=1)
    return emb.to(torch.float32)


def select_tokens(tokens: Tensor, idx: Tensor) -> Tensor:
    """Gather tokens per sample: ``tokens [B, N, D]`` with ``idx int64 [B, M]`` -> ``[B, M, D]``."""
    if tokens.dim() != 3 or idx.dim() != 2 or idx.shape[0] != tokens.shape[0]:
        raise ValueError(
            f"select_tokens: expected tokens [B,N,D] and idx [B,M], got {tuple(tokens.shape)} and {tuple(idx.shape)}"
        )
    return torch.gather(tokens, 1, idx.unsqueeze(-1).expand(-1, -1, tokens.shape[-1]))


def select_targets(tokens: Tensor, target_idx: Tensor) -> Tensor:
    """Target tokens of each block: ``tokens [B, N, D]``, ``target_idx [B, K, Nt]`` -> ``[B*K, Nt, D]``.

    Row ``b * K + k`` is block ``k`` of image ``b``: the same order as :meth:`Predictor.forward`.
    """
    if target_idx.dim() != 3:
        raise ValueError(f"select_targets: expected target_idx [B,K,Nt], got {tuple(target_idx.shape)}")
    batch, num_blocks, block_len = target_idx.shape
    gathered = select_tokens(tokens, target_idx.reshape(batch, num_blocks * block_len))
    return gathered.reshape(batch * num_blocks, block_len, tokens.shape[-1])


# Up to this many keys, attention on the CPU is computed op by op when autograd records it or more than one thread
# runs it (see Attention.forward); at 196 keys of 64 channels (`base`) the fused kernel is the faster again.
_CPU_EXPLICIT_MAX_KEYS = 128


class Attention(nn.Module):
    """Multi-head self-attention through ``F.scaled_dot_product_attention`` (fused kernels on GPU; on the CPU, over
    short sequences, op by op when autograd records it or more than one thread runs it: ``_CPU_EXPLICIT_MAX_KEYS``)."""

    def __init__(self, dim: int, num_heads: int) -> None:
        super().__init__()
        if dim % num_heads != 0:
            raise ValueError(f"embedding dim {dim} is not divisible by num_heads {num_heads}")
        self.num_heads = num_heads
        self.qkv = Linear(dim, 3 * dim)
        self.proj = Linear(dim, dim)

    def forward(self, x: Tensor, queries: int | None = None) -> Tensor:
        """``x [B, L, D]`` -> ``[B, L, D]``; with ``queries = n``, only the outputs of the last n tokens
        ``[B, n, D]`` (keys and values still come from all L)."""
        batch, length, dim = x.shape
        # Unbound on the q/k/v axis: the backward stacks the three gradients straight into the Linear's layout.
        q, k, v = (t.transpose(1, 2) for t in self.qkv(x).reshape(batch, length, 3, self.num_heads, -1).unbind(2))
        if queries is not None:
            q, length = q[:, :, -queries:], queries
        if x.device.type == "cpu" and k.shape[2] <= _CPU_EXPLICIT_MAX_KEYS and (
                q.requires_grad or torch.get_num_threads() > 1):
            # The same softmax(q k^T / sqrt(d)) v as three ops: on the CPU, for short sequences, their backward is
            # faster than the fused kernel's (1.3-1.4x on `tiny`'s shapes), and without autograd they use a second
            # thread where the fused kernel barely does (benchmarks/ijepa_step.py).
            scores = (q * (dim // self.num_heads) ** -0.5) @ k.transpose(-2, -1)
            out = scores.softmax(dim=-1) @ v
        else:
            out = F.scaled_dot_product_attention(q, k, v)
        return self.proj(out.transpose(1, 2).reshape(batch, length, dim))


class MLP(nn.Module):
    def __init__(self, dim: int, hidden_dim: int) -> None:
        super().__init__()
        self.fc1 = Linear(dim, hidden_dim)
        self.fc2 = Linear(hidden_dim, dim)

    def forward(self, x: Tensor) -> Tensor:
        h = self.fc1(x)
        # Without autograd (the target encoder, evaluation) GELU overwrites its input: the same numbers without a
        # second hidden-size buffer, whose fresh pages cost the CPU more than the GELU itself.
        return self.fc2(F.gelu(h) if h.requires_grad else torch._C._nn.gelu_(h))


class Block(nn.Module):
    """Pre-norm transformer block."""

    def __init__(self, dim: int, num_heads: int, mlp_ratio: float) -> None:
        super().__init__()
        self.norm1 = nn.LayerNorm(dim)
        self.attn = Attention(dim, num_heads)
        self.norm2 = nn.LayerNorm(dim)
        self.mlp = MLP(dim, int(dim * mlp_ratio))

    def forward(self, x: Tensor, keep_last: int | None = None) -> Tensor:
        """``[B, L, D]`` -> ``[B, L, D]``, or only the last ``keep_last`` tokens' outputs ``[B, keep_last, D]``: every
        token is still a key and a value, but no query, projection or MLP is computed for a discarded one."""
        if keep_last is None:
            x = _residual(x, self.attn(self.norm1(x)))
        else:
            x = _residual(x[:, -keep_last:], self.attn(self.norm1(x), queries=keep_last))
        return _residual(x, self.mlp(self.norm2(x)))


def _residual(x: Tensor, branch: Tensor) -> Tensor:
    """``x + branch``, written into the branch's fresh output (a Linear's: autograd keeps none) when that gives the
    same tensor: one buffer fewer per residual, the same numbers (``branch + x == x + branch``)."""
    if branch.dtype == x.dtype and branch.shape == x.shape:
        return branch.add_(x)
    return x + branch


def _init_weights(module: nn.Module) -> None:
    if isinstance(module, (nn.Linear, nn.Conv2d)):
        nn.init.trunc_normal_(module.weight, std=0.02)
        if module.bias is not None:
            nn.init.zeros_(module.bias)
    elif isinstance(module, nn.LayerNorm):
        nn.init.ones_(module.weight)
        nn.init.zeros_(module.bias)


def _rescale_residual_projections(blocks: nn.ModuleList) -> None:
    # I-JEPA's fix_init_weight: shrink each block's residual output by sqrt(2 * layer) so the variance of the
    # residual stream does not grow with depth at initialisation.
    with torch.no_grad():
        for layer, block in enumerate(blocks, start=1):
            block.attn.proj.weight.div_(math.sqrt(2.0 * layer))
            block.mlp.fc2.weight.div_(math.sqrt(2.0 * layer))


class VisionTransformer(nn.Module):
    """ViT without class token; used as context encoder and (a deep copy) as target encoder."""

    def __init__(
        self,
        img_size: int,
        patch_size: int,
        in_chans: int,
        embed_dim: int,
        depth: int,
        num_heads: int,
        mlp_ratio: float,
    ) -> None:
        super().__init__()
        if patch_size < 1 or img_size % patch_size != 0:
            raise ValueError(f"model.img_size {img_size} must be a positive multiple of model.patch_size {patch_size}")
        if depth < 1:
            raise ValueError(f"model.depth must be at least 1, got {depth}")
        if embed_dim % num_heads != 0 or embed_dim % 4 != 0:
            raise ValueError(
                f"model.embed_dim {embed_dim} must be a multiple of 4 and of model.num_heads {num_heads}"
            )
        self.img_size = img_size
        self.patch_size = patch_size
        self.embed_dim = embed_dim
        self.grid_h = self.grid_w = img_size // patch_size
        self.num_patches = self.grid_h * self.grid_w
        self.patch_embed = nn.Conv2d(in_chans, embed_dim, kernel_size=patch_size, stride=patch_size)
        # Fixed, so not a parameter; non-persistent because it is rebuilt from the constructor arguments.
        self.register_buffer("pos_embed", sincos_pos_embed_2d(self.grid_h, self.grid_w, embed_dim), persistent=False)
        self.blocks = nn.ModuleList([Block(embed_dim, num_heads, mlp_ratio) for _ in range(depth)])
        self.norm = nn.LayerNorm(embed_dim)
        self.apply(_init_weights)
        _rescale_residual_projections(self.blocks)
        # Unit-variance patch embeddings. With the 0.02 init of the other layers, small patches (4x4x3 = 48 inputs)
        # give content features several times smaller than the sin-cos positions, and the predictor then gets a
        # low loss from positions alone while the encoder learns little about the image (measured on `tiny`).
        fan_in = in_chans * patch_size * patch_size
        nn.init.normal_(self.patch_embed.weight, std=1.0 / math.sqrt(fan_in))

    def forward(self, images: Tensor, keep_idx: Tensor | None = None) -> Tensor:
        """``images [B, C, H, W]`` -> tokens ``[B, N, D]`` after the final LayerNorm.

        With ``keep_idx int64 [B, N]`` only those patches (positions already added) go through the blocks.
        """
        x = self._embed(images)
        if keep_idx is not None:
            x = select_tokens(x, keep_idx)
        for block in self.blocks:
            x = block(x)
        return self.norm(x)

    def _embed(self, images: Tensor) -> Tensor:
        """``images [B, C, H, W]`` -> patch embeddings with their positions ``[B, N, D]``."""
        if images.dim() != 4 or images.shape[-2:] != (self.img_size, self.img_size):
            raise ValueError(
                f"VisionTransformer expects images [B,C,{self.img_size},{self.img_size}], got {tuple(images.shape)}"
            )
        x = self.patch_embed(images).flatten(2).transpose(1, 2)
        return x + self.pos_embed.to(x.dtype)

    def forward_targets(self, images: Tensor, target_idx: Tensor) -> tuple[Tensor, Tensor]:
        """Only what a loss reads of the whole image: ``(tokens [B, M, D], where [B, K, Nt])``, where
        ``select_targets(tokens, where)`` equals ``select_targets(forward(images), target_idx)`` (to rounding: the
        last block sums its keys in another order). Every patch goes through every block but the last as
        ``forward`` does, and is a key and a value in the last; there, queries, projection and MLP are computed for
        M = min(N, K * Nt) patches per image, its target blocks' union and, in front of it, other patches as padding.
        M comes from the shapes alone, so the device is never read."""
        x = self._embed(images)
        batch, num_patches = images.shape[0], self.num_patches
        flat = target_idx.reshape(batch, -1)
        in_union = torch.zeros(batch, num_patches, dtype=torch.uint8, device=flat.device).scatter_(1, flat, 1)
        count = min(num_patches, flat.shape[1])
        # Each image's patches, its union last (a stable sort of 0s and 1s); `place` inverts that order.
        order = in_union.sort(dim=1, stable=True).indices
        place = torch.empty_like(order).scatter_(1, order, torch.arange(num_patches, device=order.device)
                                                 .expand(batch, -1))
        for block in self.blocks[:-1]:
            x = block(x)
        x = self.blocks[-1](select_tokens(x, order), keep_last=count)
        where = torch.gather(place, 1, flat) - (num_patches - count)
        return self.norm(x), where.reshape(target_idx.shape)


class Predictor(nn.Module):
    """Narrow transformer that predicts target-block tokens from context tokens and target positions."""

    def __init__(
        self,
        num_patches: int,
        grid_h: int,
        grid_w: int,
        embed_dim: int,
        pred_dim: int,
        depth: int,
        num_heads: int,
        mlp_ratio: float,
    ) -> None:
        super().__init__()
        if num_patches != grid_h * grid_w:
            raise ValueError(f"Predictor: num_patches {num_patches} != grid_h*grid_w = {grid_h}*{grid_w}")
        if depth < 1:
            raise ValueError(f"model.pred_depth must be at least 1, got {depth}")
        if pred_dim % num_heads != 0 or pred_dim % 4 != 0:
            raise ValueError(
                f"model.pred_dim {pred_dim} must be a multiple of 4 and of model.pred_num_heads {num_heads}"
            )
        self.num_patches = num_patches
        self.embed_in = Linear(embed_dim, pred_dim)
        self.mask_token = nn.Parameter(torch.zeros(1, 1, pred_dim))
        self.register_buffer("pos_embed", sincos_pos_embed_2d(grid_h, grid_w, pred_dim), persistent=False)
        self.blocks = nn.ModuleList([Block(pred_dim, num_heads, mlp_ratio) for _ in range(depth)])
        self.norm = nn.LayerNorm(pred_dim)
        self.embed_out = Linear(pred_dim, embed_dim)
        self.apply(_init_weights)
        nn.init.trunc_normal_(self.mask_token, std=0.02)
        _rescale_residual_projections(self.blocks)

    def forward(self, context_tokens: Tensor, context_idx: Tensor, target_idx: Tensor) -> Tensor:
        """``context_tokens [B, Nc, D]``, ``context_idx [B, Nc]``, ``target_idx [B, K, Nt]`` -> ``[B*K, Nt, D]``."""
        if context_tokens.dim() != 3 or context_idx.shape != context_tokens.shape[:2]:
            raise ValueError(
                f"Predictor: context_tokens [B,Nc,D] and context_idx [B,Nc] disagree: "
                f"{tuple(context_tokens.shape)} vs {tuple(context_idx.shape)}"
            )
        if target_idx.dim() != 3 or target_idx.shape[0] != context_tokens.shape[0]:
            raise ValueError(f"Predictor: expected target_idx [B,K,Nt], got {tuple(target_idx.shape)}")
        batch, num_blocks, block_len = target_idx.shape
        pos = self.pos_embed.unsqueeze(0).expand(batch, -1, -1)

        x = self.embed_in(context_tokens)
        x = x + select_tokens(pos, context_idx).to(x.dtype)
        # One sequence per (image, target block), batch-major: repeat each image's context K times.
        x = x.repeat_interleave(num_blocks, dim=0)  # [B*K, Nc, P]

        target_pos = select_targets(pos, target_idx)  # [B*K, Nt, P]
        queries = self.mask_token.to(x.dtype) + target_pos.to(x.dtype)
        x = torch.cat([x, queries], dim=1)
        for block in self.blocks[:-1]:
            x = block(x)
        # Only the target tokens' outputs are read: the last block computes nothing else (the same numbers).
        x = self.blocks[-1](x, keep_last=block_len)
        return self.embed_out(self.norm(x))


class JEPA(nn.Module):
    """Context encoder + EMA target encoder (no gradients) + predictor, sized by a run's `[model]` section.

    The sizes live in `ModelConfig` alone (the two modules take them explicitly, with no defaults of their own);
    `build_jepa` adds the seeded initialisation a run uses."""

    def __init__(self, m: ModelConfig) -> None:
        super().__init__()
        self.context_encoder = VisionTransformer(m.img_size, m.patch_size, m.in_chans, m.embed_dim, m.depth,
                                                 m.num_heads, m.mlp_ratio)
        self.target_encoder = copy.deepcopy(self.context_encoder)
        self.target_encoder.requires_grad_(False)
        grid_h, grid_w = self.grid_size
        self.predictor = Predictor(self.num_patches, grid_h, grid_w, m.embed_dim, m.pred_dim, m.pred_depth,
                                   m.pred_num_heads, m.mlp_ratio)

    @property
    def grid_size(self) -> tuple[int, int]:
        return (self.context_encoder.grid_h, self.context_encoder.grid_w)

    @property
    def num_patches(self) -> int:
        return self.context_encoder.num_patches


def build_jepa(m: ModelConfig, seed: int) -> JEPA:
    """The model of a run's `[model]` section, initialised from `seed` alone.

    The initial weights come from torch's global generator (nn.init); it is forked here, so building a model
    neither depends on nor changes the caller's random state."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return JEPA(m)


def param_counts(model: JEPA) -> dict[str, int]:
    """Parameter counts for the run-facts row: total (both encoders + predictor), trainable, encoder, predictor."""

    def count(module: nn.Module, trainable_only: bool = False) -> int:
        return sum(p.numel() for p in module.parameters() if p.requires_grad or not trainable_only)

    return {
        "params/total": count(model),
        "params/trainable": count(model, trainable_only=True),
        "params/encoder": count(model.context_encoder),
        "params/predictor": count(model.predictor),
    }
