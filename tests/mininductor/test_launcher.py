"""The GPU launcher's bookkeeping, checked without a GPU: the specialization key that picks a kept binary
(direct_launch.specialization_key, [Note: direct launch]) and the per-value device scalars of ints passed as tensors
(specialize.IntsAsTensors, [Note: device scalars])."""
import torch

from mininductor.direct_launch import specialization_key
from mininductor.specialize import IntsAsTensors


def test_specialization_key_follows_tritons_rule():
    base = torch.zeros(64)
    aligned, misaligned = base[:8], base[1:9]  # 4-byte floats: offset 1 is not 16-byte aligned
    assert specialization_key((aligned, 32)) == specialization_key((base[4:12], 48))  # both aligned, both %16
    assert specialization_key((aligned, 32)) != specialization_key((misaligned, 32))
    assert specialization_key((aligned, 32)) != specialization_key((aligned, 33))  # divisibility by 16
    assert specialization_key((aligned, 1)) != specialization_key((aligned, 3))  # 1 is specialised
    assert specialization_key((aligned, 3)) == specialization_key((aligned, 5))  # a symbolic size: one binary
    assert specialization_key((aligned, 2**31 + 1)) != specialization_key((aligned, 5))  # needs 64 bits
    assert specialization_key((aligned, -2**31 - 1)) != specialization_key((aligned, 2**31 + 1))


def test_an_int_the_kernel_does_not_specialize_on_is_keyed_by_its_range_only():
    # [Note: ints a kernel does not specialize on]: position 1 is in the kernel's do_not_specialize
    aligned, unspecialized = torch.zeros(8), frozenset({1})
    keys = {specialization_key((aligned, n), unspecialized) for n in (1, 3, 16, 2**30)}
    assert len(keys) == 1  # one binary for every value that fits in 32 bits
    assert specialization_key((aligned, 2**31), unspecialized) not in keys  # 64 bits: another binary
    assert specialization_key((aligned, -3), unspecialized) not in keys
    assert specialization_key((aligned, 1)) != specialization_key((aligned, 3))  # specialized: as before


def test_ints_as_tensors_values_and_device_scalars():
    seen = []
    compiled = IntsAsTensors(lambda x, i: seen.append(i) or x + i, frozenset({1}))
    x = torch.arange(4)
    for value in (3, 5, 3):
        torch.testing.assert_close(compiled(x, value), x + value)
    assert [int(t) for t in seen] == [3, 5, 3] and all(t.dim() == 0 and t.dtype == torch.int64 for t in seen)
    # on a device the scalar is made once per value and reused (meta: a device without a host copy)
    on_device = IntsAsTensors(lambda x, i: i, frozenset({1}), torch.device("meta"))
    a, b, c = on_device(x, 3), on_device(x, 5), on_device(x, 3)
    assert a is c and a is not b and a.device.type == "meta"


def test_an_interpreted_launch_leaves_triton_language_as_it_found_it():
    # [Note: interpreter patches leak]: a compiled kernel built after an interpreted one must see the real
    # triton.language (Triton <= 3.6's interpreter left device-function patches behind)
    import triton.language as tl

    from .utils import check
    objects = [tl, tl.core, tl.math, tl.core.tensor, tl.core.dtype]
    before = [dict(vars(obj)) for obj in objects]
    check(lambda x: torch.softmax(x, -1) * x.sum(-1, keepdim=True), torch.randn(5, 33), kernels=1)
    after = [dict(vars(obj)) for obj in objects]
    for obj, b, a in zip(objects, before, after):
        assert {k for k in a.keys() - b.keys() if not isinstance(a[k], type(tl))} == set(), obj  # imports may add
        assert all(a[k] is b[k] for k in b), [k for k in b if a[k] is not b[k]]


def test_unflattener_rebuilds_every_output_structure():
    # flat lists and tuples take the fast path (the type itself); anything else goes through pytree, same result
    import collections

    import torch.utils._pytree as pytree

    from mininductor.runtime import unflattener
    point = collections.namedtuple("point", "x y")
    for value in ([1, 2, 3], (1, 2), [], (1, [2, (3, 4)]), {"a": 1, "b": (2, 3)}, point(1, 2), 7):
        leaves, spec = pytree.tree_flatten(value)
        rebuilt = unflattener(spec)(leaves)
        assert rebuilt == value and type(rebuilt) is type(value)
    assert unflattener(pytree.tree_flatten([1, 2])[1]) is list
    assert unflattener(pytree.tree_flatten((1, 2))[1]) is tuple


def test_autotune_keeps_the_default_config_unless_another_is_clearly_faster(monkeypatch):
    """The first candidate is the config measured best on an H200: a rival within the 1% that one timing varies
    by does not replace it; one faster by more does, and later rivals then compete on plain time."""
    from mininductor import runtime
    launcher = object.__new__(runtime.KernelLauncher)
    launcher.fn = "kernel"
    launcher.configs = [{"XBLOCK": 64}, {"XBLOCK": 32}, {"XBLOCK": 16}]
    launcher._launch = lambda cfg, args: cfg["XBLOCK"]
    for times, expected in (({64: 1.000, 32: 0.995, 16: 0.999}, 64),  # within 1%: the default stays
                            ({64: 1.000, 32: 0.980, 16: 0.985}, 32),  # 2% faster: replaced
                            ({64: 1.000, 32: 0.980, 16: 0.975}, 16)):  # then the fastest wins
        monkeypatch.setattr(runtime, "_bench", lambda fn, times=times: times[fn()])
        assert launcher._autotune(()) == {"XBLOCK": expected}


def test_a_looped_reduction_keeps_the_pipeline_depth_that_times_faster(monkeypatch):
    """[Note: pipeline stages]  After ``_autotune`` picks a config, a looped GPU reduction times it at Triton's
    default depth and at one stage (interleaved medians) and keeps the faster; one config (a small kernel) or a
    config that already names its depth is left alone."""
    import triton.testing

    from mininductor import runtime
    launcher = object.__new__(runtime.KernelLauncher)
    launcher.fn, launcher.kind, launcher.interpret = "kernel", "red", False
    launcher.configs = [{"XBLOCK": 1, "RBLOCK": 2048}, {"XBLOCK": 1, "RBLOCK": 4096}]
    launched = []
    launcher._launch = lambda cfg, args: launched.append(cfg)
    for one_stage_ms, expected in ((0.130, {"XBLOCK": 1, "RBLOCK": 2048, "num_stages": 1}),
                                   (0.133, {"XBLOCK": 1, "RBLOCK": 2048})):
        def do_bench(fn, one_stage_ms=one_stage_ms, **kw):
            fn()
            return one_stage_ms if launched[-1].get("num_stages") == 1 else 0.131
        monkeypatch.setattr(triton.testing, "do_bench", do_bench)
        launched.clear()
        assert launcher._pick_stages({"XBLOCK": 1, "RBLOCK": 2048}, ()) == expected
        assert len(launched) == 1 + 2 * 3  # one compile, then three interleaved rounds of both
    launched.clear()
    assert launcher._pick_stages({"XBLOCK": 1, "RBLOCK": 2048, "num_stages": 2}, ()) == \
        {"XBLOCK": 1, "RBLOCK": 2048, "num_stages": 2} and not launched
    launcher.configs = launcher.configs[:1]
    assert launcher._pick_stages({"XBLOCK": 1, "RBLOCK": 2048}, ()) == {"XBLOCK": 1, "RBLOCK": 2048}
    assert not launched
