"""nn.Modules: Linear, Sequential, ModuleList/ModuleDict, custom modules, buffers, parameters, training branches.

Each program here is a *factory* (``factory=True``): it builds a fresh module (after seeding) for every run, and the
module itself is compiled, as ``torch.compile(model)`` would be.  Real Dynamo inlines nn.Modules (call_function
nodes on parameters); a translator that emits ``call_module`` nodes has the same op count for leaf modules.
"""
import torch
import torch.nn.functional as F
from torch import nn

from . import program, t


def module_program(args, **options):
    return program(args, factory=True, **options)


@module_program(lambda: (t(5, 4),))
def linear():
    return nn.Linear(4, 3)


@module_program(lambda: (t(2, 4),))
def sequential_mlp():
    return nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2), nn.Tanh())


class Block(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.norm = nn.LayerNorm(d)
        self.fc = nn.Linear(d, d)

    def forward(self, x):
        return x + F.gelu(self.fc(self.norm(x)))


class Stack(nn.Module):
    def __init__(self, d=4, n=3):
        super().__init__()
        self.blocks = nn.ModuleList([Block(d) for _ in range(n)])
        self.head = nn.Linear(d, 1)

    def forward(self, x):
        for blk in self.blocks:
            x = blk(x)
        return self.head(x), len(self.blocks)


@module_program(lambda: (t(2, 4),))
def modulelist_iteration_with_submodules():
    return Stack()


class Indexing(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList([nn.Linear(3, 3) for _ in range(4)])

    def forward(self, x):
        x = self.layers[0](x)
        x = self.layers[-1](x)
        for layer in self.layers[1:3]:
            x = layer(x).relu()
        return x


@module_program(lambda: (t(2, 3),))
def modulelist_indexing_and_slicing():
    return Indexing()


class Heads(nn.Module):
    def __init__(self):
        super().__init__()
        self.heads = nn.ModuleDict({"a": nn.Linear(3, 2), "b": nn.Linear(3, 1)})

    def forward(self, x):
        out = {name: head(x) for name, head in self.heads.items()}
        out["a2"] = self.heads["a"](x * 2)
        return out, list(self.heads.keys()), "b" in self.heads


@module_program(lambda: (t(2, 3),))
def moduledict_items_and_indexing():
    return Heads()


class WithBuffer(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("mean", torch.arange(4.0))
        self.scale = nn.Parameter(torch.full((4,), 2.0))

    def forward(self, x):
        return (x - self.mean) * self.scale


@module_program(lambda: (t(3, 4),))
def buffers_and_parameters():
    return WithBuffer()


class TrainingBranch(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(3, 3)

    def forward(self, x):
        y = self.fc(x)
        if self.training:
            y = y * 0.5
        else:
            y = y + 100
        return y


@module_program(lambda: (t(2, 3),))
def training_flag_branch():
    return TrainingBranch()


@module_program(lambda: (t(2, 3),))
def eval_mode_branch():
    return TrainingBranch().eval()


class Config(nn.Module):
    def __init__(self, hidden=6, act="gelu"):
        super().__init__()
        self.hidden = hidden
        self.act = act
        self.up = nn.Linear(3, hidden)

    def forward(self, x):
        h = self.up(x).view(-1, self.hidden // 2, 2)
        return F.gelu(h) if self.act == "gelu" else h.relu()


@module_program(lambda: (t(2, 3),))
def python_attributes_on_module():
    return Config()


class UsesWeightDirectly(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 2)

    def forward(self, x):
        return F.linear(x, self.lin.weight) + self.lin.bias * 2, self.lin.weight.shape


@module_program(lambda: (t(3, 4),))
def parameters_used_directly():
    return UsesWeightDirectly()


class Embed(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(10, 4)
        self.ln = nn.LayerNorm(4)
        self.drop = nn.Dropout(0.1)

    def forward(self, ids):
        return self.ln(self.drop(self.emb(ids)))


@module_program(lambda: (torch.randint(0, 10, (2, 5)),))
def embedding_layernorm_dropout_eval():
    return Embed().eval()


class HelperMethods(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(2, 2)

    def _project(self, x, times):
        for _ in range(times):
            x = self.a(x)
        return x

    def forward(self, x):
        return self._project(x, 2) + self._project(x, 1)


@module_program(lambda: (t(3, 2),))
def module_helper_methods():
    return HelperMethods()


class Conv(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv1d(2, 4, 3, padding=1)
        self.bn = nn.BatchNorm1d(4)

    def forward(self, x):
        return F.relu(self.bn(self.conv(x)))


@module_program(lambda: (t(2, 2, 8),))
def conv1d_batchnorm_eval():
    return Conv().eval()


class NestedSequential(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Sequential(nn.Linear(3, 3), nn.SiLU()), nn.Identity(), nn.Linear(3, 3))

    def forward(self, x):
        return self.body(x) + self.body[0](x), len(self.body)


@module_program(lambda: (t(2, 3),))
def nested_sequential_and_indexing():
    return NestedSequential()


class ParamList(nn.Module):
    def __init__(self):
        super().__init__()
        self.ws = nn.ParameterList([nn.Parameter(torch.randn(3)) for _ in range(3)])

    def forward(self, x):
        for w in self.ws:
            x = x * w
        return x


@module_program(lambda: (t(2, 3),))
def parameterlist_iteration():
    return ParamList()


class Counter(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("calls", torch.zeros(()))
        self.fc = nn.Linear(2, 2)

    def forward(self, x):
        self.calls.add_(1)  # an in-place update of a buffer: a side effect the caller sees
        return self.fc(x) * self.calls


@module_program(lambda: (t(2, 2),))
def buffer_mutated_in_forward():
    return Counter()


class KwargsForward(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(3, 3)

    def forward(self, x, *, residual=None, scale=1.0):
        y = self.fc(x) * scale
        return y if residual is None else y + residual


@module_program(lambda: (t(2, 3),), kwargs=lambda: {"residual": t(2, 3), "scale": 0.5})
def forward_with_keyword_arguments():
    return KwargsForward()


@module_program(lambda: (t(4, 3, requires_grad=True),), grad=True)
def training_mlp_gradients():
    return nn.Sequential(nn.Linear(3, 5), nn.GELU(), nn.Linear(5, 1))


class ChildrenLoop(nn.Module):
    def __init__(self):
        super().__init__()
        self.l1 = nn.Linear(2, 2)
        self.l2 = nn.Linear(2, 2)

    def forward(self, x):
        for name, child in self.named_children():
            x = child(x) + (1 if name == "l1" else 2)
        return x


@module_program(lambda: (t(3, 2),))
def named_children_iteration():
    return ChildrenLoop()


class GetattrLayers(nn.Module):
    def __init__(self):
        super().__init__()
        for i in range(3):
            setattr(self, f"layer{i}", nn.Linear(2, 2))

    def forward(self, x):
        for i in range(3):
            x = getattr(self, f"layer{i}")(x)
        return x


@module_program(lambda: (t(3, 2),))
def getattr_layers_by_fstring():
    return GetattrLayers()


class MultiHead(nn.Module):
    def __init__(self, d=8, h=2):
        super().__init__()
        self.h = h
        self.qkv = nn.Linear(d, 3 * d)
        self.out = nn.Linear(d, d)

    def forward(self, x):
        b, s, d = x.shape
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        q, k, v = (z.view(b, s, self.h, d // self.h).transpose(1, 2) for z in (q, k, v))
        att = (q @ k.transpose(-2, -1)) * (d // self.h) ** -0.5
        y = att.softmax(-1) @ v
        return self.out(y.transpose(1, 2).reshape(b, s, d))


@module_program(lambda: (t(2, 5, 8),))
def attention_block():
    return MultiHead()


class Sub(nn.Linear):
    def forward(self, x):
        return super().forward(x).relu() + 1


@module_program(lambda: (t(2, 3),))
def subclass_of_linear_calls_super():
    return Sub(3, 2)


class WeightDecay(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(2, 2)
        self.b = nn.Linear(2, 1)

    def forward(self, x):
        reg = sum((p ** 2).sum() for p in self.parameters())
        n_linear = sum(1 for m in self.modules() if isinstance(m, nn.Linear))
        return self.b(self.a(x)).sum() + 0.01 * reg, n_linear


@module_program(lambda: (t(3, 2),))
def parameters_and_modules_iteration():
    return WeightDecay()


class Hooked(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(3, 3)
        self.fc.register_forward_hook(lambda mod, inp, out: out * 2)
        self.fc.register_forward_pre_hook(lambda mod, inp: (inp[0] + 1,))

    def forward(self, x):
        return self.fc(x)


@module_program(lambda: (t(2, 3),))
def forward_hooks_on_submodule():
    return Hooked()


class SDPA(nn.Module):
    def forward(self, q, k, v):
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)


@module_program(lambda: (t(1, 2, 4, 8), t(1, 2, 4, 8), t(1, 2, 4, 8)))
def scaled_dot_product_attention():
    return SDPA()


class WithPropertySubmodule(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList([nn.Linear(2, 2), nn.Linear(2, 2)])

    @property
    def last(self):
        return self.layers[-1]

    def forward(self, x):
        return self.last(self.layers[0](x))


@module_program(lambda: (t(3, 2),))
def property_returning_submodule():
    return WithPropertySubmodule()


class SharedWeights(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(6, 4)
        self.head = nn.Linear(4, 6, bias=False)
        self.head.weight = self.emb.weight

    def forward(self, ids):
        return self.head(self.emb(ids))


@module_program(lambda: (torch.tensor([[1, 2, 5]]),))
def tied_weights():
    return SharedWeights()


class Residual(nn.Module):
    def __init__(self, inner):
        super().__init__()
        self.inner = inner

    def forward(self, x):
        return x + self.inner(x)


@module_program(lambda: (t(2, 4),))
def wrapper_modules_nested():
    return nn.Sequential(Residual(nn.Sequential(nn.Linear(4, 4), nn.ReLU())), Residual(nn.Identity()), nn.Softmax(-1))


@module_program(lambda: (t(2, 4),))
def module_switched_to_eval_before_compile():
    m = nn.Sequential(nn.Linear(4, 4), nn.Dropout(0.5), nn.BatchNorm1d(4))
    return m.eval()


class CallCounter(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(2, 2)
        self.calls = 0
        self.last = None

    def forward(self, x):
        self.calls += 1  # a Python int attribute changes every call: real Dynamo recompiles on it
        y = self.fc(x)
        self.last = y.detach()
        return y * self.calls


@module_program(lambda: (t(3, 2),))
def python_attribute_mutated_in_forward():
    return CallCounter()


class RunningMean(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("mean", torch.zeros(3))
        self.momentum = 0.1

    def forward(self, x):
        if self.training:
            self.mean.mul_(1 - self.momentum).add_(x.mean(0) * self.momentum)
        return x - self.mean


@module_program(lambda: (t(4, 3),))
def running_statistics_buffer_update():
    return RunningMean()


@module_program(lambda: (t(4, 3),))
def batchnorm_training_updates_running_stats():
    return nn.Sequential(nn.Linear(3, 3), nn.BatchNorm1d(3))


def _moe_friendly(training):
    from minidynamo.examples.moe import MoEFriendly  # the project's workload, compile-friendly variant
    m = MoEFriendly(input_dim=8, num_experts=4, top_k=2, expert_capacity=3, hidden_dim=16, output_dim=8)
    return m.train(training)


@module_program(lambda: (t(6, 8, requires_grad=True),), grad=True)
def moe_friendly_training_step():
    return _moe_friendly(True)


@module_program(lambda: (t(6, 8),))
def moe_friendly_inference():
    return _moe_friendly(False)


class SlicedContainers(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList([nn.Linear(3, 3) for _ in range(4)])
        self.seq = nn.Sequential(nn.Linear(3, 3), nn.ReLU(), nn.Linear(3, 2))

    def forward(self, x):
        for layer in self.layers[1:]:
            x = layer(x)
        for layer in self.layers[::2]:
            x = x + layer(x)
        head = self.seq[:-1]  # a Sequential again: it can be called
        return self.seq[-1](head(x)), len(self.layers[:-1]), type(head).__name__


@module_program(lambda: (t(2, 3),))
def sliced_modulelist_and_sequential():
    return SlicedContainers()


class HeadsByName(nn.Module):
    def __init__(self):
        super().__init__()
        self.heads = nn.ModuleDict({"a": nn.Linear(2, 2), "b": nn.Linear(2, 2)})

    def forward(self, x):
        names = self.heads.keys()  # a view: it has a len and iterates again
        outs = [self.heads[k](x) for k in names]
        return sum(outs) * len(names), list(names), "a" in names, [type(m).__name__ for m in self.heads.values()]


@module_program(lambda: (t(3, 2),))
def moduledict_keys_view():
    return HeadsByName()


class _ParameterViewsUnderNoGrad(nn.Module):
    """Views of parameters taken under ``no_grad`` are leaves that require grad (their base does): no new leaf,
    no graph break (the friendly MoE's ``self.b1[:, None, :]`` in eval)."""

    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.randn(3, 4, 5))
        self.b = nn.Parameter(torch.randn(3, 5))

    def forward(self, x):
        with torch.no_grad():
            return torch.einsum("ed,edo->eo", x, self.w) + self.b[:, None, :].squeeze(1) + self.w[0].T[:, :1].sum()


@module_program(lambda: (t(3, 4),))
def parameter_views_under_no_grad():
    return _ParameterViewsUnderNoGrad()
