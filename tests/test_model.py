import pytest
import torch

from jepa_core.config import ModelConfig

from jepa_core.method.model import (
    JEPA,
    Predictor,
    VisionTransformer,
    param_counts,
    select_targets,
    select_tokens,
    sincos_pos_embed_2d,
)

B, K, NT, NC = 3, 4, 5, 10


def tiny_jepa() -> JEPA:
    torch.manual_seed(0)
    return JEPA(ModelConfig(img_size=16, patch_size=4, in_chans=3, embed_dim=32, depth=2, num_heads=4, mlp_ratio=2.0,
                pred_dim=16, pred_depth=1, pred_num_heads=2))


def random_masks(num_patches: int, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    ctx = torch.stack([torch.randperm(num_patches, generator=g)[:NC].sort().values for _ in range(B)])
    tgt = torch.stack([torch.stack([torch.randperm(num_patches, generator=g)[:NT] for _ in range(K)])
                       for _ in range(B)])
    return ctx, tgt


def test_sincos_shape_deterministic_and_distinct():
    a = sincos_pos_embed_2d(4, 6, 32)
    b = sincos_pos_embed_2d(4, 6, 32)
    assert a.shape == (24, 32) and a.dtype == torch.float32
    assert torch.equal(a, b)
    assert not a.requires_grad
    # every pair of positions differs
    dists = torch.cdist(a, a) + torch.eye(24) * 1e3
    assert dists.min() > 1e-3
    # first half encodes the row: patches in the same row share it
    assert torch.equal(a[0, :16], a[5, :16])
    assert not torch.equal(a[0, :16], a[6, :16])


def test_sincos_rejects_bad_dim():
    with pytest.raises(ValueError, match="multiple of 4"):
        sincos_pos_embed_2d(4, 4, 30)


def test_encoder_shapes_and_keep_idx_gathers():
    vit = VisionTransformer(img_size=16, patch_size=4, in_chans=3, embed_dim=32, depth=1, num_heads=4, mlp_ratio=2.0)
    images = torch.randn(B, 3, 16, 16)
    full = vit(images)
    assert full.shape == (B, 16, 32)
    ctx, _ = random_masks(16)
    kept = vit(images, ctx)
    assert kept.shape == (B, NC, 32)
    # With the blocks removed the encoder is patch-embed + pos + norm, so keep_idx must equal gathering.
    vit.blocks = torch.nn.ModuleList()
    assert torch.allclose(vit(images, ctx), select_tokens(vit(images), ctx), atol=1e-6)


def test_encoder_rejects_wrong_image_size():
    vit = VisionTransformer(img_size=16, patch_size=4, in_chans=3, embed_dim=32, depth=1, num_heads=4, mlp_ratio=2.0)
    with pytest.raises(ValueError, match="16"):
        vit(torch.randn(1, 3, 8, 8))


def test_select_tokens_and_targets_order():
    tokens = torch.arange(B * 16, dtype=torch.float32).reshape(B, 16, 1).expand(B, 16, 2)
    _, tgt = random_masks(16)
    picked = select_targets(tokens, tgt)
    assert picked.shape == (B * K, NT, 2)
    for b in range(B):
        for k in range(K):
            assert torch.equal(picked[b * K + k, :, 0], (b * 16 + tgt[b, k]).float())
    ctx, _ = random_masks(16, seed=1)
    assert torch.equal(select_tokens(tokens, ctx)[:, :, 0], (torch.arange(B)[:, None] * 16 + ctx).float())


def test_predictor_output_order_matches_select_targets():
    torch.manual_seed(0)
    pred = Predictor(16, 4, 4, embed_dim=32, pred_dim=16, depth=1, num_heads=2, mlp_ratio=2.0)
    ctx, tgt = random_masks(16)
    context = torch.randn(B, NC, 32)
    out = pred(context, ctx, tgt)
    assert out.shape == (B * K, NT, 32)
    # Row b*K+k must depend only on image b's context and block k's positions.
    for b in range(B):
        for k in range(K):
            single = pred(context[b : b + 1], ctx[b : b + 1], tgt[b : b + 1, k : k + 1])
            assert torch.allclose(out[b * K + k], single[0], atol=1e-5)


def test_target_encoder_gets_no_gradients():
    model = tiny_jepa()
    ctx, tgt = random_masks(model.num_patches)
    images = torch.randn(B, 3, 16, 16)
    with torch.no_grad():
        targets = select_targets(model.target_encoder(images), tgt)
    preds = model.predictor(model.context_encoder(images, ctx), ctx, tgt)
    torch.nn.functional.mse_loss(preds, targets).backward()
    assert all(p.grad is None and not p.requires_grad for p in model.target_encoder.parameters())
    assert all(p.grad is not None for p in model.context_encoder.parameters())
    assert all(p.grad is not None for p in model.predictor.parameters())


def test_target_starts_equal_to_context():
    model = tiny_jepa()
    for t, c in zip(model.target_encoder.parameters(), model.context_encoder.parameters()):
        assert torch.equal(t, c) and t.data_ptr() != c.data_ptr()


def test_grid_and_param_counts_add_up():
    model = tiny_jepa()
    assert model.grid_size == (4, 4) and model.num_patches == 16
    counts = param_counts(model)
    assert set(counts) == {"params/total", "params/trainable", "params/encoder", "params/predictor"}
    assert counts["params/total"] == 2 * counts["params/encoder"] + counts["params/predictor"]
    assert counts["params/trainable"] == counts["params/encoder"] + counts["params/predictor"]
    assert counts["params/total"] == sum(p.numel() for p in model.parameters())


def test_autocast_bfloat16_forward_backward():
    model = tiny_jepa()
    ctx, tgt = random_masks(model.num_patches)
    images = torch.randn(B, 3, 16, 16)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        preds = model.predictor(model.context_encoder(images, ctx), ctx, tgt)
        with torch.no_grad():
            targets = select_targets(model.target_encoder(images), tgt)
        loss = torch.nn.functional.mse_loss(preds.float(), targets.float())
    loss.backward()
    assert torch.isfinite(loss)
    assert preds.shape == (B * K, NT, 32)


def test_bad_config_raises_named_error():
    with pytest.raises(ValueError, match="patch_size"):
        VisionTransformer(img_size=30, patch_size=4, in_chans=3, embed_dim=32, depth=1, num_heads=4, mlp_ratio=2.0)
    with pytest.raises(ValueError, match="model.num_heads"):
        VisionTransformer(img_size=16, patch_size=4, in_chans=3, embed_dim=36, depth=1, num_heads=8, mlp_ratio=2.0)
    with pytest.raises(ValueError, match="model.pred_dim"):
        JEPA(ModelConfig(img_size=16, patch_size=4, in_chans=3, embed_dim=32, depth=1, num_heads=4, mlp_ratio=2.0,
                         pred_dim=18, pred_depth=1, pred_num_heads=2))
