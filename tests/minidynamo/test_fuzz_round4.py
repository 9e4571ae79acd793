"""Differential fuzzing, round 4: each program that gave a wrong answer or an internal error, pinned.

Every test runs a small program eagerly and compiled (on deep copies of the same inputs), compares the results --
values, dtypes, exceptions' types and args -- and the inputs afterwards (a mutation must reach the caller's list,
dict or set), then counts graphs, graph breaks and eager fallbacks.  Budget: ~3 s.
"""
import collections

import pytest
import torch

import minidynamo
from minidynamo.testing import CompileCounter
from minidynamo.testing import check_against_eager as _check
from minidynamo.testing import same as _same

X = torch.arange(3.0)


# --- a. mutating methods of sets, dicts and lists change the object itself ------------------------------------------

def test_set_pop_shrinks_the_set_itself():
    def fn(x):
        s = {3, 4}
        v = s.pop()
        return x + len(s), v, s
    assert _check(fn, X)[1] == 3


def test_set_mutators_on_an_argument_reach_the_caller():
    def fn(x, s):
        v = s.pop()
        s.add(10)
        s.update([11, 12], {13})
        s.difference_update({12})
        s.intersection_update({10, 11, 13, 1, 2, 3})
        s.symmetric_difference_update({1, 99})
        return x * len(s), v
    _check(fn, X, {1, 2, 3})


def test_set_inplace_operators_keep_the_same_set():
    def fn(x, s):
        alias = s
        s |= {7}
        s -= {1}
        s &= {2, 3, 7}
        s ^= {8}
        return x + len(alias), alias is s
    assert _check(fn, X, {1, 2})[1] is True


def test_frozenset_inplace_operator_makes_a_new_frozenset():
    def fn(x):
        fs = frozenset({1, 2})
        g = fs
        fs |= {3}
        return x + 1, fs, g, fs is g
    assert _check(fn, X)[3] is False


def test_set_pop_of_an_empty_set_raises_key_error():
    def fn(x):
        s = {1}
        s.clear()
        try:
            s.pop()
        except KeyError as e:
            return x + 1, e.args
        return x
    _check(fn, X)


def test_container_mutations_around_a_graph_break():
    def fn(x, s, d, xs):
        local = {1, 2, 3}
        local.pop()
        s.add(5)
        d["n"] = 1
        xs.append(10)
        if x.sum() > 0:  # a data-dependent branch: the graph breaks here
            x = x + 1
        local.add(9)
        local |= {10}
        s.discard(1)
        d.clear()
        xs *= 2
        xs.sort(reverse=True)
        return x, local, len(s)
    _check(fn, X, {1, 2}, {"a": 1}, [1, 2], graphs=2, breaks=1)


def test_dict_mutators_on_an_argument():
    def fn(x, d):
        k = d.popitem()
        d.setdefault("z", 5)
        d.setdefault("z", 6)
        d.update(y=1)
        d.update([("w", 2)])
        alias = d
        d |= {"b": 2}
        d |= [("c", 3)]
        return x + len(d), k, d.pop("y"), d.pop("nope", -1), alias is d
    _check(fn, X, {"a": 1, "b": 2})


def test_list_inplace_repeat_keeps_the_same_list():
    def fn(x, xs):
        alias = xs
        xs *= 2
        xs += (8,)
        local = [x]
        other = local
        local *= 3
        return alias is xs, len(alias), other, x + 1
    _check(fn, X, [1, 2])


def test_list_sort_of_mixed_types_raises_type_error():
    def fn(x):
        try:
            [1, "a"].sort()
        except TypeError as e:
            return x + 1, e.args
        return x
    _check(fn, X)


def test_list_sort_by_tensor_keys_breaks_instead_of_failing():
    def fn(x, xs):
        xs.sort(key=lambda t: t.sum())
        return xs
    _check(fn, X, [torch.ones(2), torch.zeros(2)], graphs=0, breaks=1)


def test_defaultdict_keeps_its_data_and_its_factory_through_copy():
    def fn(x):
        d = collections.defaultdict(list, {"a": [1]})
        d["b"].append(2)
        e = collections.defaultdict(int)
        e["a"] += 1
        f = e.copy()
        f["b"] += 2
        return x + 1, dict(d), sorted(f.items()), type(f).__name__
    _check(fn, X)


# --- b. a builtin or method called with arguments it does not take raises CPython's TypeError ----------------------

def test_builtin_with_too_many_arguments_raises_cpythons_type_error():
    def fn(x):
        try:
            return len([1], [2])
        except TypeError as e:
            return x + 1, e.args
    assert _check(fn, X)[1] == ("len() takes exactly one argument (2 given)",)


def test_methods_with_wrong_arguments_raise_cpythons_type_error():
    def fn(x):
        out = []
        for op in (lambda: [].append(1, 2), lambda: {}.get(), lambda: len(), lambda: sorted([2, 1], None)):
            try:
                op()
            except TypeError as e:
                out.append(e.args)
        return x + 1, out
    assert len(_check(fn, X)[1]) == 4


def test_uncaught_wrong_arguments_run_natively():
    def fn(x):
        return x + len([1], [2])
    cnt = CompileCounter()
    with pytest.raises(TypeError, match="exactly one argument"):
        minidynamo.minicompile(fn, backend=cnt)(X)
    assert not [r for r in minidynamo.counters["eager_fallback"] if "internal error" in r]


# --- c. str / repr / format of a caught exception ------------------------------------------------------------------

def test_str_repr_and_fstring_of_a_caught_exception():
    def fn(x):
        try:
            raise ValueError("bad", 3)
        except ValueError as e:
            return x + 1, str(e), repr(e), f"{e}", f"{e!r:>30}", format(e, "")
    _check(fn, X)


def test_str_of_a_key_error_raised_by_a_dict():
    def fn(x):
        try:
            return {"a": x}["b"]
        except KeyError as e:
            return x - 1, str(e), repr(e), ascii(e)
    assert _check(fn, X)[1] == "'b'"


def test_exception_with_its_own_str_is_not_printed_while_tracing():
    class Loud(Exception):
        def __str__(self):
            return "loud"

    def fn(x):
        try:
            raise Loud(1)
        except Loud as e:
            return x, str(e)
    cnt = CompileCounter()
    assert minidynamo.minicompile(fn, backend=cnt)(X)[1] == "loud"


def test_fstring_format_error_is_cpythons():
    def fn(x):
        try:
            return f"{'a':d}"
        except ValueError as e:
            return x + 1, e.args
    _check(fn, X)


# --- d. a tensor compared with a string or None in list.index / count / in -----------------------------------------

def test_list_index_count_and_in_compare_a_tensor_with_a_string_as_false():
    def fn(x):
        return ([x, "a"].index("a"), [x, "a", None].count(None), "a" in [x, "a"], "b" in [x], x in ["a", x],
                [x, (1, 2)].index((1, 2)))
    assert _check(fn, X, graphs=0) == (1, 1, True, False, True, 1)


def test_list_index_of_a_missing_string_next_to_a_tensor_raises_value_error():
    def fn(x):
        try:
            return [x, "a"].index("b")
        except ValueError as e:
            return x + 1, e.args
    _check(fn, X)


def test_in_that_must_compare_two_tensors_first_is_refused():
    def fn(x, y):
        return x in [y, x]  # eager compares y == x first: ambiguous for 3 elements
    cnt = CompileCounter()
    with pytest.raises(RuntimeError, match="ambiguous"):
        minidynamo.minicompile(fn, backend=cnt)(X, X + 1)


# --- round 4 of the fuzzer: wrong answers found -------------------------------------------------------------------

def _raises_stop_at_one(v):
    if v == 1:
        raise StopIteration
    return v


def test_stop_iteration_from_a_mapped_function_ends_the_map():
    def fn(x):
        try:
            return x + 1, list(map(_raises_stop_at_one, range(3)))  # eager: [0]
        except StopIteration:
            return "caught"
    cnt = CompileCounter()
    got = minidynamo.minicompile(fn, backend=cnt)(X)
    assert got[1] == [0]


def test_stop_iteration_inside_a_generator_expression_becomes_runtime_error():
    def fn(x):
        try:
            return x, list(_raises_stop_at_one(v) for v in range(3))  # noqa: C400 - the generator is the point
        except StopIteration:
            return "caught"
        except RuntimeError as e:
            return str(e)
    cnt = CompileCounter()
    assert minidynamo.minicompile(fn, backend=cnt)(X) == "generator raised StopIteration"


def test_a_generator_that_raises_is_not_run_up_front():
    def fn(x):
        try:
            g = (v // 0 for v in [1])  # eager: nothing raised until the generator is asked for an item
        except ZeroDivisionError:
            return "caught"
        return x + 1 if g is not None else x
    cnt = CompileCounter()
    assert torch.equal(minidynamo.minicompile(fn, backend=cnt)(X), X + 1)


class _Slotted:
    __slots__ = ("a", "b")

    def __init__(self, a):
        self.a = a


def test_assigning_an_attribute_that_is_not_a_slot_raises_attribute_error():
    def fn(x):
        s = _Slotted(x)
        s.b = x * 2
        try:
            s.c = 1
            flag = False
        except AttributeError as e:
            flag = e.args
        return s.a + s.b, flag
    assert _check(fn, X)[1] == ("'_Slotted' object has no attribute 'c'",)


def test_assigning_a_missing_slot_on_an_argument_raises_instead_of_failing_after_the_graph():
    def fn(x, s):
        try:
            s.c = 1
            return x
        except AttributeError:
            return x + 1
    cnt = CompileCounter()
    assert torch.equal(minidynamo.minicompile(fn, backend=cnt)(X, _Slotted(1)), X + 1)


class _CallMe:
    def __init__(self, k=2):
        self.k = k

    def __call__(self, x):
        return x * self.k


def test_callable_of_a_user_object_with_dunder_call():
    def fn(x):
        c = _CallMe()
        return c(x), callable(c), callable(x), callable(_CallMe)
    assert _check(fn, X)[1:] == (True, False, True)


def _g(a, b=3):
    return a


def test_getattr_with_a_default_does_not_swallow_a_refusal():
    def fn(x):  # the translator does not read a function's __defaults__: a graph break, not the default
        return x + 1, getattr(_g, "__defaults__", "dflt"), getattr(_g, "nope", "dflt")
    cnt = CompileCounter()
    assert minidynamo.minicompile(fn, backend=cnt)(X)[1:] == ((3,), "dflt")


def test_getattr_of_a_missing_tensor_attribute_gives_the_default_and_is_guarded():
    def fn(x):
        return x + 1, getattr(x, "missing", 5), hasattr(x, "missing"), getattr(x * 2, "missing", 6)
    cnt = CompileCounter()
    compiled = minidynamo.minicompile(fn, backend=cnt)
    assert compiled(X)[1:] == (5, False, 6)
    tagged = torch.arange(3.0)
    tagged.missing = 7  # another call's tensor carries the attribute: the HASATTR guard fails, a recompile
    assert compiled(tagged)[1:] == (7, True, 6)
    assert compiled(X)[1:] == (5, False, 6)


def test_attributes_of_builtin_containers():
    def fn(x):
        d, xs = {"a": 1}, [x]
        out = []
        for obj in ([1], d, (1,), {1}, range(3)):
            try:
                obj.nope  # noqa: B018 - the AttributeError is the point
            except AttributeError as e:
                out.append(e.args)
        return (x + 1, d.__class__ is dict, xs.__class__ is list, getattr(d, "nope", 0), callable(d.keys),
                range(2, 9).start, out)
    _check(fn, X)


def test_attribute_names_and_classes_that_are_not_what_the_builtin_takes():
    def fn(x):
        out = []
        for op in (lambda: getattr(x, [1]), lambda: getattr(1, 2, 3), lambda: hasattr(x, 2), lambda: setattr(x, 2, 3),
                   lambda: isinstance(x, [3]), lambda: isinstance(1, (str, [3])), lambda: max(), lambda: min([])):
            try:
                op()
            except (TypeError, ValueError) as e:
                out.append(e.args)
        return x + 1, out, isinstance(1, (int, [3])), isinstance(1, int | str)
    assert len(_check(fn, X)[1]) == 8


def test_locals_after_a_graph_break_runs_the_frame_eagerly():
    def fn(x):
        a = 1
        y = x + a
        print("break")
        return y, sorted(locals()), sorted(vars()), "a" in dir()
    cnt = CompileCounter()
    assert minidynamo.minicompile(fn, backend=cnt)(X)[1] == ["a", "x", "y"]


def test_zip_without_arguments_is_empty_and_map_without_iterables_raises():
    def fn(x):  # zip() once made an endless iterator while tracing (the process ran out of memory)
        try:
            map(len)
        except TypeError as e:
            return x + 1, list(zip()), e.args
    _check(fn, X)


_P = collections.namedtuple("_P", "a b", defaults=[3])


def test_named_tuple_arguments_bind_as_its_new_does():
    def fn(x):
        out = []
        for op in (lambda: _P(), lambda: _P(1, 2, 3), lambda: _P(1, c=2), lambda: _P(1, a=2)):
            try:
                op()
            except TypeError as e:
                out.append(e.args)
        p, q = _P(x), _P(b=x, a=2)
        return p.a * p.b + q.a, q.b, out
    assert len(_check(fn, X)[2]) == 4


# --- through mininductor: what a graph hands back, and inputs that share memory -----------------------------------

def test_a_constant_tensor_output_is_fresh_on_every_call():
    def fn(x):
        return torch.tensor(2.5), x + 1
    compiled = minidynamo.minicompile(fn, backend="inductor")
    first = compiled(X)[0]
    first.add_(1)  # the caller's in-place op on one call's result must not reach the next call's
    assert compiled(X)[0].item() == 2.5


def test_an_output_that_is_a_view_or_alias_of_an_input_is_another_tensor_object():
    def fn(x):
        return x, x.view(-1), x.detach(), x[:2]
    out = minidynamo.minicompile(fn, backend="inductor")(X)
    assert out[0] is X and all(o is not X for o in out[1:])
    assert all(o.untyped_storage().data_ptr() == X.untyped_storage().data_ptr() for o in out)


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_inputs_sharing_memory_with_a_mutated_input(backend):
    def fn(a, b):
        a.add_(1)
        return b * 2
    compiled = minidynamo.minicompile(fn, backend=backend)
    for make in (lambda a: (a, a), lambda a: (a, a[:]), lambda a: (a[:3], a[1:])):
        base, eager_base = torch.zeros(4), torch.zeros(4)
        assert torch.equal(compiled(*make(base)), fn(*make(eager_base)))
        assert torch.equal(base, eager_base)


def test_a_symbolic_size_in_a_tuple_compares_by_value():
    def fn(x):
        n = x.shape[0]
        return x + 1, n in (4, 5), n in [4.0], [3, 4, 5].index(n) if n in (3, 4, 5) else -1, [n, "a"].count(n)
    compiled = minidynamo.minicompile(fn, backend=CompileCounter(), dynamic=True)
    for size in (4, 8, 5):
        x = torch.arange(float(size))
        assert _same(compiled(x), fn(x))


def test_a_set_that_changes_size_during_a_loop_over_it_raises_runtime_error():
    def fn(x):
        s = {1, 2}
        try:
            for v in s:
                s.add(v + 10)
        except RuntimeError as e:
            return x + 1, e.args, len(s)
        return x
    _check(fn, X)


def test_keys_view_equals_a_set_and_defaultdict_or():
    def fn(x, d):
        dd = collections.defaultdict(int, {"z": 1})
        e = dd | {"b": 2}
        return (x + 1, d.keys() == {"a", "b"}, d.keys() != {"a"}, d.items() == {("a", 1), ("b", 2)},
                d.keys() == ["a", "b"], type(e).__name__, e["b"] + e["z"])
    assert _check(fn, X, {"a": 1, "b": 2})[1:5] == (True, True, True, False)


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
