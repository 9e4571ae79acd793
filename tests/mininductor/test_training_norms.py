"""Normalisation layers in training: ``BatchNorm(momentum=None)``'s cumulative moving average, and BatchNorm as kernels.

``1.0 / float(self.num_batches_tracked)`` is polyfilled by minidynamo so the batch counter is a
mutated buffer of one graph, not a float guarded on at every step.  Each test compares values, gradients, running
buffers and SGD steps with eager PyTorch and pins the frames compiled.  Regression tests from the training fuzz
round 9.
"""
import copy

import pytest
import torch

import minidynamo
from mininductor import metrics

from .utils import assert_same, frames_ok, leaves

pytestmark = pytest.mark.usefixtures("fresh_minicompile")  # conftest.py


def _train_steps_match_eager(bn, shape, steps: int) -> None:
    """``steps`` training calls of ``minicompile(bn)`` against a copy of ``bn`` in eager: outputs, input and
    parameter gradients, and the running buffers after each step."""
    bn_ref = copy.deepcopy(bn)
    compiled = minidynamo.minicompile(bn)
    for _ in range(steps):
        (x,), (x_ref,) = leaves(torch.randn(shape))
        y, y_ref = compiled(x), bn_ref(x_ref)
        assert_same(y, y_ref, atol=1e-5, rtol=1e-5)
        y.pow(2).sum().backward()
        y_ref.pow(2).sum().backward()
        assert_same(x.grad, x_ref.grad, atol=1e-4, rtol=1e-4)
        assert_same(list(bn.buffers()), list(bn_ref.buffers()), atol=1e-6, rtol=1e-6)
        assert_same([p.grad for p in bn.parameters()], [p.grad for p in bn_ref.parameters()], atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("make, shape", [(lambda: torch.nn.BatchNorm1d(4, momentum=None), (8, 4)),
                                         (lambda: torch.nn.BatchNorm2d(3, momentum=None), (4, 3, 2, 2))],
                         ids=["1d", "2d"])
def test_batch_norm_cumulative_average_compiles_once(make, shape):
    """``1.0 / float(self.num_batches_tracked)`` broke the graph, and the resume function guarded on the float:
    one recompile per training step.  The counter is now a mutated buffer of a single graph.  (Training round 9.)"""
    torch.manual_seed(0)
    bn = make()
    _train_steps_match_eager(bn, shape, steps=4)
    assert bn.num_batches_tracked.item() == 4
    assert frames_ok() == 1 and not minidynamo.counters["graph_break"]


def test_batch_norm_cumulative_average_inside_a_model_trains_with_sgd_and_switches_to_eval():
    """Inside a model (the module call is inlined): SGD steps agree; eval mode is one more compile, and going
    back to training reuses the first.  (Training round 9.)"""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.BatchNorm1d(8, momentum=None), torch.nn.ReLU(),
                                torch.nn.Linear(8, 2))
    model_ref = copy.deepcopy(model)
    compiled = minidynamo.minicompile(model)
    opt, opt_ref = (torch.optim.SGD(m.parameters(), lr=0.1) for m in (model, model_ref))
    for training in (True, True, False, True):
        model.train(training)
        model_ref.train(training)
        x = torch.randn(5, 6)
        y, y_ref = compiled(x), model_ref(x)
        assert_same(y, y_ref, atol=1e-5, rtol=1e-5)
        if training:
            for o, out in ((opt, y), (opt_ref, y_ref)):
                o.zero_grad()
                out.pow(2).mean().backward()
                o.step()
        assert_same(list(model.parameters()), list(model_ref.parameters()), atol=1e-5, rtol=1e-5)
        assert_same(list(model.buffers()), list(model_ref.buffers()), atol=1e-6, rtol=1e-6)
    assert frames_ok() == 2


@pytest.mark.parametrize("make, shape", [(lambda: torch.nn.BatchNorm1d(4), (8, 4)),
                                         (lambda: torch.nn.BatchNorm2d(3, affine=False), (4, 3, 5, 5))],
                         ids=["1d", "2d-no-affine"])
def test_batch_norm_training_is_compiled_not_a_fallback(make, shape):
    """In training, AOTAutograd's graph holds ``_native_batch_norm_legit_functional`` (the statistics and the new
    running buffers), which we did not decompose: an ATen fallback in every training graph with a BatchNorm
    (found compiling a small conv net). It is now decomposed as upstream does: kernels only."""
    torch.manual_seed(0)
    _train_steps_match_eager(make(), shape, steps=3)
    assert frames_ok() == 1 and not minidynamo.counters["graph_break"]
    assert metrics.fallback_count == 0, metrics.fallback_ops
    assert metrics.generated_kernel_count > 0
