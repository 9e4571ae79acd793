"""Python builtins on Python values and tensors: len, isinstance, range, enumerate, zip, min/max, sum, sorted..."""
import functools
import operator

import torch

from . import program, t


@program(lambda: ([t(2), t(2), t(2)],))
def len_of_list_and_tensor(xs):
    return xs[0] * len(xs) + len(xs[1]), len(xs)


@program(lambda: (t(3), 2, 1.5))
def isinstance_checks(x, n, f):
    out = x
    if isinstance(x, torch.Tensor):
        out = out + 1
    if isinstance(n, int) and not isinstance(n, bool):
        out = out * n
    if isinstance(f, (int, float)):
        out = out - f
    return out, isinstance(x, (list, tuple))


@program(lambda: (t(4),))
def range_with_start_stop_step(x):
    acc = x
    for i in range(1, 7, 2):
        acc = acc + i
    return acc, list(range(3)), len(range(10, 0, -3))


@program(lambda: ([t(3), t(3), t(3)],))
def enumerate_list(xs):
    out = torch.zeros(3)
    for i, x in enumerate(xs):
        out = out + x * i
    for j, x in enumerate(xs, start=10):
        out = out - j
    return out


@program(lambda: ([t(2), t(2)], [1.0, 2.0], ("a", "b")))
def zip_lists(xs, ws, names):
    return {n: x * w for x, w, n in zip(xs, ws, names)}


@program(lambda: (t(3), 4, 9))
def min_max_on_ints(x, a, b):
    return x * min(a, b) + max(a, b, 5) - max([1, 7, 3]) + min((2, 8))


@program(lambda: (t(3), -4, 2.5))
def abs_round_pow_on_python(x, n, f):
    return x + abs(n) + round(f) + pow(2, 3) + round(3.14159, 2)


@program(lambda: ([t(3), t(3), t(3)],))
def sum_of_tensor_list_and_ints(xs):
    return sum(xs), sum([1, 2, 3]), sum(xs, torch.ones(3)), sum(x.sum() for x in xs)


@program(lambda: (t(2), 3, 2.0, 0))
def int_float_bool_on_python_values(x, n, f, z):
    return x * float(n) + int(f) + int("7") + float("0.5"), bool(z), bool(n), int(True)


@program(lambda: (t(2),))
def sorted_and_reversed(x):
    order = sorted([3, 1, 2])
    rev = list(reversed([1, 2, 3]))
    acc = x
    for k in sorted({"b": 2, "a": 1}, reverse=True):
        acc = acc * 2 if k == "b" else acc + 1
    return acc + order[0] - rev[0], order, rev, tuple(reversed((1, 2)))


@program(lambda: (t(3), [True, False, True]))
def any_all_on_python_bools(x, flags):
    if any(flags):
        x = x + 1
    if all(flags):
        x = x * 100
    return x, any([]), all([])


@program(lambda: (t(2), t(3)))
def list_tuple_dict_constructors(a, b):
    lst = list((a, b))  # noqa: C410
    tup = tuple([a, b])  # noqa: C409
    d = dict(first=a, second=b)  # noqa: C408
    d2 = dict([("x", 1), ("y", 2)])  # noqa: C406
    d3 = dict(zip(["p", "q"], [a, b]))
    return lst, tup, d, d2, d3, list(), tuple()  # noqa: C408


@program(lambda: (t(3),))
def getattr_hasattr_on_objects(x):
    w = getattr(torch, "sin")(x)  # noqa: B009
    has = hasattr(x, "shape") and not hasattr(x, "no_such_attribute")
    return w, has, getattr(x, "ndim"), getattr(x, "missing", 5)  # noqa: B009


@program(lambda: (t(3),))
def callable_and_type_checks(x):
    ok = callable(torch.relu) and type(x) is torch.Tensor and type(3) is int and type(1.0) == float  # noqa: UP003
    return x * 2 if ok else x, type(x) is torch.nn.Parameter


@program(lambda: (t(4), [3, 1, 2]))
def map_and_filter(x, ns):
    doubled = list(map(lambda n: n * 2, ns))  # noqa: C417
    odd = list(filter(lambda n: n % 2 == 1, ns))
    return x * sum(doubled) - len(odd), doubled, odd


@program(lambda: (t(3), [2, 3, 4]))
def functools_reduce_and_operator(x, ns):
    prod = functools.reduce(operator.mul, ns)
    return functools.reduce(lambda a, b: a + b, [x, x, x]) * prod, prod


@program(lambda: (t(2), (1, 2, 3)))
def in_and_not_in(x, tup):
    if 2 in tup and 9 not in tup:
        x = x + 1
    if "a" in {"a": 1}:
        x = x * 3
    return x, 3 in [1, 2]


@program(lambda: (t(3), 5))
def divmod_and_chained_builtins(x, n):
    q, r = divmod(n, 3)
    return x * q + r, max(range(n)), min(abs(-2), 7)


@program(lambda: (t(3),))
def builtin_id_and_is(x):
    y = x
    return x + 1 if y is x else x, x is not None


@program(lambda: (t(4),))
def iter_and_next(x):
    it = iter([1, 2, 3])
    a = next(it)
    b = next(it)
    return x * a + b, list(it)


@program(lambda: ([4, 2, 9], t(2)))
def list_builtin_methods_on_ints(ns, x):
    return x * ns.index(9) + ns.count(2), max(ns) - min(ns), sorted(ns, key=lambda n: -n)


@program(lambda: (t(3),))
def set_of_constants(x):
    s = {1, 2, 3}
    s.add(4)
    return x * len(s), 3 in s, sorted(s)


@program(lambda: (t(2), 3))
def str_int_repr_builtins(x, n):
    key = str(n) + "_" + repr(2)
    return {key: x}, len(key), ord("a"), chr(98)


@program(lambda: (t(2, 3),))
def math_prod_and_shape_builtins(x):
    import math as m
    return x.reshape(m.prod(x.shape)), max(x.shape), min(x.shape), sorted(x.shape, reverse=True)


@program(lambda: (t(3), 2.5))
def float_methods_and_is_integer(x, f):
    return x * f.is_integer() + f.__floor__(), (7).bit_length(), float.fromhex("0x1p-1")


@program(lambda: (t(3),))
def slice_objects_and_range_indexing(x):
    s = slice(0, 2)
    r = range(10)[2:8:2]
    return x[s], list(r), r[1], len(r)


@program(lambda: (t(3), nn_module_like()))
def issubclass_type_name_and_unbound_methods(x, m):
    ok = issubclass(type(m), torch.nn.Module) and type(x).__name__ == "Tensor"
    return torch.Tensor.add(x, 1) if ok else x, getattr(x, "sum")(), torch.is_tensor(x), torch.numel(x)  # noqa: B009


def nn_module_like():
    return torch.nn.Identity()


@program(lambda: (t(2), [5, 6, 7]))
def itertools_helpers(x, ns):
    import itertools
    pairs = list(itertools.product(range(2), repeat=2))
    chained = list(itertools.chain(ns, [8]))
    return x * len(pairs) + sum(chained), list(itertools.accumulate(ns)), list(zip(ns, range(10)))


@program(lambda: (t(2), [1, 2, 3]))
def list_copy_and_math_helpers(x, ns):
    import math
    cp = list(ns)
    cp.append(4)
    return x * math.ceil(2.1) + math.isclose(0.1 + 0.2, 0.3), cp, ns, max(len(cp), 3), sum(ns, 10)


@program(lambda: (t(3), [4, 5, 6]))
def reversed_and_enumerate_combinations(x, ns):
    acc = x
    for i, n in enumerate(reversed(ns)):
        acc = acc + i * n
    return acc, [i for i in reversed(range(3))]
