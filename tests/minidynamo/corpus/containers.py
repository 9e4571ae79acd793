"""Tuples, lists and dicts: as inputs and outputs, unpacking, iteration, comprehensions, local mutation."""
import collections

import torch

from . import program, t

Pair = collections.namedtuple("Pair", ["a", "b"])


@program(lambda: (t(3), t(3)))
def return_tuple_list_dict(x, y):
    return (x + y, x - y), [x * y], {"sum": x + y, "n": 2}


@program(lambda: ((t(2), (t(2), t(2))),))
def nested_tuple_input(pack):
    a, (b, c) = pack
    return a + b * c


@program(lambda: ({"x": t(3), "scale": 2.0, "inner": {"y": t(3)}},))
def nested_dict_input(d):
    return d["x"] * d["scale"] + d["inner"]["y"], {"out": [d["x"], (d["inner"]["y"],)]}


@program(lambda: ([t(2), t(2), t(2), t(2)],))
def star_unpacking(xs):
    first, *middle, last = xs
    head, *tail = (1, 2, 3)
    return first + last, middle, len(middle) + head, tail


@program(lambda: ({"a": t(2), "b": t(2), "c": t(2)},))
def dict_iteration_items_keys_values(d):
    acc = torch.zeros(2)
    for k, v in d.items():
        acc = acc + v * len(k)
    names = [k for k in d.keys()]  # noqa: SIM118
    total = sum(v.sum() for v in d.values())
    for k in d:
        acc = acc + d[k]
    return acc, names, total


@program(lambda: ([t(3), t(3), t(3)],))
def list_comprehension(xs):
    ys = [x * i for i, x in enumerate(xs) if i != 1]
    zs = [[x + 1, x - 1] for x in ys]
    return ys, zs, [i * i for i in range(4)]


@program(lambda: ([t(2), t(2)],))
def dict_comprehension(xs):
    d = {f"k{i}": x.sum() for i, x in enumerate(xs)}
    inv = {v: k for k, v in {"a": 1, "b": 2}.items()}
    return d, inv


@program(lambda: (t(3),))
def local_list_mutation(x):
    out = []
    out.append(x)
    out.extend([x + 1, x + 2])
    out.insert(0, x * 0)
    last = out.pop()
    out.pop(0)
    out[0] = out[0] * 10
    out.reverse()
    return out, last


@program(lambda: (t(3),))
def local_dict_mutation(x):
    d = {}
    d["a"] = x
    d.update({"b": x * 2, "c": 3})
    d.setdefault("e", x - 1)
    c = d.pop("c")
    del d["a"]
    return d, c, d.get("zz", 7), d.get("b")


@program(lambda: ([t(2), t(2), t(2)],))
def list_slicing_concat_repeat(xs):
    ys = xs[1:] + xs[:1]
    zs = (xs[0],) * 2
    return ys, zs, xs[::-1], xs[-1], [0] * 3


@program(lambda: (Pair(t(2), t(2)),))
def namedtuple_input_and_output(p):
    return Pair(p.a + p.b, p[1] * 2), p._fields


@program(lambda: (t(2),))
def namedtuple_created_inside(x):
    p = Pair(a=x, b=x * 3)
    a, b = p
    return p, a + b


@program(lambda: ([t(2), t(2)], (t(2), 3)))
def list_and_tuple_inputs(xs, tup):
    return [x * tup[1] + tup[0] for x in xs], tuple(xs)


@program(lambda: (t(4),))
def swap_and_multiple_assignment(x):
    a, b = x, x * 2
    a, b = b, a
    c = d = a + b
    return a - b, c is d


@program(lambda: ({"w": t(3), "b": t(3)}, t(3)))
def dict_lookup_with_default_branches(params, x):
    out = x * params["w"]
    if "b" in params:
        out = out + params["b"]
    if "missing" in params:
        out = out * 100
    return out, sorted(params.keys()), len(params)


@program(lambda: ([[t(2), t(2)], [t(2)]],))
def nested_list_iteration(groups):
    acc = []
    for g in groups:
        s = g[0]
        for x in g[1:]:
            s = s + x
        acc.append(s)
    return acc


@program(lambda: (t(2, 2),))
def tuple_methods_and_comparison(x):
    tup = (1, 2, 3, 2)
    return x * tup.count(2) + tup.index(3), (1, 2) < (1, 3), [1, 2] == [1, 2]


@program(lambda: ({"a": t(2)}, {"b": t(2)}))
def dict_merge_and_unpack(d1, d2):
    merged = {**d1, **d2, "c": 1}
    union = d1 | d2
    return merged, union, list(merged.items())[0][0]  # noqa: RUF015


@program(lambda: (t(3), t(3)))
def ordered_dict_and_defaultdict(x, y):
    od = collections.OrderedDict()
    od["y"] = y
    od["x"] = x
    dd = collections.defaultdict(list)
    dd["k"].append(x)
    dd["k"].append(y)
    return list(od.values()), sum(dd["k"])


@program(lambda: ([t(2), t(2), t(2)],))
def list_of_tensors_sort_by_key_python(xs):
    order = sorted(range(len(xs)), key=lambda i: -i)
    return [xs[i] for i in order]


@program(lambda: (t(3),))
def tuple_output_with_python_scalars(x):
    return x.sum(), 3, 2.5, True, None, "done", (1, (2.0, [3]))


@program(lambda: ([1, 2, 3], t(3)))
def list_of_ints_input_arith(ns, x):
    return x * ns[0] + sum(ns) + len(ns), [n * 2 for n in ns]


@program(lambda: ({"layers": [t(2), t(2)], "scale": (2.0, 3.0)},))
def structure_walk(cfg):
    out = []
    for layer, s in zip(cfg["layers"], cfg["scale"]):
        out.append(layer * s)
    return {"outs": out, "count": len(out)}


@program(lambda: (t(2),))
def list_clear_and_copy(x):
    a = [x, x + 1]
    b = a.copy()
    a.clear()
    b.append(x * 5)
    return a, b, list(b)


@program(lambda: ([[t(2), t(2)], [t(2), t(2)]],))
def zip_star_transpose(rows):
    cols = list(zip(*rows))
    return [sum(c) for c in cols], len(cols)


@program(lambda: ({"b": t(2), "a": t(2), "c": t(2)},))
def sorted_dict_items_and_fromkeys(d):
    ordered = [d[k] * i for i, k in enumerate(sorted(d.keys()))]
    return ordered, dict.fromkeys(d, 0), list(d), tuple(sorted(d))


@program(lambda: ([t(2), t(2), t(2)],))
def generator_expressions(xs):
    return tuple(x * i for i, x in enumerate(xs)), any(i > 1 for i in range(3)), max(i * 2 for i in range(4))


@program(lambda: (t(2), [3, 1, 2]))
def walrus_and_comprehension_filter(x, ns):
    big = [n * 2 for n in ns if n * 2 > 2]
    if (total := sum(big)) > 5:
        x = x * total
    return x, big


@program(lambda: ([t(2), t(2)], [t(2), t(2)]))
def enumerate_zip_combined(a, b):
    return [x * i + y for i, (x, y) in enumerate(zip(a, b))]


@program(lambda: ([(1, "b"), (0, "a")], t(2)))
def sort_list_of_tuples(pairs, x):
    pairs = sorted(pairs)
    return {name: x * k for k, name in pairs}, pairs[0]


@program(lambda: (t(3),))
def nested_comprehension_matrix(x):
    grid = [[x * (i + j) for j in range(2)] for i in range(3)]
    flat = [v for row in grid for v in row]
    return len(flat), torch.stack(flat).sum(0), {(i, j): i * j for i in range(2) for j in range(2)}


@program(lambda: ([t(2), t(2), t(2), t(2), t(2)],))
def list_slice_assignment_and_deletion(xs):
    ys = list(xs)
    ys[1:3] = [ys[1] * 10]
    del ys[0]
    ys[-1] = ys[-1] + 1
    return ys, len(ys)


@program(lambda: ((t(2), 4),))
def tuple_in_tuple_out_same_structure(pack):
    x, n = pack
    return (x * n, (n + 1, [x])), pack


@program(lambda: (t(2), t(2)))
def tuple_iadd_and_set_contains(x, y):
    tup = (x,)
    tup += (y, 1)
    seen = {1, 2}
    return tup, len(tup), 2 in seen, 5 in seen


@program(lambda: (t(3), range(1, 4)))
def range_object_as_input(x, r):
    acc = x
    for i in r:
        acc = acc * i
    return acc, len(r), r.start


@program(lambda: ({"a": t(2), "b": t(2)}, t(2)))
def dict_order_after_pop_and_reinsert(d, x):
    local = dict(d)
    v = local.pop("a")
    local["a"] = v + x
    local["c"] = x
    local.popitem()
    cp = local.copy()
    cp["z"] = 1
    return local, list(local), cp


@program(lambda: (t(2),))
def aliased_rows_from_list_multiplication(x):
    rows = [[x]] * 2
    rows[0].append(x + 1)
    rows = rows + [[x * 3]]
    return rows, rows[0] is rows[1]


@program(lambda: ([3, 1, 2], {"a": 1}, t(2)))
def in_place_list_and_dict_methods_on_inputs(ns, d, x):
    ns.sort(key=lambda n: -n)
    ns.remove(2)
    d.clear()
    d["b"] = len(ns)
    s = {1, 2}
    s.discard(2)
    return x * ns[0], s


def _takes_kwargs(**kw):
    kw["extra"] = 1
    return len(kw)


@program(lambda: (t(2), {"a": 1, "b": 2}))
def kwargs_dict_is_a_copy(x, opts):
    n = _takes_kwargs(**opts)
    return x * n, opts


@program(lambda: (t(2), {"a": 1, "b": 2}, {"b": 3, "c": 4}))
def dict_views_are_live_and_reiterable(x, d1, d2):
    ks, items = d1.keys(), d1.items()
    first, again = list(ks), [k for k, _ in items]  # a view iterates again: it is not an iterator
    d1["new"] = 5  # a view sees later insertions
    common, only = d1.keys() & d2.keys(), d1.keys() - {"a"}
    return x * len(ks), first, again, list(ks), sorted(common), sorted(only), "a" in ks, ("a", 1) in items


@program(lambda: (t(2), [1, 2, 3, 4, 5]))
def zip_map_enumerate_take_items_lazily(x, xs):
    log = []

    def double(v):
        log.append(v)
        return v * 2

    it = iter(xs)
    pairs = list(zip(it, it))  # one iterator twice: (1, 2), (3, 4); the 5 is taken and lost
    m = map(double, xs)
    log.append("made")  # map calls `double` only when asked
    head = next(m)
    e = enumerate(iter(xs))
    _, a = next(e)
    return x * head, pairs, list(it), log, a, list(e), list(m)


@program(lambda: (t(2),))
def list_grows_while_iterated_and_frozenset_type(x):
    xs = [1, 2]
    for v in xs:  # the loop sees the items appended inside it
        if len(xs) < 5:
            xs.append(v * 10)
        x = x + v
    fs = frozenset(xs)
    return x, xs, isinstance(fs, frozenset), type(fs | {0}) is frozenset
