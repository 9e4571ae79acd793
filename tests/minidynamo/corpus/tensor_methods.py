"""Tensor methods and attributes: shape/size/dtype/device/ndim/T, views, in-place ops, indexing and slicing."""
import torch

from . import program, t


@program(lambda: (t(3, 4),))
def shape_and_size_are_constants(x):
    b, n = x.shape
    return x.view(n, b), x.size(), x.size(1), x.shape[-1], x.size()[0] * n


@program(lambda: (t(2, 3, 4),))
def ndim_dim_numel(x):
    return x.reshape(x.ndim, -1), x.dim(), x.numel(), len(x.shape)


@program(lambda: (t(2, 3),))
def dtype_and_device_attributes(x):
    y = torch.zeros(3, dtype=x.dtype, device=x.device)
    return y, x.dtype, x.device, x.is_floating_point(), x.dtype == torch.float32


@program(lambda: (t(3, 5),))
def transpose_property_T_and_mT(x):
    return x.T, x.mT @ x, x.t().contiguous()


@program(lambda: (t(2, 3, 4),))
def view_reshape_permute(x):
    return x.view(6, 4), x.reshape(-1), x.permute(2, 0, 1), x.transpose(1, 2).reshape(2, 12), x.flatten(0, 1)


@program(lambda: (t(3, 1, 4),))
def squeeze_unsqueeze_expand_repeat(x):
    return x.squeeze(1), x.unsqueeze(0).shape, x.expand(3, 5, 4), x.repeat(1, 2, 1), x.unsqueeze(-1).expand_as(
        torch.empty(3, 1, 4, 2))


@program(lambda: (t(3, 4),))
def inplace_ops_on_a_fresh_tensor(x):
    y = x.clone()
    y.add_(1).mul_(2)
    y.clamp_(max=2.5)
    y[0].zero_()
    return y


@program(lambda: (t(4, 5),))
def int_and_slice_indexing(x):
    return x[0], x[-1, 2], x[:, 1:3], x[1:-1:2], x[::2, ::-1].shape if False else x[::2, 1:], x[2:]


@program(lambda: (t(2, 3, 4),))
def none_and_ellipsis_indexing(x):
    return x[None], x[..., 0], x[:, None, :, None], x[..., 1:, :], x[0, ...]


@program(lambda: (t(5, 3), torch.tensor([0, 3, 3])))
def tensor_indices(x, idx):
    return x[idx], x[idx, 1], x[:, torch.tensor([2, 0])], x[[0, 4]]


@program(lambda: (t(4, 4),))
def setitem_on_a_clone(x):
    y = x.clone()
    y[0] = 1.0
    y[:, 1] = y[:, 2] * 2
    y[2:, 2:] += 5
    return y


@program(lambda: (t(3, 4), t(3, 4)))
def masked_fill_with_computed_mask(x, y):
    return x.masked_fill(y > 0, 0.0), torch.where(y > 0, torch.zeros_like(x), x)


@program(lambda: (t(4, 6),))
def reductions_keepdim_methods(x):
    return x.sum(dim=-1, keepdim=True), x.mean(1), x.max(), x.std(dim=0), x.var(1, unbiased=False), x.logsumexp(1)


@program(lambda: (t(3, 4),))
def new_factories_from_tensor(x):
    return x.new_zeros(2, 3), x.new_ones(x.shape), x.new_full((2,), 7.0), x.new_tensor([1.0, 2.0]), x.new_empty(
        0).numel()


@program(lambda: (t(3, 4),))
def dtype_casting_methods(x):
    return x.float(), x.double(), x.half(), x.long(), x.int(), x.bool(), x.to(torch.bfloat16), x.type_as(
        torch.zeros(1, dtype=torch.float64))


@program(lambda: (t(3, 4, requires_grad=True),), grad=True)
def requires_grad_attribute_and_grad(x):
    y = x * 2 if x.requires_grad else x
    return y.sin().sum(1), x.requires_grad


@program(lambda: (t(2, 6),))
def chained_methods(x):
    return x.abs().sqrt().neg().exp().mean(dim=1).unsqueeze(1).expand(2, 3).contiguous()


@program(lambda: (t(3, 4),))
def size_negative_index_and_stride(x):
    return x.size(-1), x.stride(), x.transpose(0, 1).stride(0), x.is_contiguous(), x.t().is_contiguous()


@program(lambda: (t(6),))
def chunk_and_split_methods(x):
    a, b, c = x.chunk(3)
    d, e = x.split(4)
    return a + b + c, d.sum() - e.sum(), len(x.split(2))


@program(lambda: (t(2, 3),))
def element_size_and_shape_arith(x):
    return x.new_zeros(x.shape[0] * x.shape[1]), x.element_size(), x.nelement()


@program(lambda: (t(4, 4),))
def inplace_method_returns_self(x):
    y = x.clone()
    z = y.mul_(3)
    return z is y, y.sub_(1).div_(2), y


@program(lambda: (t(3, 4),))
def comparison_methods_and_logical(x):
    return x.gt(0), x.le(0.5), x.eq(x), x.ne(0).logical_and(x.lt(1)), x.isclose(x)


@program(lambda: (t(2, 3, 4),))
def negative_dims_everywhere(x):
    return x.sum(-1), x.transpose(-1, -2), x.unsqueeze(-1).squeeze(-1), x.softmax(-1), x.cumsum(-2)


@program(lambda: (t(3, 4),))
def unfold_narrow_select(x):
    return x.narrow(1, 1, 2), x.select(0, 2), x.unfold(1, 2, 1), x.roll(1, 0), x.flip(1)


@program(lambda: (t(5),))
def tensor_indexing_with_negative_and_step(x):
    return x[-2:], x[:-1] - x[1:], x[::2], x[-1]


@program(lambda: (t(2, 3, 4),))
def torch_size_arithmetic(x):
    *batch, d = x.shape
    new_shape = x.shape[:-1] + (2, d // 2)
    return x.view(new_shape), x.view(*batch, 2, -1), x.shape[1:], list(x.shape), sum(x.shape), x.shape == (2, 3, 4)


@program(lambda: (t(3, 4), t(2, dtype=torch.float64)))
def to_other_tensor_dtype_and_device(x, y):
    return x.to(y), x.to(y.dtype), x.to(device=y.device), x.device.type == "cpu", x.dtype in (torch.float16,)


@program(lambda: (t(3, 4),))
def finfo_and_inf_constants(x):
    neg = torch.finfo(x.dtype).min
    return x.masked_fill(x > 0, neg), x.clamp(max=float("inf")), x.masked_fill(x < 0, -float("inf")).softmax(-1)


@program(lambda: (t(4, 5), torch.tensor([[0, 1], [2, 3]])))
def advanced_indexing_forms(x, idx2d):
    return x[idx2d], x[:, [0, 2]], x[..., None], x[1:3, None, ::2], x[[1, 0], [2, 2]]


@program(lambda: (t(5, 3), torch.tensor([1, 3])))
def setitem_with_tensor_index_and_mask(x, idx):
    y = x.clone()
    y[idx] = 0.0
    y[y > 1] = 1.0
    y.masked_fill_(y < -1, -1.0)
    y.index_put_((torch.tensor([0]),), torch.full((1, 3), 9.0))
    return y


@program(lambda: (t(3, 4),))
def scatter_and_index_ops_inplace(x):
    out = torch.zeros(3, 4)
    out.scatter_(1, torch.tensor([[0], [1], [2]]), 1.0)
    out.index_fill_(1, torch.tensor([3]), -1.0)
    return out + x, torch.zeros(5).scatter_add(0, torch.tensor([0, 0, 4]), torch.ones(3))


@program(lambda: (t(2, 3, 4),))
def tuple_dims_and_keywords(x):
    return x.sum(dim=(0, 2)), x.mean((1, 2), keepdim=True), x.amax(dim=(-1, -2)), x.permute(*(2, 0, 1))


@program(lambda: (t(6),))
def int_of_shape_division(x):
    half = int(x.shape[0] / 2)
    return x[:half] * x[half:], x.size(0) // 2, x[: x.size(0) // 3]


@program(lambda: (t(3),))
def python_int_bit_ops(x):
    n = 5
    return x * (n << 2) + (n >> 1) - (n & 3) + (n | 8) + (n ^ 1), ~n


@program(lambda: (t(2, 3),))
def tensor_python_protocols(x):
    return len(x), x.shape[0] == len(x), x.T.shape, x.__add__(1), x.__rsub__(2)


@program(lambda: (t(4, 4),))
def out_variants_and_functional_equivalents(x):
    y = torch.empty(4, 4)
    torch.add(x, 1, out=y)
    return y * 2


@program(lambda: (t(2, 3),))
def dtype_queries(x):
    return (x.is_complex(), torch.is_floating_point(x), x.dtype.is_floating_point,
            x.dtype.itemsize, str(x.dtype), x.type(), torch.get_default_dtype(), x * x.dtype.is_signed)


@program(lambda: (t(3, 4),))
def torch_size_methods(x):
    s = x.size()
    return s.numel(), len(s), s[-1], torch.Size([2, 3]).numel(), x.new_zeros(s[::-1]), s.index(4), s.count(3)


@program(lambda: (t(3, 4),))
def inplace_binops_on_shape_ints(x):
    n = x.shape[0]
    n += 1
    n *= 2
    n //= 3
    m = x.shape[1]
    m -= 1
    return x.reshape(-1)[: n * m], n, m


@program(lambda: (torch.nn.Parameter(torch.randn(3)), t(3)))
def parameter_as_input(p, x):
    return p * x, isinstance(p, torch.nn.Parameter), isinstance(x, torch.nn.Parameter), type(p) is torch.Tensor


@program(lambda: (t(4, 4),))
def kwargs_only_tensor_methods(x):
    return x.add(1, alpha=2), x.div(2, rounding_mode="floor"), x.sub(x, alpha=0.5), x.clamp(min=-0.2, max=0.3)


@program(lambda: (t(6),))
def setitem_with_steps_and_negatives(x):
    y = x.clone()
    y[::2] = y[1::2] * 3
    y[-1] = 7.0
    y[1:-1:3] += 1
    return y
