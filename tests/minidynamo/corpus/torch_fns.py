"""torch.* and torch.nn.functional.* calls: pointwise, reductions, shape ops, factories, multi-output ops."""
import torch
import torch.nn.functional as F

from . import program, t


@program(lambda: (t(3, 4),))
def pointwise_math(x):
    return torch.sin(x) + torch.cos(x) * torch.exp(-x.abs()) - torch.tanh(x) + torch.sigmoid(x)


@program(lambda: (t(3, 4).abs() + 0.1,))
def log_sqrt_rsqrt(x):
    return torch.log(x), torch.sqrt(x), torch.rsqrt(x), torch.log1p(x)


@program(lambda: (t(2, 3), t(2, 3)))
def cat_and_stack(a, b):
    return torch.cat([a, b], dim=0), torch.cat((a, b), 1), torch.stack([a, b]), torch.stack((a, b), dim=-1)


@program(lambda: (t(4, 5),))
def reductions_with_dims(x):
    return x.sum(), torch.sum(x, dim=1), torch.mean(x, 0, keepdim=True), torch.amax(x, dim=-1), x.prod(1)


@program(lambda: (t(4, 5),))
def max_with_dim_returns_namedtuple(x):
    values, indices = torch.max(x, dim=1)
    m = x.min(dim=0)
    return values, indices, m.values, m.indices


@program(lambda: (t(3, 4), t(3, 4)))
def where_and_clamp(x, y):
    return torch.where(x > 0, x, y), torch.clamp(x, min=-0.5, max=0.5), x.clamp(min=0), torch.maximum(x, y)


@program(lambda: (t(2, 8),))
def softmax_family(x):
    return torch.softmax(x, dim=-1), F.log_softmax(x, dim=1), F.softmax(x * 2, -1)


@program(lambda: (t(4, 6),))
def activations(x):
    return F.relu(x), F.gelu(x), F.silu(x), F.leaky_relu(x, 0.1), F.elu(x), torch.relu(x), F.hardtanh(x)


@program(lambda: (t(5, 3), t(4, 3), t(4)))
def functional_linear(x, w, b):
    return F.linear(x, w, b), F.linear(x, w)


@program(lambda: (t(2, 3, 8), t(8), t(8)))
def functional_layer_norm(x, w, b):
    return F.layer_norm(x, (8,), w, b), F.layer_norm(x, x.shape[-1:])


@program(lambda: (t(3, 4),))
def dropout_not_training(x):
    return F.dropout(x, p=0.5, training=False) + 1


@program(lambda: (t(2, 3, 4), t(2, 4, 5)))
def bmm_matmul_einsum(a, b):
    return torch.bmm(a, b), torch.matmul(a, b), torch.einsum("bij,bjk->bik", a, b)


@program(lambda: (t(3, 4),))
def factories_from_shapes(x):
    z = torch.zeros(x.shape[0], 2)
    o = torch.ones(x.size(), dtype=torch.float64)
    r = torch.arange(x.shape[1])
    f = torch.full((2, 2), 3.0)
    return z, o, r, f, torch.zeros_like(x), torch.ones_like(x, dtype=torch.int32), torch.empty(3).fill_(1.0)


@program(lambda: (t(2, 10),))
def topk_sort_argmax(x):
    v, i = torch.topk(x, 3, dim=-1)
    s = torch.sort(x, dim=1, descending=True)
    return v, i, s.values, s.indices, torch.argmax(x, dim=1), x.argmin()


@program(lambda: (t(6, 4),))
def chunk_split_unbind(x):
    a, b = torch.chunk(x, 2)
    c = torch.split(x, [2, 4])
    rows = x.unbind(1)
    return a - b, c[0].sum() + c[1].sum(), rows[0] * rows[3]


@program(lambda: (t(4, 5),))
def cumulative_and_norms(x):
    return torch.cumsum(x, 1), x.cumprod(0), torch.norm(x), torch.linalg.vector_norm(x, dim=1)


@program(lambda: (t(3, 3), t(3), t(4)))
def tril_triu_outer_diag(m, a, b):
    return torch.tril(m), m.triu(1), torch.outer(a, b), torch.diag(a), m.diagonal()


@program(lambda: (t(2, 3, 4),))
def flatten_transpose_permute_fns(x):
    return torch.flatten(x, 1), torch.transpose(x, 0, 2), torch.permute(x, (1, 2, 0)), torch.squeeze(x[:1], 0)


@program(lambda: (t(2, 3),))
def functional_pad_and_normalize(x):
    return F.pad(x, (1, 2)), F.normalize(x, dim=1), F.pad(x, (0, 0, 1, 0), value=5.0)


@program(lambda: (t(4, 3), torch.tensor([0, 2, 1, 2])))
def cross_entropy_and_mse(logits, target):
    return F.cross_entropy(logits, target), F.mse_loss(logits, torch.zeros_like(logits)), F.one_hot(target, 3)


@program(lambda: (t(5, 3), torch.tensor([4, 0, 2])))
def gather_index_select_scatter(x, idx):
    g = torch.index_select(x, 0, idx)
    h = torch.gather(x, 1, torch.zeros(5, 1, dtype=torch.long))
    s = torch.zeros(5, 3).index_add(0, idx, torch.ones(3, 3))
    return g, h, s


@program(lambda: (t(8), t(8)))
def torch_functions_with_kwargs_out_of_order(x, y):
    return torch.add(input=x, other=y, alpha=2), torch.sub(x, y, alpha=0.5), torch.lerp(x, y, 0.25)


@program(lambda: (t(3, 4),))
def type_conversions_via_torch(x):
    return x.to(torch.float16), x.type(torch.float64), torch.as_tensor(x), x.to(dtype=torch.int64)


@program(lambda: (t(2, 2),))
def new_tensor_from_python_list(x):
    return x + torch.tensor([[1.0, 2.0], [3.0, 4.0]])


@program(lambda: (t(6),))
def torch_any_all_isfinite(x):
    return torch.any(x > 0), torch.all(x < 10), torch.isfinite(x), torch.isnan(x).any(), torch.sign(x)


@program(lambda: (t(2, 3, 8, 8), t(4, 3, 3, 3)))
def conv_and_pooling(x, w):
    y = F.conv2d(x, w, padding=1)
    return F.max_pool2d(y, 2), F.avg_pool2d(y, 2), F.adaptive_avg_pool2d(y, 1)


@program(lambda: (t(4, 2),))
def shape_driven_factories_and_cat_repeat(x):
    n, d = x.shape
    ones = torch.ones(n, 1).to(x)
    return torch.cat([x] * 3, dim=1), torch.cat([x, ones], -1), x.view(x.size(0), -1), torch.zeros(n, d).shape


@program(lambda: (t(3, 4), t(4)))
def torch_functions_via_getattr_and_tensor_methods_as_functions(x, b):
    return getattr(torch, "add")(x, b), torch.Tensor.sum(x, 1)  # noqa: B009, torch.Tensor.relu(x), torch.mul(x, b)


@program(lambda: (t(3, 4),))
def torch_where_scalar_branches_and_nan_to_num(x):
    y = torch.where(x > 0, 1.0, -1.0)
    z = torch.nan_to_num(x / (x - x), nan=0.0)
    return y, z, torch.where(x > 0, x, 0.0)
