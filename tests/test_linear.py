"""`jepa_core.method.linear.Linear`: the products of `nn.Linear`, computed in oneDNN on the CPU, with the same
parameters, gradients (to float32 rounding) and state-dict keys; `F.linear` wherever the oneDNN path does not apply."""

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from jepa_core.method import linear as linear_module
from jepa_core.method.linear import Linear, onednn_products

pytestmark = pytest.mark.skipif(not onednn_products(), reason="this PyTorch build has no oneDNN")


def layer(in_features: int = 24, out_features: int = 40, bias: bool = True) -> Linear:
    torch.manual_seed(0)
    return Linear(in_features, out_features, bias=bias)


@pytest.mark.parametrize("shape", [(7, 24), (3, 5, 24), (2, 3, 4, 24)])
def test_the_forward_is_f_linear_to_rounding(shape):
    lin = layer()
    x = torch.randn(*shape)
    with torch.no_grad():
        out = lin(x)
    assert out.shape == (*shape[:-1], 40)
    torch.testing.assert_close(out, F.linear(x, lin.weight, lin.bias), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("bias", [True, False])
def test_every_gradient_is_f_linear_s_to_rounding(bias):
    lin = layer(bias=bias)
    x = torch.randn(4, 9, 24, requires_grad=True)
    upstream = torch.randn(4, 9, 40)
    (lin(x) * upstream).sum().backward()
    ours = [x.grad] + [p.grad for p in lin.parameters()]

    x_ref = x.detach().clone().requires_grad_(True)
    weight = lin.weight.detach().clone().requires_grad_(True)
    bias_ref = lin.bias.detach().clone().requires_grad_(True) if bias else None
    (F.linear(x_ref, weight, bias_ref) * upstream).sum().backward()
    reference = [x_ref.grad, weight.grad] + ([bias_ref.grad] if bias else [])
    assert len(ours) == len(reference)
    for got, want in zip(ours, reference):
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)


def test_a_frozen_layer_still_passes_the_gradient_to_its_input():
    lin = layer().requires_grad_(False)
    x = torch.randn(6, 24, requires_grad=True)
    lin(x).sum().backward()
    torch.testing.assert_close(x.grad, lin.weight.sum(0).expand(6, -1), rtol=1e-5, atol=1e-5)
    assert lin.weight.grad is None


def test_a_residual_added_into_the_output_in_place_keeps_the_gradients_right():
    lin = layer(24, 24)
    x = torch.randn(3, 5, 24, requires_grad=True)
    lin(x).add_(x).square().sum().backward()
    x_ref = x.detach().clone().requires_grad_(True)
    weight = lin.weight.detach().clone().requires_grad_(True)
    (F.linear(x_ref, weight, lin.bias.detach()) + x_ref).square().sum().backward()
    torch.testing.assert_close(x.grad, x_ref.grad, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(lin.weight.grad, weight.grad, rtol=1e-5, atol=1e-5)


def test_the_products_go_through_onednn_only_where_they_apply(monkeypatch):
    calls = []
    real = linear_module._onednn_linear
    monkeypatch.setattr(linear_module, "_onednn_linear", lambda *a: calls.append(1) or real(*a))
    lin = layer()
    x = torch.randn(5, 24)
    lin(x)
    assert len(calls) == 1
    lin.double()(x.double())  # another dtype
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert layer()(x).dtype == torch.bfloat16  # autocast decides the dtype, as for nn.Linear
    assert len(calls) == 1


def test_it_is_an_nn_linear_with_the_same_state_dict():
    lin, plain = layer(), nn.Linear(24, 40)
    assert isinstance(lin, nn.Linear)
    assert list(lin.state_dict()) == list(plain.state_dict())
    plain.load_state_dict(lin.state_dict())
    x = torch.randn(2, 24)
    with torch.no_grad():
        torch.testing.assert_close(plain(x), lin(x), rtol=1e-6, atol=1e-6)


def test_default_products_route_every_product_through_f_linear_until_they_end(monkeypatch):
    calls = []
    real = linear_module._onednn_linear
    monkeypatch.setattr(linear_module, "_onednn_linear", lambda *a: calls.append(1) or real(*a))
    lin, x = layer(), torch.randn(5, 24)
    with linear_module.default_products():
        lin(x)
    assert calls == []
    lin(x)
    assert calls == [1]


def test_a_build_whose_op_fails_or_disagrees_falls_back_to_f_linear(monkeypatch):
    def broken(*args):
        raise RuntimeError("mkldnn::_linear_pointwise() expected 7 arguments")

    monkeypatch.setattr(linear_module, "_onednn_linear", broken)
    assert not linear_module.onednn_products()
    monkeypatch.setattr(linear_module, "_onednn_linear", lambda x, w, b: F.linear(x, w, b) + 1)
    assert not linear_module.onednn_products()
