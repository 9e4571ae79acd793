"""Context managers: torch.no_grad / enable_grad / set_grad_enabled / record_function, with gradients compared.

Op counts are relaxed where grad mode changes inside the frame: real Dynamo records the switches
(``torch._C._set_grad_enabled``) as call_function nodes; a translator that runs those graph regions under the
right grad mode without such nodes is equally correct.  Likewise for ``record_function``: torch 2.13's Dynamo
ignores it (with a warning) and adds no node, while keeping the profiler's enter/exit ops (as the seed MoE's
profiling wants) adds two.  Graph counts stay exact.
"""
import torch

from . import program, t

_RELAX = "grad-mode switches are call_function ops in real Dynamo's graph"
_RELAX_PROFILER = "real Dynamo drops record_function; keeping the profiler enter/exit nodes is also correct"


@program(lambda: (t(3, requires_grad=True),), grad=True, exact_ops=False, relax=_RELAX)
def no_grad_block(x):
    with torch.no_grad():
        y = x * 2
    return y + x, y.requires_grad


@program(lambda: (t(3, requires_grad=True),), grad=True, exact_ops=False, relax=_RELAX)
def enable_grad_inside_no_grad(x):
    with torch.no_grad():
        a = x * 2
        with torch.enable_grad():
            b = x * 3
    return a + b, a.requires_grad, b.requires_grad


@program(lambda: (t(3, requires_grad=True),), grad=True, exact_ops=False, relax=_RELAX)
def set_grad_enabled_false(x):
    with torch.set_grad_enabled(False):
        y = x.sin()
    return x.cos() + y


@program(lambda: (t(2, 3),), exact_ops=False, relax=_RELAX_PROFILER)
def record_function_block(x):
    with torch.autograd.profiler.record_function("my_region"):
        y = x.relu() * 2
    return y + 1


@program(lambda: (t(3),), exact_ops=False, relax=_RELAX)
def is_grad_enabled_read_inside_no_grad(x):
    with torch.no_grad():
        flag = torch.is_grad_enabled()
    return x + 1 if flag else x - 1, torch.is_grad_enabled()


@program(lambda: (t(3, requires_grad=True), t(3, requires_grad=True)), grad=True)
def gradients_through_plain_function(x, y):
    return (x * y).sin().sum() + (x ** 2).mean()


@program(lambda: (t(3, requires_grad=True),), grad=True)
def detach_and_requires_grad(x):
    d = x.detach()
    return x * d, d.requires_grad


@program(lambda: (t(2, 3),), exact_ops=False, relax=_RELAX)
def nested_record_function_and_no_grad(x):
    with torch.autograd.profiler.record_function("outer"):
        with torch.no_grad():
            y = x * 2
        with torch.autograd.profiler.record_function("inner"):
            y = y.exp()
    return y


@program(lambda: (t(3, requires_grad=True),), grad=True, exact_ops=False, relax=_RELAX)
def set_grad_enabled_as_function_call(x):
    prev = torch.is_grad_enabled()
    torch.set_grad_enabled(False)
    y = x * 2
    torch.set_grad_enabled(prev)
    return x * 3 + y, y.requires_grad


@program(lambda: (t(3, requires_grad=True),), grad=True, exact_ops=False, relax=_RELAX)
def no_grad_then_grad_in_one_frame(x):
    with torch.no_grad():
        scale = x.abs().max()
    return x * scale, (x * 2).requires_grad


@program(lambda: (t(2, 3),), exact_ops=False, relax="real Dynamo records autocast enter/exit as call_function nodes")
def autocast_disabled_on_cpu(x):
    with torch.autocast("cpu", enabled=False):
        y = x @ x.T
    return y
