"""Object identity and Python's own errors: what the corpus's structural comparison cannot see.

Found by differential fuzzing (compiled vs eager, several calls each).  Each test calls a compiled function and
the plain one on equal inputs and compares what CPython guarantees: which results are the same object, which
inputs alias, and the exact exception raised.  Budget: ~3 s.
"""
import pytest
import torch


def _both(md, fn, *args_per_call):
    """Results (or (exception type, message)) of `fn` eagerly and compiled, one per argument tuple."""
    def run(f):
        out = []
        for make in args_per_call:
            try:
                out.append(f(*make()))
            except Exception as e:  # noqa: BLE001 - the exception is the result being compared
                out.append((type(e), str(e)))
        return out
    md.reset()
    return run(fn), run(md.minicompile(fn, backend="eager"))


def test_returned_local_containers_keep_their_identity(md):
    def fn(x):
        a = [x]
        d = {"k": a}
        return a, a, d

    out = md.minicompile(fn, backend="eager")(torch.ones(2))
    assert out[0] is out[1] and out[2]["k"] is out[0]  # one list, not three copies


def test_aliased_list_dict_and_object_inputs(md):
    class Obj:
        v = 1

    def fn(x, a, b, d1, d2, o1, o2):
        a.append(1)
        d1["z"] = 1
        o1.v = o1.v + 10
        return x * len(b), a is b, len(d2), o2.v

    def fresh(shared):
        def make():
            a, d, o = [1], {}, Obj()
            return (torch.ones(2), a, a, d, d, o, o) if shared else (torch.ones(2), a, [1], d, {}, o, Obj())
        return make

    # distinct, then aliased (the guards must notice), then distinct again
    eager, compiled = _both(md, fn, fresh(False), fresh(True), fresh(False))
    for e, c in zip(eager, compiled):
        assert torch.equal(e[0], c[0]) and e[1:] == c[1:]


def test_aliased_tensor_inputs_are_guarded_both_ways(md):
    def fn(a, b):
        return a.add(1) + b

    x, y = torch.ones(2), torch.zeros(2)
    eager, compiled = _both(md, fn, lambda: (x, x), lambda: (x, y), lambda: (y, y))
    assert all(torch.equal(e, c) for e, c in zip(eager, compiled))


def _kw_only(*, a, b):
    return a * b


def test_wrong_arguments_raise_cpythons_own_type_error(md):
    def calls_badly(x):
        return _kw_only(x)  # the callee runs natively at the break: its TypeError is CPython's

    eager, compiled = _both(md, calls_badly, lambda: (torch.ones(2),))
    assert compiled == eager and eager[0][0] is TypeError
    eager, compiled = _both(md, _kw_only, lambda: (torch.ones(2),))  # the compiled function itself
    assert compiled == eager


def test_dict_changed_size_during_iteration_raises(md):
    def fn(x, d):
        for k in d:
            d[k + "x"] = 2
        return x

    eager, compiled = _both(md, fn, lambda: (torch.ones(1), {"a": 1}))
    assert compiled == eager == [(RuntimeError, "dictionary changed size during iteration")]


@pytest.mark.parametrize("kind", ["keys", "values", "items"])
def test_dict_view_type_and_liveness(md, kind):
    def fn(x, d):
        view = getattr(d, kind)()
        d["new"] = 3
        return x, type(view), len(view), list(view)

    eager, compiled = _both(md, fn, lambda: (torch.ones(1), {"a": 1}))
    assert compiled[0][1:] == eager[0][1:]


@pytest.mark.parametrize("backend", ["eager", "inductor"])
def test_subtracting_a_bool_raises_as_in_eager(md, backend):
    mask = torch.tensor([True, False])

    def fn(x):  # fake tensors accept it (their meta function checks only two bool tensors); eager raises
        return x - True, x - mask

    md.reset()
    with pytest.raises(RuntimeError, match="Subtraction, the `-` operator, with a bool tensor"):
        md.minicompile(fn, backend=backend)(torch.ones(2))
