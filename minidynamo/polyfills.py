"""Python replacements that the translator inlines instead of a library function it cannot trace well.

A polyfill is ordinary Python, traced like user code (its attribute reads install the usual guards); it must
compute exactly what the function it replaces computes.  (Upstream: ``torch/_dynamo/polyfills``.)
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch.nn.modules.batchnorm import _BatchNorm


def uses_cumulative_average(module: torch.nn.Module) -> bool:
    """Would ``module(x)`` run ``_BatchNorm.forward``'s ``1.0 / float(self.num_batches_tracked)``?"""
    return (isinstance(module, _BatchNorm) and type(module).forward is _BatchNorm.forward
            and module.momentum is None and module.training and module.track_running_stats
            and module.num_batches_tracked is not None)


# [Note: BatchNorm's cumulative moving average]
# ``BatchNorm(momentum=None)`` in training averages its running stats over all batches so far: it counts batches in
# the buffer ``num_batches_tracked`` and uses ``1.0 / float(num_batches_tracked)`` as the momentum.  ``float(t)``
# reads a tensor's value, so tracing it breaks the graph, and the resume function then guards on that float --
# one recompile per training step.  This replacement keeps the factor a tensor (the counter is a mutated buffer,
# an input of the graph like the running stats): ``F.batch_norm`` with momentum 1.0 on zeroed stats returns the
# batch's own mean and unbiased variance through the same kernel, and the update
# ``running = batch * factor + running * (1 - factor)`` takes both factors computed in float64, then rounded to
# the stats' dtype, as eager's Python float momentum is.  (Eager's kernel may still round differently by an ulp.)
def batch_norm_cumulative_average(self, input):
    if not uses_cumulative_average_traced(self):
        return _BatchNorm.forward(self, input)
    self._check_input_dim(input)
    batch_mean = torch.zeros_like(self.running_mean)
    batch_var = torch.ones_like(self.running_var)
    out = F.batch_norm(input, batch_mean, batch_var, self.weight, self.bias, True, 1.0, self.eps)
    with torch.no_grad():
        self.num_batches_tracked.add_(1)
        factor = 1.0 / self.num_batches_tracked.double()
        for running, batch in ((self.running_mean, batch_mean), (self.running_var, batch_var)):
            running.copy_(batch * factor.to(batch.dtype) + running * (1.0 - factor).to(batch.dtype))
    return out


def uses_cumulative_average_traced(self) -> bool:
    """``uses_cumulative_average`` as the translator reads it: each attribute read installs its guard."""
    return (self.momentum is None and self.training and self.track_running_stats
            and self.num_batches_tracked is not None)


# [Note: grouping tensors by device and dtype]  ``torch._C._group_tensors_by_device_and_dtype`` (under
# ``clip_grad_norm_``, the foreach optimizers, ``zero_grad``) returns a dict keyed by ``(device, dtype)``: values
# no graph node can stand for.  It only sorts tensors, so it is replaced by this Python version, traced like user
# code (the tensors' devices and dtypes are constants while tracing).  Lists given empty stay empty, as in C++.
# The C++ dict comes in hash-map order; this one in order of first appearance (the same with one group).
def group_tensors_by_device_and_dtype(tensorlistlist, with_indices=False):
    groups = {}
    for i, tensor in enumerate(tensorlistlist[0]):
        key = (tensor.device, tensor.dtype)
        if key not in groups:
            groups[key] = ([[] for _ in tensorlistlist], [])
        lists, indices = groups[key]
        for out, tensors in zip(lists, tensorlistlist):
            if len(tensors) > 0:
                out.append(tensors[i])
        if with_indices:
            indices.append(i)
    return groups
