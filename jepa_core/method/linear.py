"""`Linear`: `nn.Linear` whose float32 products on the CPU run in oneDNN instead of the BLAS behind `addmm`.

The same products in float32 (IEEE, no reduced precision): only the library that computes them changes. Why: on the
machine this project is measured on (AMD EPYC, AVX-512), MKL's `sgemm`, which PyTorch's CPU `addmm` and `mm` call,
takes 2.2-2.3x as long as oneDNN's matmul on every shape of `tiny` (benchmarks/RESULTS.md, "Our training
step against the official I-JEPA step").
The forward and the gradient of the input go through oneDNN; the weight's gradient stays an `mm` (oneDNN wants
both of its operands transposed there, and the copies cost what the faster product saves).
Everywhere else (GPU, another dtype, autocast, torch.compile, no oneDNN in the build) it is `F.linear`.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch
import torch.nn.functional as F
from torch import Tensor, nn

__all__ = ["Linear", "default_products", "onednn_products"]


def onednn_products() -> bool:
    """Whether this PyTorch build runs the float32 CPU products in oneDNN, and gets a small one right: the op is
    PyTorch's own (the one its compiler emits for CPU linears) but not public, so a build that lacks it or changed
    its signature falls back to `F.linear` rather than failing at the first step."""
    if not (torch.backends.mkldnn.is_available() and hasattr(torch.ops.mkldnn, "_linear_pointwise")):
        return False
    x, weight, bias = torch.arange(6.0).reshape(2, 3), torch.arange(12.0).reshape(4, 3), torch.arange(4.0)
    try:
        return torch.equal(_onednn_linear(x, weight, bias), F.linear(x, weight, bias))
    except (RuntimeError, TypeError):
        return False


@contextlib.contextmanager
def default_products() -> Iterator[None]:
    """Within it, every `Linear` computes through `F.linear` (PyTorch's default BLAS on the CPU): to compare the two
    libraries (benchmarks/ijepa_step.py --with-blas) or to rule oneDNN out of a difference."""
    global _ONEDNN
    saved, _ONEDNN = _ONEDNN, False
    try:
        yield
    finally:
        _ONEDNN = saved


def _onednn_linear(x: Tensor, weight: Tensor, bias: Tensor | None) -> Tensor:
    """``x @ weight.T + bias`` in oneDNN: ``x [M, K]``, ``weight [N, K]`` -> a fresh ``[M, N]`` (of a 2-D input;
    of more dimensions oneDNN returns a view, which autograd would not let the caller add into in place)."""
    return torch.ops.mkldnn._linear_pointwise(x, weight, bias, "none", [], "")


_ONEDNN = onednn_products()


class _OneDnnLinear(torch.autograd.Function):
    @staticmethod
    def forward(x: Tensor, weight: Tensor, bias: Tensor | None) -> Tensor:
        return _onednn_linear(x, weight, bias)

    @staticmethod
    def setup_context(ctx, inputs, output) -> None:
        x, weight, bias = inputs
        ctx.save_for_backward(x, weight)
        ctx.has_bias = bias is not None

    @staticmethod
    def backward(ctx, grad: Tensor):
        x, weight = ctx.saved_tensors
        needs_x, needs_weight, needs_bias = ctx.needs_input_grad
        grad = grad.contiguous()
        grad_x = _onednn_linear(grad, weight.t().contiguous(), None) if needs_x else None
        grad_weight = grad.t().mm(x) if needs_weight else None
        grad_bias = grad.sum(0) if needs_bias and ctx.has_bias else None
        return grad_x, grad_weight, grad_bias


class Linear(nn.Linear):
    """`nn.Linear` (same parameters, same state-dict keys) with its float32 CPU products in oneDNN."""

    def forward(self, x: Tensor) -> Tensor:
        if (not _ONEDNN or x.device.type != "cpu" or x.dtype != torch.float32 or self.weight.dtype != torch.float32
                or torch.is_autocast_enabled("cpu") or torch.compiler.is_compiling()):
            return F.linear(x, self.weight, self.bias)
        rows = x.reshape(-1, x.shape[-1])
        if torch.is_grad_enabled() and any(t is not None and t.requires_grad for t in (x, self.weight, self.bias)):
            out = _OneDnnLinear.apply(rows, self.weight, self.bias)
        else:
            out = _onednn_linear(rows, self.weight, self.bias)
        # As F.linear's own reshape does: not a view to autograd, so a residual may still be added into it in place.
        return torch.ops.aten._unsafe_view(out, (*x.shape[:-1], out.shape[-1]))
