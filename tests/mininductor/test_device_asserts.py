"""Compiled GPU kernels check the indices they read from tensors ([Note: out-of-range indices]), and the values
eager's CUDA kernels assert on ([Note: value checks]: ``one_hot``'s classes, ``binary_cross_entropy``'s
probabilities).

An out-of-range ``x[i]`` in eager CUDA stops the indexing kernel with a device-side assert; our compiled kernel
does the same through ``tl.device_assert`` (Inductor's ``assert_indirect_indexing``), where it used to read or
write outside the tensor. A device-side assert leaves the CUDA context unusable, so each bad index runs in a
child process. GPU only (``MININDUCTOR_TEST_DEVICE=cuda``); the interpreter's checks are tested in
test_indirect_indexing.py.
"""
import os
import subprocess
import sys
import textwrap
from concurrent.futures import ThreadPoolExecutor

import pytest
import torch
import torch.nn.functional as F

from mininductor import metrics

from .utils import DEVICE, compile_fn

pytestmark = pytest.mark.skipif(DEVICE != "cuda", reason="compiled GPU kernels only (MININDUCTOR_TEST_DEVICE=cuda)")

W = 4  # the embedding table's width

PROGRAMS = {
    "subscript": lambda x, i: x[i] * 2,
    "gather": lambda x, i: torch.gather(x, 0, i.view(-1, 1).expand(-1, 8)),
    "embedding": lambda x, i: F.embedding(i, x[:, :W]),
    "index_select": lambda x, i: x.index_select(0, i),
    "index_put": lambda x, i: x.clone().index_put_((i,), torch.ones(8, device=x.device)),
    "index_add": lambda x, i: x.clone().index_add_(0, i, torch.ones(2, 8, device=x.device)),
    "scatter": lambda x, i: x.clone().scatter_(0, i.view(-1, 1).expand(-1, 8), 1.0),
    # value checks: eager's one_hot scatters (a device-side assert for a class of 20); its binary_cross_entropy
    # and bernoulli kernels assert that each probability is in [0, 1] (2.0 is not)
    "one_hot": lambda x, i: F.one_hot(i, 16) * 2,
    "binary_cross_entropy": lambda x, i: F.binary_cross_entropy(i.float() / 10, torch.ones(2, device=x.device)),
    "bernoulli": lambda x, i: torch.bernoulli(i.float() / 10) * 0,  # * 0: a random draw compares with eager's
}

CHILD = textwrap.dedent("""
    import sys, torch
    from tests.mininductor.test_device_asserts import PROGRAMS
    from tests.mininductor.utils import compile_fn
    name, bad, who = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    x = torch.randn(16, 8, device="cuda")
    fn = PROGRAMS[name]
    run = compile_fn(fn, x, torch.tensor([1, 2], device="cuda")) if who == "compiled" else fn
    try:
        run(x, torch.tensor([0, bad], device="cuda"))
        torch.cuda.synchronize()
    except RuntimeError as e:
        print("RAISED", str(e).splitlines()[0])
    else:
        print("NO ERROR")
""")


def _run_child(name: str, bad: int, who: str) -> str:
    done = subprocess.run([sys.executable, "-c", CHILD, name, str(bad), who], check=False, capture_output=True, text=True,
                          timeout=240, cwd=os.path.dirname(os.path.dirname(os.path.dirname(__file__))))
    return done.stdout + done.stderr


def test_kernels_with_indirect_loads_are_compiled_with_their_checks():
    """In range, every program matches eager (negative indices too, where eager takes them) and its kernels are
    launched with ``device_asserts``; a kernel without an index read has no check."""
    x = torch.randn(16, 8, device="cuda")
    for name, fn in PROGRAMS.items():
        metrics.reset()
        compiled = compile_fn(fn, x, torch.tensor([1, 2], device="cuda"))
        source = compiled.source
        assert "tl.device_assert(" in source and "device_asserts=True" in source, name
        # -1 only where eager takes it: elsewhere eager's own kernel asserts, which would end this process
        for values in ([3, 5], [3, -1]) if name in ("subscript", "index_put") else ([3, 5],):
            i = torch.tensor(values, device="cuda")
            torch.testing.assert_close(compiled(x, i), fn(x, i))
    plain = compile_fn(lambda x: x.sin() * 2, x)
    assert "device_assert" not in plain.source


def test_integer_division_by_zero_is_not_checked_on_the_gpu():
    """Eager's CUDA kernels divide integers by zero without an error (the CPU's raise ZeroDivisionError:
    test_value_checks.py), so a GPU kernel has no check: it would stop where eager returns."""
    a = torch.tensor([5, -7, 3], device="cuda")
    compiled = compile_fn(lambda a, b: (a // b, a % b, torch.fmod(a, b)), a, a)
    assert "device_assert" not in compiled.source


def test_integer_overflow_still_wraps_in_a_checking_kernel():
    """Triton's debug mode also traps integer overflow; eager wraps around, and so must we (sanitize_overflow off)."""
    x = torch.full((16, 8), 2**30, dtype=torch.int32, device="cuda")

    def fn(x, i):
        return x[i] * 4 + x[i]  # 2**32 + 2**30 wraps to 2**30 in int32
    i = torch.tensor([1, 2], device="cuda")
    compiled = compile_fn(fn, x, i)
    assert "device_asserts=True" in compiled.source
    torch.testing.assert_close(compiled(x, i), fn(x, i))


def test_an_out_of_range_index_stops_the_kernel_as_in_eager():
    """Each program with an index past the end (20, and 10**7 for ``x[i]``) or below ``-size`` raises the
    device-side assert eager's CUDA kernels raise, instead of returning what lies outside the tensor."""
    cases = [(name, 20) for name in PROGRAMS] + [("subscript", 10**7), ("subscript", -17)]
    runs = [(name, bad, who) for name, bad in cases for who in ("eager", "compiled")]
    with ThreadPoolExecutor(max_workers=8) as pool:
        outputs = list(pool.map(lambda run: _run_child(*run), runs))
    for (name, bad, who), out in zip(runs, outputs):
        assert "RAISED" in out and "device-side assert" in out, f"{who} {name}[{bad}]: {out[-2000:]}"
