"""Programs that real Dynamo cannot capture as one graph: print, .item()/.tolist(), data-dependent branches and
shapes, explicit graph breaks.  Not part of ``CATEGORIES``: ``test_corpus_breaks.py`` loads it by name.

Until minidynamo supports graph breaks it runs such frames eagerly and records why, so the tests accept a graph
break *or* an eager fallback -- but the results (and printed text, and mutated inputs) must always equal eager's.
``graph_break`` below is rebound by the harness to ``torch._dynamo.graph_break`` / ``minidynamo.graph_break``.
"""
import torch
from torch import nn

from . import program, t


def graph_break():  # rebound by the harness before each compiled run
    pass


@program(lambda: (t(3),))
def print_between_ops(x):
    y = x * 2
    print("halfway", y.shape)
    return y + 1


@program(lambda: (t(3),))
def print_inside_loop(x):
    for i in range(3):
        x = x + i
        print("step", i)
    return x


@program(lambda: (t(4),))
def item_in_if(x):
    if x.sum().item() > 0:
        return x * 2
    return x - 2


@program(lambda: (t(4),))
def data_dependent_branch(x):
    y = x.cos()
    if y.sum() > 2:
        y = y * 10
    return y.sin()


@program(lambda: (t(6),))
def nonzero_then_ops(x):
    idx = torch.nonzero(x > 0)
    return idx.float().sum() + x.sum(), idx.shape[0]


@program(lambda: (t(8),))
def boolean_mask_indexing(x):
    pos = x[x > 0]
    return pos * 2, x.relu()


@program(lambda: (t(3),))
def tolist_in_python(x):
    vals = x.tolist()
    return x + sum(vals), [round(v, 3) for v in vals]


@program(lambda: (t(3),))
def explicit_graph_break(x):
    y = x.sin()
    graph_break()
    return y.cos() + x


@program(lambda: (t(3, requires_grad=True),), grad=True)
def graph_break_inside_no_grad(x):
    with torch.no_grad():
        y = x * 2
        graph_break()
        z = y + 1
    return x * z, z.requires_grad


@program(lambda: (t(4),))
def item_returned_as_python_float(x):
    s = x.sum()
    return s.item() * 2, s


def _noisy_helper(x):
    print("helper sees", tuple(x.shape))
    return x.exp()


@program(lambda: (t(2, 2),))
def print_in_inlined_helper(x):
    return _noisy_helper(x + 1) * 3


@program(lambda: (t(3).abs() + 0.1,))
def data_dependent_while_loop(x):
    while x.sum() < 100:
        x = x * 2
    return x


@program(lambda: ([], t(3)))
def side_effects_across_a_break(log, x):
    log.append("start")
    y = x + 1
    print("mid")
    log.append(y.sum())
    return y * 2


@program(lambda: (t(3), {"k": 2}, [1, 2]))
def live_python_values_across_a_break(x, d, ns):
    total = len(ns) + d["k"]
    y = x * total
    graph_break()
    return y + total, {"total": total, "ns": ns}


class NoisyModule(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(3, 3)

    def forward(self, x):
        y = self.fc(x)
        print("forward", y.shape[0])
        return y.relu()


@program(lambda: (t(2, 3),), factory=True)
def print_in_module_forward():
    return NoisyModule()


@program(lambda: (t(10),))
def unique_values(x):
    u = torch.unique((x * 2).round())
    return u, u.numel()


@program(lambda: (t(5), torch.tensor(3)))
def index_with_item(x, i):
    return x[i.item()] * 2, x[: int(i)]


@program(lambda: (t(4),))
def range_from_tensor_value(x):
    n = int(x.abs().max().ceil())
    acc = x
    for _ in range(n):
        acc = acc + 1
    return acc


@program(lambda: (t(4),))
def bool_of_tensor(x):
    return x * 2 if bool((x > 0).any()) else x


@program(lambda: (t(6, 4), torch.tensor([0, 1, 0, 1, 1, 0])))
def moe_style_expert_loop(x, assign):
    out = torch.zeros_like(x)
    for e in range(2):
        mask = assign == e
        if mask.any():
            idx = mask.nonzero().squeeze(1)
            out.index_add_(0, idx, x[mask] * (e + 1))
    return out


@program(lambda: (t(3, 2), t(2, requires_grad=True)))
def backward_inside_the_compiled_function(x, w):
    loss = (x @ w).tanh().sum()
    loss.backward()
    return loss.detach(), w.grad.clone()


def _moe_seed(training):
    from minidynamo.examples.moe import MoE  # the project's seed workload, compiled unmodified
    return MoE(input_dim=8, num_experts=4, top_k=2, expert_capacity=3, hidden_dim=16, output_dim=8).train(training)


@program(lambda: (t(6, 8, requires_grad=True),), factory=True, grad=True)
def moe_seed_training_step():
    return _moe_seed(True)


@program(lambda: (t(6, 8),), factory=True)
def moe_seed_inference():
    return _moe_seed(False)


@program(lambda: (t(2),))
def list_appended_inside_a_loop_with_a_break(x):
    xs = [1, 2]
    for v in xs:  # resumed after the print with the real list's iterator: it sees the appends
        print(v)
        if len(xs) < 4:
            xs.append(v + 10)
        x = x + v
    return x, xs


@program(lambda: (t(2),))
def local_containers_aliased_across_a_break(x):
    a, d = [x], {"x": x}
    b, holder = a, [d]
    print("break")
    a.append(x * 2)
    d["y"] = x + 1
    return b, a is b, holder[0] is d, holder



@program(lambda: (t(2),))
def tensor_made_to_require_grad_inside(x):
    w = torch.ones(2).requires_grad_()  # a new leaf of the autograd graph: eager makes it (graph break)
    y = (x * w).sum()
    return y, y.requires_grad, w.is_leaf


@program(lambda: (t(2),))
def containers_built_across_a_break(x):
    # [x, *xs, f(x)]: BUILD_LIST/LIST_EXTEND, then LIST_APPEND after the call; the break hands the half-built list
    # to the resume function, whose append must reach the real list (it was dropped: found by fuzzing)
    def f(v):
        print("break")
        return v + 1

    more, extra = [x * 2], {"b": 1}
    lst = [x, *more, f(x)]
    d = {"a": x, **extra, "c": f(x)}
    s = {1, *[2], f(3)}
    return lst, d, s


@program(lambda: (t(2),))
def starred_unpack_right_after_a_break(x):
    # `*d, e = f(...)`: UNPACK_EX 256 needs an EXTENDED_ARG, so the resume point is the prefix's offset (an
    # internal error in the liveness analysis before: found by fuzzing)
    def f(v):
        print("break")
        return [v, v + 1, v + 2]

    *d, e = f(x)
    return d, e


@program(lambda: (t(3),))
def manual_seed_between_random_draws(x):
    # torch._dynamo wraps torch.manual_seed when it is imported: the wrapper was traced as a dead graph node and
    # the reseed dropped (found by fuzzing); it is a graph break, and runs where eager runs it
    a = torch.rand(3)
    torch.manual_seed(3)
    return x + a, torch.randint(0, 10, (3,))
