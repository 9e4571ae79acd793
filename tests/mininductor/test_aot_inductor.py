"""Training through the whole of mininductor: AOTAutograd's forward *and* backward graphs compiled by
``compile_fx_inner`` into Triton kernels (run by Triton's interpreter on CPU). Values and gradients vs eager;
each graph must generate kernels. Budget: ~10 s on a cold kernel cache.
"""
import pytest
import torch
import torch.nn.functional as F

import mininductor
from mininductor import compile_fx_inner, metrics
from mininductor.aot_autograd import aot_module


def mlp(x, w1, b1, w2):
    return (F.gelu(x @ w1 + b1) @ w2).tanh()


def layer_norm(x, w, g):
    return F.layer_norm(x @ w, (8,), g).relu()


def attention(q, k, v):
    return ((q @ k.transpose(-1, -2)) / 2).softmax(-1) @ v


def mse(x, w, y):
    return F.mse_loss((x @ w).sigmoid(), y)


def mutates_buffer(x, w, buf):
    buf.add_(1)
    return (x @ w) * buf


def rg(*shape):
    return torch.randn(*shape).requires_grad_()


CASES = {
    "mlp": (mlp, lambda: [rg(4, 8), rg(8, 16), rg(16), rg(16, 8)]),
    "layer_norm": (layer_norm, lambda: [rg(4, 8), rg(8, 8), rg(8)]),
    "attention": (attention, lambda: [rg(2, 4, 8), rg(2, 4, 8), rg(2, 4, 8)]),
    "mse": (mse, lambda: [rg(4, 8), rg(8, 3), torch.rand(4, 3)]),
    "mutates_buffer": (mutates_buffer, lambda: [rg(4, 8), rg(8, 8), torch.zeros(8)]),
}


def _copy(a):
    return a.detach().clone().requires_grad_(a.requires_grad)


@pytest.mark.parametrize("name", list(CASES))
def test_forward_and_backward_compiled_by_mininductor(name):
    torch.manual_seed(0)
    fn, make_args = CASES[name]
    args = make_args()
    ref_args = [_copy(a) for a in args]
    metrics.reset()
    compiled = aot_module(torch.fx.symbolic_trace(fn), args, compile_fx_inner, compile_fx_inner)
    fw_kernels = metrics.generated_kernel_count
    out, ref = compiled(*args), fn(*ref_args)
    torch.testing.assert_close(out, ref, rtol=1e-4, atol=1e-5)
    metrics.reset()
    out.sum().backward()
    ref.sum().backward()
    bw_kernels = metrics.generated_kernel_count
    for a, r in zip(args, ref_args):
        torch.testing.assert_close(a.detach(), r.detach())  # mutated inputs too
        if r.grad is not None:
            torch.testing.assert_close(a.grad, r.grad, rtol=1e-4, atol=1e-5)
    assert fw_kernels >= 1 and bw_kernels >= 1
    assert metrics.fallback_count == 0, metrics.fallback_ops
    graphs = compiled.aot_graphs
    assert "@triton.jit" in str(graphs)  # explain shows the generated forward and backward kernels


def test_compile_fx_backend_trains_across_a_graph_break():
    def f(x, w):
        h = F.gelu(x @ w)
        torch._dynamo.graph_break()
        return F.layer_norm(h, (8,)).sum()

    torch._dynamo.reset()
    x, w = rg(4, 8), rg(8, 8)
    x2, w2 = _copy(x), _copy(w)
    out = torch.compile(f, backend=mininductor.compile_fx, dynamic=False)(x, w)
    out.backward()
    ref = f(x2, w2)
    ref.backward()
    torch.testing.assert_close(out, ref)
    torch.testing.assert_close(x.grad, x2.grad, rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(w.grad, w2.grad, rtol=1e-4, atol=1e-5)


def test_debug_dir_has_forward_and_backward_graphs_and_kernels(tmp_path, monkeypatch):
    monkeypatch.setattr(mininductor.config, "debug_dir", str(tmp_path))
    args = [rg(4, 8), rg(8, 3), torch.rand(4, 3)]
    compiled = aot_module(torch.fx.symbolic_trace(mse), args, compile_fx_inner, compile_fx_inner)
    assert not (tmp_path / "bw_output_code.py").exists()  # the backward compiles at the first backward
    compiled(*args).backward()
    for name in ("fw_graph_readable.py", "bw_graph_readable.py", "fw_output_code.py", "bw_output_code.py"):
        assert (tmp_path / name).stat().st_size > 0, name
    assert "@triton.jit" in (tmp_path / "bw_output_code.py").read_text()
