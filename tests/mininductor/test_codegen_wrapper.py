"""The wrapper's host-time shortcuts ([Note: extern calls] in codegen/wrapper.py): externs called through the op's
C++ entry, no ``ensure_layout`` after a matmul (whose result is always contiguous: checked against eager here),
a buffer returned as itself rather than as a view of all of it, and views at offset 0 made by ``torch.as_strided``
-- each compared with eager, values and strides."""
import pytest
import torch

from .utils import DEVICE, check

MATMULS = [
    ("mm", torch.mm, [(6, 5), (5, 4)]),
    ("addmm", torch.addmm, [(4,), (6, 5), (5, 4)]),
    ("bmm", torch.bmm, [(3, 6, 5), (3, 5, 4)]),
    ("baddbmm", torch.baddbmm, [(3, 6, 4), (3, 6, 5), (3, 5, 4)]),
    ("mv", torch.mv, [(6, 5), (5,)]),
    ("addmv", torch.addmv, [(6,), (6, 5), (5,)]),
    ("dot", torch.dot, [(5,), (5,)]),
]


def _strided(shape):
    """A tensor of ``shape`` that is not contiguous: transposed (or every other element of a longer vector)."""
    if len(shape) == 1:
        return torch.randn(2 * shape[0], device=DEVICE)[::2]
    return torch.randn(*reversed(shape), device=DEVICE).permute(*reversed(range(len(shape))))


@pytest.mark.parametrize("name,op,shapes", MATMULS, ids=[m[0] for m in MATMULS])
def test_a_matmul_result_is_contiguous_whatever_its_inputs(name, op, shapes):
    """What the wrapper relies on to leave out ``ensure_layout`` after these externs: eager returns a fresh
    contiguous tensor for strided inputs, on this device."""
    for make in (lambda s: torch.randn(*s, device=DEVICE), _strided):
        assert op(*[make(s) for s in shapes]).is_contiguous()


@pytest.mark.usefixtures("library_matmuls")
def test_a_matmul_extern_goes_through_its_public_function_without_ensure_layout():
    a, b = torch.randn(6, 5), torch.randn(6, 4)
    compiled = check(lambda a, b: torch.relu(a.t() @ b) + 1, a, b, kernels=1, externs=1)
    assert "aten_mm = torch.mm  # [Note: extern calls]" in compiled.source
    assert "= aten_mm(torch.as_strided(arg0_1, (5, 6), (1, 5)), arg1_1)" in compiled.source
    assert "ensure_layout(" not in compiled.source.split("def call")[1]


def test_an_extern_with_a_layout_of_its_own_keeps_ensure_layout():
    x, w = torch.randn(1, 3, 8, 8), torch.randn(4, 3, 3, 3)
    x = x.contiguous(memory_format=torch.channels_last)
    compiled = check(lambda x, w: torch.nn.functional.conv2d(x, w) * 2, x, w, atol=1e-4, rtol=1e-4, kernels=1,
                     externs=1)
    assert "ensure_layout(" in compiled.source.split("def call")[1]
    assert "aten_convolution = aten_entry(torch.ops.aten.convolution.default)" in compiled.source


@pytest.mark.usefixtures("library_matmuls")
def test_a_whole_buffer_output_is_the_buffer_and_a_part_stays_a_view():
    x = torch.randn(6, 4)  # six rows: the matmul is an extern on every device ([Note: a skinny mm as a reduction])
    for fn, kernels, externs in ((lambda x: (x * 2).t().t(), 1, 0), (lambda x: (x * 2).unsqueeze(0).squeeze(0), 1, 0),
                                 (lambda x: (x @ x.t()).t().t(), 0, 1)):
        compiled = check(fn, x, kernels=kernels, externs=externs)
        assert compiled.source.rstrip().endswith("return (buf0, )")
        assert compiled(x.to(DEVICE))._base is None  # a tensor of its own, as eager's

    def two_views(x):
        y = x * 2
        return y.view(2, 6), y[1:]  # two outputs made of one buffer: both stay views of it

    compiled = check(two_views, torch.randn(12), kernels=1)
    a, b = compiled(torch.randn(12, device=DEVICE))
    assert b.data_ptr() == a.data_ptr() + b.element_size() and a._base is b._base is not None


@pytest.mark.usefixtures("library_matmuls")
def test_a_view_at_offset_zero_of_an_input_that_starts_inside_its_storage():
    """``torch.as_strided`` without an offset keeps the tensor's own: an input that is a slice of a larger
    tensor is read from its first element, not its storage's."""
    base = torch.randn(40)
    compiled = check(lambda x, w: x.view(5, 6).t() @ w, base[4:34], torch.randn(5, 3), externs=1)
    assert "torch.as_strided(arg0_1, (6, 5), (1, 6))" in compiled.source
