"""Object identity and Python's own errors: what the corpus's structural comparison cannot see.

Found by differential fuzzing (compiled vs eager, several calls each).  Each test calls a compiled function and
the plain one on equal inputs and compares what CPython guarantees: which results are the same object, which
inputs alias, and the exact exception raised; objects built while tracing and bound methods are distinct
objects, as in CPython (fuzz round 4).  Budget: ~3 s.
"""
import pytest
import torch

from minidynamo.testing import check_against_eager as _check

X = torch.arange(3.0)


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



@pytest.mark.parametrize("backend", ["eager", "inductor"])
def test_in_place_multiply_into_an_integer_raises_as_in_eager(md, backend):
    """``i.mul_(1.5)`` / ``i *= f`` on an integer tensor: eager raises (float result, integer self); fake
    ``mul_`` accepts it, and the compiled graph returned the product truncated into ``i``. A graph break before
    the op (eager raises); a product that casts back (``i *= True``) still compiles."""
    def scalar(i):
        i.mul_(1.5)
        return i

    def tensor(i, f):
        i *= f
        return i

    def three(i, f):
        return i.addcmul_(f, f)

    def fine(i, f):
        i *= True
        f.mul_(i)
        return i, f

    i, f = torch.arange(4), torch.full((4,), 1.5)
    for fn, args in ((scalar, (i,)), (tensor, (i, f)), (three, (i, f))):
        md.reset()
        with pytest.raises(RuntimeError, match="can't be cast"):
            md.minicompile(fn, backend=backend)(*[a.clone() for a in args])
    eager, compiled = _both(md, fine, lambda: (i.clone(), f.clone()))
    assert all(torch.equal(a, b) for a, b in zip(compiled[0], eager[0]))
    assert md.counters["graph_break"] == {}

def _keywords(**kw):
    return kw


def test_double_star_keeps_cpythons_errors(md):
    """Fuzzing found ``f(**a, **b)`` with a repeated key returning ``{'a': 2}``: DICT_MERGE was DICT_UPDATE."""
    def repeated(x):
        first, second = {"a": 1}, {"a": 2}
        return _keywords(**first, **second), x

    def not_a_mapping(x):
        return {**[("a", 1)]}, x

    for fn in (repeated, not_a_mapping):
        eager, compiled = _both(md, fn, lambda: (torch.ones(2),))
        assert compiled == eager and eager[0][0] is TypeError


def test_a_frame_run_eagerly_raises_outside_the_translators_except_block(md):
    """Fuzzing found the eager fallback running inside ``except Unsupported``: the user's exception got the
    ``Unsupported`` as ``__context__``, and 3.11 raised KeyError for ``f(**a, **b)``'s repeated key (the
    ``TypeError`` above)."""
    import sys

    def fn(x):
        if x.shape[0] == 2:
            raise ValueError("two")  # a user exception: the translator refuses, the frame runs eagerly
        return sys.exc_info()[0], x

    md.reset()
    compiled = md.minicompile(fn, backend="eager")
    with pytest.raises(ValueError, match="two") as info:
        compiled(torch.ones(2))
    assert info.value.__context__ is None
    assert compiled(torch.ones(3))[0] is None  # no exception is being handled while the frame runs


def test_an_unset_slot_read_from_an_input_is_refused_not_an_internal_error(md):
    class Slotted:
        __slots__ = ("a",)

    def fn(x, s):
        try:
            return s.a
        except AttributeError as e:
            return x, str(e)

    eager, compiled = _both(md, fn, lambda: (torch.ones(2), Slotted()))
    assert str(compiled) == str(eager)
    assert not [r for r in md.counters["eager_fallback"] if r.startswith("internal error")]


def test_a_break_right_before_an_extended_arg_resumes(md, monkeypatch):
    """``*d, e = f(x)``: UNPACK_EX 256 carries an EXTENDED_ARG prefix, and the break at ``f`` continues at the
    prefix's offset, which the liveness analysis did not know (an internal error, found by fuzzing)."""
    monkeypatch.setattr(md.config, "raise_internal_errors", True)

    def f(v):
        print("break")
        return [v, v + 1, v + 2]

    def fn(x):
        *d, e = f(x)
        return d, e

    eager, compiled = _both(md, fn, lambda: (torch.ones(2),))
    assert str(compiled) == str(eager)
    assert not md.counters["eager_fallback"]


def test_a_wrapped_state_setter_is_still_a_graph_break(md, monkeypatch):
    """Importing torch._dynamo replaces torch.manual_seed by a ``_disable_dynamo`` wrapper; when that happened after
    minidynamo's import, the wrapper was traced as a dead graph node and the reseed dropped (found by fuzzing)."""
    monkeypatch.setattr(torch, "manual_seed", torch._disable_dynamo(torch.random.manual_seed))

    def fn(x):
        a = torch.rand(3)
        torch.manual_seed(3)
        return x + a, torch.randint(0, 10, (3,))

    def seeded():
        torch.manual_seed(0)
        return (torch.ones(3),)

    eager, compiled = _both(md, fn, seeded)
    assert all(torch.equal(e, c) for e, c in zip(eager[0], compiled[0]))
    assert "`torch.manual_seed` changes global RNG state" in md.counters["graph_break"]


def test_getattr_default_and_hasattr_swallow_only_attribute_error(md):
    """Fuzzing found ``getattr(o, "p", None)`` giving None when the property ``p`` graph-breaks or raises KeyError
    (any failure was swallowed), and ``hasattr`` running the property once while tracing instead of on every call."""
    class Obj:
        def __init__(self):
            self.log = []

        @property
        def prints(self):
            print("reading prints")
            return 5

        @property
        def raises_key_error(self):
            self.log.append("read")
            return {}["missing"]

        @property
        def raises_attribute_error(self):
            raise AttributeError("absent")

    def fn(x, o):
        found = getattr(o, "prints", None), getattr(o, "raises_attribute_error", "default")
        try:
            getattr(o, "raises_key_error", None)
        except KeyError:
            found += ("KeyError",)
        return x, found, hasattr(o, "raises_attribute_error"), o.log

    def hasattr_runs_the_property(x, o):
        return x, hasattr(o, "prints"), o.log, hasattr(o, "raises_key_error")  # KeyError, after the print

    eager, compiled = _both(md, fn, lambda: (torch.ones(1), Obj()), lambda: (torch.ones(1), Obj()))
    assert str(compiled) == str(eager)
    eager, compiled = _both(md, hasattr_runs_the_property, lambda: (torch.ones(1), Obj()))
    assert str(compiled) == str(eager) and eager[0][0] is KeyError


# --- objects built while tracing, and bound methods (fuzz round 4) --------------------------------------------------

class _Plain:
    def __init__(self, k):
        self.k = k


class _Keyed(_Plain):
    def __eq__(self, other):
        return isinstance(other, _Keyed) and self.k == other.k

    def __hash__(self):
        return hash(self.k)


def test_two_objects_built_while_tracing_are_not_the_same_object():
    def fn(x):  # both had no real object yet, and `None is None` made them identical
        a, b = _Plain(1), _Plain(2)
        c, d = _Keyed(1), _Keyed(2)
        return (x + 1, a is b, a is [a][0], a == b, [a, b].index(b), b in [a], [c, d].index(_Keyed(2)), _Keyed(1) in [c],
                [c, d].count(_Keyed(3)))
    assert _check(fn, X)[1:] == (False, True, False, 1, False, 1, True, 0)


def test_bound_methods_are_new_objects_that_compare_equal():
    def fn(x):
        k = _Plain(1)
        xs = [1]
        m = k.__init__
        return x + 1, k.__init__ is k.__init__, k.__init__ == k.__init__, m is [m][0], xs.append == xs.append, \
            xs.append is xs.append, _Plain(2).__init__ == k.__init__
    assert _check(fn, X)[1:] == (False, True, True, True, False, False)
