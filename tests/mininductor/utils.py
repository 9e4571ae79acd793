"""Shared helpers: compile a function with mininductor (CPU tensors run through Triton's interpreter) and
compare with eager PyTorch, the oracle."""
from __future__ import annotations

import contextlib
import os

import pytest
import torch
import torch.utils._pytree as pytree

import minidynamo
from mininductor import compile_fx_inner, config, metrics
from mininductor.compile_fx import trace_inference

# MININDUCTOR_TEST_DEVICE=cuda runs the same checks through compiled Triton on a GPU (the device run does this).
DEVICE = os.environ.get("MININDUCTOR_TEST_DEVICE", "cpu")
# MININDUCTOR_TEST_MODE=reduce-overhead (with a GPU) compiles every check() in that mode and calls it twice: the
# second call replays the recorded CUDA graph, on fresh copies of the inputs.
MODE = os.environ.get("MININDUCTOR_TEST_MODE")
cpu_only = pytest.mark.skipif(DEVICE != "cpu", reason="eager's CPU kernel (or the interpreter's index check)")


def compile_fn(fn, *args):
    """make_fx + our decompositions, then compile_fx_inner (bypassing AOTAutograd: inference graphs)."""
    aten_gm, _ = trace_inference(fn, list(args))
    return compile_fx_inner(aten_gm, list(args))


def check(fn, *args, atol=1e-5, rtol=1e-5, kernels=None, fallbacks=0, externs=None):
    """Compile ``fn``, run it on clones of ``args``, and compare values, dtypes, shapes and input mutations
    with eager; optionally assert the kernel/fallback/extern counts. Returns the compiled callable."""
    metrics.reset()
    args = [_clone(a, DEVICE) for a in args]
    with config.patch(mode=MODE) if MODE else contextlib.nullcontext():
        compiled = compile_fn(fn, *[_clone(a) for a in args])
        for _ in range(2 if MODE else 1):
            eager_args, our_args = [_clone(a) for a in args], [_clone(a) for a in args]
            expected, actual = fn(*eager_args), compiled(*our_args)
            assert_same(actual, expected, atol, rtol)
            for mine, theirs in zip(our_args, eager_args):
                assert_same(mine, theirs, atol, rtol)
    if DEVICE == "cuda" and config.static_cuda_launcher:  # every kernel launched by static_cuda_launcher.py
        assert metrics.triton_launcher_kernels == 0, compiled.source
    if kernels is not None:
        assert metrics.generated_kernel_count == kernels, compiled.source
    if fallbacks is not None:
        assert metrics.fallback_count == fallbacks, metrics.fallback_ops
    if externs is not None:
        assert metrics.extern_call_count == externs
    return compiled


def assert_same(actual, expected, atol=1e-5, rtol=1e-5):
    # torch.max(x, dim) returns a named tuple; a traced graph returns a plain one
    expected = pytree.tree_map(lambda x: x, _plain(expected))
    flat_a, spec_a = pytree.tree_flatten(actual)
    flat_e, spec_e = pytree.tree_flatten(expected)
    assert spec_a == spec_e, (spec_a, spec_e)
    for a, e in zip(flat_a, flat_e):
        if isinstance(e, torch.Tensor):
            assert a.shape == e.shape and a.dtype == e.dtype, (a.shape, e.shape, a.dtype, e.dtype)
            torch.testing.assert_close(a, e, atol=atol, rtol=rtol, equal_nan=True)
        else:
            assert a == e


def _clone(a, device=None):
    """A copy (on ``device``, by default ``a``'s) with the same strides and storage offset: a plain clone or
    ``.to(device)`` would make it contiguous, and a test of an offset view would then test a fresh tensor."""
    if not isinstance(a, torch.Tensor):
        return a
    device = a.device if device is None else device
    if 0 in a.stride():  # an expanded tensor: clone the data once, expand again
        index = tuple(slice(0, 1) if st == 0 else slice(None) for st in a.stride())
        return a[index].to(device, copy=True).expand(a.shape)
    extent = a.storage_offset() + sum((s - 1) * st for s, st in zip(a.shape, a.stride())) + 1
    base = torch.zeros(max(extent, 1), dtype=a.dtype, device=device)
    out = base.as_strided(a.shape, a.stride(), a.storage_offset())
    out.copy_(a)
    return out


def _plain(value):
    if isinstance(value, tuple) and type(value) is not tuple:
        return tuple(_plain(v) for v in value)
    if isinstance(value, (list, tuple)):
        return type(value)(_plain(v) for v in value)
    return value


def kernel_code(compiled) -> str:
    """The generated kernels and wrapper, without the shared header (its helper functions, e.g. ``_welford``)."""
    from mininductor.codegen.wrapper import IMPORTS, header_for
    assert compiled.source.startswith(IMPORTS)
    header = header_for([compiled.source[len(IMPORTS):]])
    assert compiled.source.startswith(header)
    return compiled.source[len(header):]


def run_shapes(fn, make_args, shapes, dynamic=None):
    """``minicompile(fn)`` called at each shape in turn, compared with eager (outputs and mutated inputs)."""
    compiled = minidynamo.minicompile(fn, dynamic=dynamic)
    for shape in shapes:
        args = make_args(*shape)
        ours, theirs = [a.clone() for a in args], [a.clone() for a in args]
        assert_same(compiled(*ours), fn(*theirs), atol=1e-5, rtol=1e-5)
        assert_same(ours, theirs)
    return compiled


def raises_like_eager(fn, *args, fallbacks=None):
    """Eager raises; the compiled ``fn`` raises an exception of the same type (or a subclass) when it runs, or
    when it compiles (a fake kernel that checks what eager checks: then ``fallbacks`` is None)."""
    args = [_clone(a, DEVICE) for a in args]
    with pytest.raises(Exception) as eager:
        fn(*[a.clone() if isinstance(a, torch.Tensor) else a for a in args])
    metrics.reset()
    with pytest.raises(type(eager.value)):
        compile_fn(fn, *args)(*args)
    if fallbacks is not None:
        assert metrics.fallback_count == fallbacks, metrics.fallback_ops


def leaves(*tensors):
    """Two independent copies (ours, eager's) of leaf tensors that require grad."""
    ours = [t.detach().clone().requires_grad_() for t in tensors]
    theirs = [t.detach().clone().requires_grad_() for t in tensors]
    return ours, theirs


def pool_gradient_matches_eager(fn, shape=(2, 3, 7, 9)):
    """``minicompile(fn)`` against ``fn`` on an input of ``shape`` with a tie (``x[0, 0, 2, 2:4]``): the output and
    the input's gradient under one random output gradient, and no fallback, forward or backward."""
    x0 = torch.randn(*shape, device=DEVICE)
    x0[0, 0, 2, 2:4] = 5.0
    (x,), (x_ref,) = leaves(x0)
    out, out_ref = minidynamo.minicompile(fn)(x), fn(x_ref)
    grad = torch.randn_like(out_ref)
    out.backward(grad)
    out_ref.backward(grad)
    torch.testing.assert_close((out, x.grad), (out_ref, x_ref.grad), atol=1e-5, rtol=1e-4)
    assert metrics.fallback_count == 0, metrics.fallback_ops


def backward_with_weights(ours, theirs) -> None:
    """Backward through our outputs and eager's of ``sum(out * w)``, one random weight per element, shared."""
    ours, theirs = (ours, theirs) if isinstance(theirs, (tuple, list)) else ((ours,), (theirs,))
    weights = [torch.randn_like(t) for t in theirs]
    sum((o * w).sum() for o, w in zip(ours, weights)).backward()
    sum((t * w).sum() for t, w in zip(theirs, weights)).backward()


def frames_ok() -> int:
    """How many frames minidynamo compiled since the last ``minidynamo.reset()``."""
    return minidynamo.counters["frames"]["ok"]


def assert_no_per_shape_compile() -> None:
    """Since the last ``metrics.reset()``: no graph compiled per shape or specialised a size, and no ATen fallback."""
    assert metrics.specialisations == 0 and not metrics.symbolic_fallbacks, metrics.symbolic_fallbacks
    assert metrics.fallback_count == 0, metrics.fallback_ops


def trains_once_with_an_int(fn, cases, loss=lambda out: out) -> None:
    """``fn(x, w, n)`` compiled with ``dynamic=True`` and trained at each ``(rows, n)`` of ``cases``: values and
    gradients against eager, then one frame and one symbolic compile for every value of ``n``, no fallback."""
    compiled = minidynamo.minicompile(fn, dynamic=True)
    for rows, n in cases:
        (x, w), (x_ref, w_ref) = leaves(torch.randn(rows, 3, device=DEVICE), torch.randn(3, device=DEVICE))
        out, ref = compiled(x, w, n), fn(x_ref, w_ref, n)
        loss(out).backward()
        loss(ref).backward()
        assert_same((out, x.grad, w.grad), (ref, x_ref.grad, w_ref.grad))
    assert frames_ok() == 1 and metrics.symbolic_compiles == 1
    assert_no_per_shape_compile()
