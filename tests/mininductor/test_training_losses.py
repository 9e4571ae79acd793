"""Loss functions in training graphs (minidynamo -> AOTAutograd -> mininductor): values and gradients vs eager,
over batch sizes that include an empty batch, with the counts pinned.

Budget: ~10 s on 2 cores (Triton interpreter).
"""
import pytest
import torch
import torch.nn.functional as F

import minidynamo
from mininductor import metrics

from .utils import assert_same, leaves

pytestmark = pytest.mark.usefixtures("fresh_minicompile")  # conftest.py

LOSSES = {
    "mse": lambda x, t: F.mse_loss(x, t),
    "huber": lambda x, t: F.huber_loss(x.exp(), t, delta=0.7),
    "smooth_l1": lambda x, t: F.smooth_l1_loss(x * 2, t, beta=0.5),
}


@pytest.mark.parametrize("name", LOSSES)
def test_mean_loss_of_an_empty_batch_has_an_empty_gradient(name):
    """Upstream's decompositions of ``mse_loss_backward`` (``smooth_l1``, ``huber``) compute the mean's factor as
    the Python float ``2.0 / input.numel()``: tracing the backward of an empty batch raised ZeroDivisionError,
    where eager returns nan and an empty gradient.  (Training round 11: ``F.mse_loss(t, target)`` with a batch
    of 0 rows.)"""
    loss = LOSSES[name]
    compiled = minidynamo.minicompile(loss, backend="inductor")
    for b in (3, 0, 5):  # static at 3, then 0 (specialised: 0 and 1 always are), then symbolic
        target = torch.randn(b, 4)
        (x,), (x_ref,) = leaves(torch.randn(b, 4))
        out, ref = compiled(x, target), loss(x_ref, target)
        assert_same(out, ref)  # nan for the empty batch, like eager
        out.backward()
        ref.backward()
        assert_same(x.grad, x_ref.grad)
    assert minidynamo.counters["frames"]["ok"] == 3  # b=3, b=0, then one graph for every other size
    assert metrics.fallback_count == 0, metrics.fallback_ops
