"""Op-level programs a sixth corpus (~110 programs: attention variants, rotary embeddings, norms over non-last
dims, NaN-propagating reductions, integer and bool arithmetic, mixed dtypes, views of intermediates...) found
wrong, each compiled and compared with eager. Budget: a few seconds on 2 cores."""
import pytest
import torch

from mininductor import metrics

from .utils import DEVICE, check

pytestmark = pytest.mark.usefixtures("fresh_minicompile")  # conftest.py


def test_integer_pow_with_a_tensor_exponent_falls_back():
    """``torch.pow(2, i)`` and ``i ** j`` on integers: ``ops.pow`` is ``exp(b*log(a))``, float-only, and the
    interpreter raised on ``tl.exp`` of an int64 (program ``i_pow_int``). Like Inductor it now runs eagerly."""
    i = torch.randint(-9, 9, (6, 10))
    check(lambda i: (torch.pow(2, i.abs() % 10) + 1, i ** (i.abs() % 4), i.to(torch.int32) ** 3, i.float().pow(i)),
          i, kernels=2, fallbacks=2)
    assert all("aten.pow" in op for op in metrics.fallback_ops)


def test_bool_add_is_logical_or():
    """``b + c`` on bool tensors is True where either is: Triton's int1 add wrapped True + True to False
    (program ``m_bool_uint8``)."""
    b, c = torch.rand(5, 7) > 0.5, torch.rand(5, 7) > 0.5
    check(lambda b, c: (b + c, b + c + b, (b + c).int() * 3, b.add(True), b + c.to(torch.uint8)), b, c,
          kernels=1, fallbacks=0)


def test_view_of_an_intermediate_keeps_eager_strides():
    """``y.transpose(0, 2)`` or ``y.diagonal()`` returned with ``y = x * 2`` unrealised: eager returns a view of
    ``y``, we returned a contiguous copy (program ``v_views_of_intermediate``). Now ``y`` is computed and viewed,
    as AOTAutograd regenerates an output that aliases an intermediate; a copy that eager makes (flip) stays one."""
    x = torch.randn(2, 4, 6, device=DEVICE)  # the device check() compiles for

    def fn(x):
        y = x * 2
        return y.transpose(0, 2), y[1:], y.diagonal(0, 1, 2), (x + 1)[:, ::2].mT, (x - 1).flip(0)
    compiled = check(fn, x, kernels=1, fallbacks=0)
    for ours, theirs in zip(compiled(x), fn(x)):
        assert ours.stride() == theirs.stride() and ours.storage_offset() == theirs.storage_offset()


def test_shift_operators_lower_like_bitwise_shifts():
    """``a << s`` and ``a >> 2`` trace to ``aten.__lshift__``/``__rshift__``, which had no lowering: every shift
    was an eager fallback (programs ``i_shifts``, ``i_int8_wrap_neg``). Arithmetic right shift of negatives, uint8,
    and int32 promoted by an int64 shift amount."""
    a = torch.tensor([[5, -7, 1, -1, 100, -128]], dtype=torch.int32).repeat(3, 1)
    s = torch.tensor([0, 3, 7, 8, 2, 1], dtype=torch.int32)
    check(lambda a, s: (a << s, a >> s, a >> 2, a.to(torch.int8) >> 1, a.to(torch.uint8) >> s.to(torch.uint8),
                        a << s.long(), a.long() << 40), a, s, kernels=1, fallbacks=0)
