"""What a compiled graph does once a backend (``aot_eager``, ``inductor``) runs it: outputs that are constants,
views or aliases of inputs are the objects eager gives, inputs that share memory with a mutated input see the
mutation, and a backward eager itself refuses raises where eager raises.

Found by differential fuzzing (rounds 4 and 5).  Every test compares with eager (values, storage, gradients) and
counts graphs and eager fallbacks.  Budget: ~5 s (inductor compiles).
"""
import warnings

import pytest
import torch

import minidynamo

X = torch.arange(3.0)


# --- through mininductor: what a graph hands back, and inputs that share memory (fuzz round 4) ----------------------

def test_a_constant_tensor_output_is_fresh_on_every_call():
    def fn(x):
        return torch.tensor(2.5), x + 1
    compiled = minidynamo.minicompile(fn, backend="inductor")
    first = compiled(X)[0]
    first.add_(1)  # the caller's in-place op on one call's result must not reach the next call's
    assert compiled(X)[0].item() == 2.5


def test_an_output_that_is_a_view_or_alias_of_an_input_is_another_tensor_object():
    def fn(x):
        return x, x.view(-1), x.detach(), x[:2]
    out = minidynamo.minicompile(fn, backend="inductor")(X)
    assert out[0] is X and all(o is not X for o in out[1:])
    assert all(o.untyped_storage().data_ptr() == X.untyped_storage().data_ptr() for o in out)


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_inputs_sharing_memory_with_a_mutated_input(backend):
    def fn(a, b):
        a.add_(1)
        return b * 2
    compiled = minidynamo.minicompile(fn, backend=backend)
    for make in (lambda a: (a, a), lambda a: (a, a[:]), lambda a: (a[:3], a[1:])):
        base, eager_base = torch.zeros(4), torch.zeros(4)
        assert torch.equal(compiled(*make(base)), fn(*make(eager_base)))
        assert torch.equal(base, eager_base)


# --- a graph whose backward eager itself refuses (fuzz round 5) -----------------------------------------------------

def _slice_times_input(x, y):
    y[1:3] = y[1:3] * x[0]  # saves the slice for x's gradient, then overwrites it
    return y.sum(), (x * 2).sum()


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_a_backward_that_eager_refuses_compiles_and_raises_at_backward(backend):
    """``y[1:3] = y[1:3] * x[0]`` with ``x`` requiring grad: eager runs the forward and raises only at
    ``.backward()``.  AOTAutograd traced the backward ahead of time, its ``autograd.grad`` raised, and the frame
    fell back to eager as an "internal error in minidynamo".  Now the graph runs through eager autograd, which
    raises (or not) exactly where eager does."""
    def run(f):
        x, y = torch.arange(1.0, 4.0, requires_grad=True), torch.arange(4.0)
        out, other = f(x, y)
        other.backward()  # a gradient that does not need the overwritten slice: fine in eager too
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            out.backward()
        return out.detach(), y, x.grad

    expected = run(_slice_times_input)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got = run(minidynamo.minicompile(_slice_times_input, backend=backend))
    assert all(torch.equal(a, b) for a, b in zip(got, expected))
    assert not minidynamo.counters["eager_fallback"], minidynamo.counters["eager_fallback"]
    assert minidynamo.counters["stats"]["unique_graphs"] == 1


def test_a_slice_overwritten_by_its_product_with_a_grad_free_factor_trains():
    def fn(x, y):
        z = y * 1
        z[1:3] = z[1:3] * x[0]
        return z.sum()

    def run(f):
        x, y = torch.arange(1.0, 4.0), torch.arange(4.0, requires_grad=True)
        out = f(x, y)
        out.backward()
        return out.detach(), y.grad

    expected = run(fn)
    got = run(minidynamo.minicompile(fn, backend="aot_eager"))
    assert all(torch.equal(a, b) for a, b in zip(got, expected))
    assert not minidynamo.counters["eager_fallback"]
