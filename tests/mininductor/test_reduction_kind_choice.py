"""[Note: persistent or looped] in runtime.py: a long-row persistent reduction gets a looped twin on the GPU, and the
first call times both and keeps the faster.  On CPU (Triton's interpreter) there is no twin; the choice itself is
checked with stand-in launchers.  MININDUCTOR_TEST_DEVICE=cuda runs the twin for real."""
import types

import torch
import torch.nn.functional as F
import triton.testing

import mininductor
from mininductor import metrics, runtime

from .utils import DEVICE, check


class _StandIn:
    """A launcher that records its launches; ``ms`` is what the timing will report for it."""

    def __init__(self, kind: str, ms: float, fail: bool = False) -> None:
        self.kind, self.ms, self.fail, self.calls, self.interpret = kind, ms, fail, 0, False
        self.fn = types.SimpleNamespace(__name__=f"triton_{kind}_k")

    def run(self, *args) -> None:
        if self.fail:
            raise RuntimeError("out of resources")
        self.calls += 1


def test_the_faster_variant_is_kept_and_the_other_never_runs_again(monkeypatch):
    persistent, looped = _StandIn("per", 0.135), _StandIn("red", 0.131)
    times = {id(persistent): persistent.ms, id(looped): looped.ms}
    monkeypatch.setattr(triton.testing, "do_bench", lambda fn, **kw: (fn(), times[id(fn.__defaults__[0])])[1])
    choice = runtime.ReductionKindChoice(persistent, looped)
    choice.run("args")
    assert choice.chosen is looped
    before = persistent.calls
    for _ in range(3):
        choice.run("args")
    # each variant: a first run (compile, own config) and three timing rounds; then the kept one runs the call
    # itself and every later call
    assert persistent.calls == before == 4 and looped.calls == 4 + 1 + 3


def test_a_variant_that_fails_to_compile_leaves_the_other(monkeypatch):
    persistent, looped = _StandIn("per", 0.2), _StandIn("red", 0.1, fail=True)
    monkeypatch.setattr(triton.testing, "do_bench", lambda fn, **kw: (fn(), 0.2)[1])
    choice = runtime.ReductionKindChoice(persistent, looped)
    import warnings
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        choice.run("args")
    assert choice.chosen is persistent and any("red variant" in str(w.message) for w in caught)


def test_long_rows_get_a_looped_twin_on_the_gpu_only(monkeypatch):
    monkeypatch.setattr(mininductor.config, "reduction_kind_autotune_min", 256)
    x = torch.randn(64, 512)
    w, b = torch.randn(512), torch.randn(512)

    def fn(x, w, b):
        return F.layer_norm(x, (512,), w, b)

    compiled = check(fn, x, w, b, kernels=1, atol=1e-5, rtol=1e-5)
    twin = "ReductionKindChoice(" in compiled.source
    assert twin == (DEVICE == "cuda")  # the interpreter has nothing to choose between
    assert metrics.generated_kernel_count == 1  # a twin is a variant, not another kernel
    if twin:
        assert "triton_per_" in compiled.source and "triton_red_" in compiled.source
        args = [a.to(DEVICE) for a in (x, w, b)]
        torch.testing.assert_close(compiled(*args), fn(*args), atol=1e-5, rtol=1e-5)  # the kept variant
        assert metrics.generated_kernel_count == 1
