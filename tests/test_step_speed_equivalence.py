"""The fast step computes what the plain one does (issue 48): a straightforward re-implementation of the I-JEPA
forward (every block on every token, fused attention, GELU and residuals out of place, every product through
`F.linear`), loss, clipping, per-parameter AdamW and EMA, run beside `train_step` from the same weights on the same
batches.

Forwards without autograd are bit-identical at one thread (at more, attention runs op by op: to rounding); with
autograd the CPU's op-by-op attention, the last predictor block's skipped rows and the gradient reductions round
differently, so losses and weights agree to float tolerance."""

import torch
import torch.nn.functional as F

from jepa_core.config import ModelConfig
from jepa_core.method.masks import MaskSampler
from jepa_core.method.model import JEPA, Block, Predictor, VisionTransformer, select_targets, select_tokens
from jepa_core.method.step import StepHooks, StepSettings, TrainState, build_optimizer, train_step

CFG = ModelConfig(img_size=16, patch_size=4, in_chans=3, embed_dim=32, depth=2, num_heads=4, mlp_ratio=2.0,
                  pred_dim=16, pred_depth=2, pred_num_heads=4)


def model() -> JEPA:
    torch.manual_seed(0)
    return JEPA(CFG)


def lin(layer: torch.nn.Linear, x: torch.Tensor) -> torch.Tensor:
    """The layer's product through PyTorch's own `F.linear`, not the model's oneDNN path."""
    return F.linear(x, layer.weight, layer.bias)


def ref_block(block: Block, x: torch.Tensor) -> torch.Tensor:
    h = block.norm1(x)
    b, n, d = h.shape
    q, k, v = lin(block.attn.qkv, h).reshape(b, n, 3, block.attn.num_heads, d // block.attn.num_heads).permute(
        2, 0, 3, 1, 4)
    a = F.scaled_dot_product_attention(q, k, v).transpose(1, 2).reshape(b, n, d)
    x = x + lin(block.attn.proj, a)
    return x + lin(block.mlp.fc2, F.gelu(lin(block.mlp.fc1, block.norm2(x))))


def ref_encoder(enc: VisionTransformer, images: torch.Tensor, keep: torch.Tensor | None = None) -> torch.Tensor:
    x = enc.patch_embed(images).flatten(2).transpose(1, 2) + enc.pos_embed
    x = x if keep is None else select_tokens(x, keep)
    for block in enc.blocks:
        x = ref_block(block, x)
    return enc.norm(x)


def ref_predictor(p: Predictor, z: torch.Tensor, ctx: torch.Tensor, tgt: torch.Tensor) -> torch.Tensor:
    b, k, nt = tgt.shape
    pos = p.pos_embed.unsqueeze(0).expand(b, -1, -1)
    x = (lin(p.embed_in, z) + select_tokens(pos, ctx)).repeat_interleave(k, dim=0)
    x = torch.cat([x, p.mask_token + select_targets(pos, tgt)], dim=1)
    for block in p.blocks:
        x = ref_block(block, x)
    return lin(p.embed_out, p.norm(x)[:, -nt:])


def ref_step(m: JEPA, opt: torch.optim.Optimizer, images, masks, s: StepSettings) -> torch.Tensor:
    for group in opt.param_groups:
        group["lr"], group["weight_decay"] = s.lr, (s.wd if group["decay"] else 0.0)
    with torch.no_grad():
        h = ref_encoder(m.target_encoder, images)
        target = select_targets(F.layer_norm(h, h.shape[-1:]), masks.target_idx)
    pred = ref_predictor(m.predictor, ref_encoder(m.context_encoder, images, masks.context_idx),
                         masks.context_idx, masks.target_idx)
    loss = F.smooth_l1_loss(pred, target)
    opt.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_([p for g in opt.param_groups for p in g["params"]], s.grad_clip)
    opt.step()
    with torch.no_grad():
        for t, o in zip(m.target_encoder.parameters(), m.context_encoder.parameters()):
            t.mul_(s.ema_tau).add_((1 - s.ema_tau) * o)
    return loss.detach()


def batches(n: int):
    g = torch.Generator().manual_seed(3)
    sampler = MaskSampler(4, 4, num_targets=3, target_scale=(0.15, 0.2), context_scale=(0.85, 1.0), min_keep=2)
    return [(torch.randn(8, 3, 16, 16, generator=g), sampler.sample(8, g)) for _ in range(n)]


def forwards_against_reference(m: JEPA, images, masks) -> list[tuple[torch.Tensor, torch.Tensor]]:
    with torch.no_grad():
        z = m.context_encoder(images, masks.context_idx)
        return [(m.target_encoder(images), ref_encoder(m.target_encoder, images)),
                (z, ref_encoder(m.context_encoder, images, masks.context_idx)),
                (m.predictor(z, masks.context_idx, masks.target_idx),
                 ref_predictor(m.predictor, z, masks.context_idx, masks.target_idx))]


def test_forwards_without_autograd_match_the_plain_ones():
    m, ((images, masks),) = model(), batches(1)
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(1)  # the fused attention kernel, as the reference: bit for bit
        assert all(torch.equal(got, ref) for got, ref in forwards_against_reference(m, images, masks))
        torch.set_num_threads(2)  # attention op by op (it uses the second thread): to rounding
        for got, ref in forwards_against_reference(m, images, masks):
            torch.testing.assert_close(got, ref, rtol=1e-5, atol=1e-6)
    finally:
        torch.set_num_threads(threads)


def test_a_block_leaves_its_input_alone():
    m = model()
    x = torch.randn(2, 5, CFG.embed_dim, requires_grad=True)
    before = x.detach().clone()
    block = m.context_encoder.blocks[0]
    block(x).sum().backward()
    with torch.no_grad():
        block(x)
        block(x, keep_last=2)
    assert torch.equal(x.detach(), before)


def test_train_steps_match_the_plain_step():
    fast, plain = model(), model()
    settings = StepSettings(step=1, lr=1e-3, wd=0.04, ema_tau=0.99)
    state = TrainState.plain(fast, build_optimizer(fast, (0.9, 0.95)), 8)
    plain_opt = build_optimizer(plain, (0.9, 0.95))
    for group in plain_opt.param_groups:
        group["fused"], group["foreach"] = False, False  # the per-parameter loop
    for images, masks in batches(5):
        out = train_step(images, masks, state, settings)
        ref_loss = ref_step(plain, plain_opt, images, masks, settings)
        torch.testing.assert_close(out.loss, ref_loss, rtol=1e-5, atol=1e-7)
    for (name, a), b in zip(fast.named_parameters(), plain.parameters()):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-6, msg=lambda m, name=name: f"{name}: {m}")
    assert not all(torch.equal(a, b) for a, b in zip(fast.parameters(), model().parameters()))


def test_the_target_encoder_computes_only_what_the_loss_reads():
    m = model()
    g = torch.Generator().manual_seed(5)
    images = torch.randn(8, 3, 16, 16, generator=g)
    # 3 targets of 2-3 patches: padded unions (K * Nt < N); 6 of 4-6 patches: every patch is computed (K * Nt >= N)
    for targets, scale in ((3, (0.15, 0.2)), (6, (0.25, 0.35))):
        masks = MaskSampler(4, 4, num_targets=targets, target_scale=scale, min_keep=2).sample(8, g)
        with torch.no_grad():
            tokens, where = m.target_encoder.forward_targets(images, masks.target_idx)
            want = select_targets(ref_encoder(m.target_encoder, images), masks.target_idx)
        assert tokens.shape[1] == min(16, masks.target_idx[0].numel())
        torch.testing.assert_close(select_targets(tokens, where), want, rtol=1e-5, atol=1e-6)


def test_the_step_returns_every_patch_of_the_target_only_when_asked():
    settings = StepSettings(step=1, lr=1e-3, wd=0.04, ema_tau=0.99)
    ((images, masks),) = batches(1)
    outs = []
    for hooks in (StepHooks(), StepHooks(whole_target=True)):
        m = model()
        outs.append(train_step(images, masks, TrainState.plain(m, build_optimizer(m, (0.9, 0.95)), 8), settings,
                               hooks))
    trimmed, whole = outs
    assert trimmed.target_tokens is None
    assert whole.target_tokens.shape == (8, 16, CFG.embed_dim)
    torch.testing.assert_close(trimmed.target, whole.target, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(trimmed.loss, whole.loss, rtol=1e-5, atol=1e-7)
