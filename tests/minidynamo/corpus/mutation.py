"""Mutation the caller can see: input lists/dicts/tensors/objects changed in place (compared after every run)."""
import torch

from . import program, t


@program(lambda: ([t(2)], t(2)))
def append_to_input_list(xs, y):
    xs.append(y * 2)
    xs.append(3)
    return len(xs)


@program(lambda: ({"a": t(2)}, t(2)))
def setitem_on_input_dict(d, x):
    d["b"] = d["a"] + x
    d["a"] = x
    d["n"] = len(d)
    return d["b"].sum()


@program(lambda: (t(3),))
def inplace_on_input_tensor(x):
    x.mul_(2)
    x.add_(1)
    return x.sum()


@program(lambda: (t(3, 3),))
def setitem_on_input_tensor(x):
    x[0] = 0.0
    x[:, -1] = x[:, 0] + 1
    return x


@program(lambda: ([t(2), t(2), t(2)],))
def pop_and_clear_input_list(xs):
    last = xs.pop()
    first = xs.pop(0)
    out = last + first
    xs.insert(0, out)
    return out, len(xs)


@program(lambda: ({"a": t(2), "b": t(2)},))
def delete_key_from_input_dict(d):
    v = d.pop("a")
    del d["b"]
    d["c"] = v * 2
    return v


@program(lambda: ({"outer": {"inner": [t(2)]}},))
def nested_container_mutation(state):
    state["outer"]["inner"].append(state["outer"]["inner"][0] * 3)
    state["outer"]["count"] = 2
    return state["outer"]["inner"][-1]


@program(lambda: ([t(2)], t(2)))
def extend_and_setitem_on_input_list(xs, y):
    xs.extend([y, y + 1])
    xs[0] = xs[0] * 10
    return xs[1:]


@program(lambda: (t(2), t(2)))
def inplace_through_a_view(x, y):
    v = x.view(2)
    v.add_(y)
    return x


@program(lambda: ([t(2)], [t(2)]))
def return_input_list_after_mutation(a, b):
    a += b  # list += list mutates `a` in place
    b.sort(key=lambda v: 0)
    return a


@program(lambda: (t(4),))
def mutation_of_a_local_then_return(x):
    y = torch.zeros(4)
    y[1:3] = x[1:3]
    y.add_(x)
    return y, x


@program(lambda: (t(2, 2), t(2, 2)))
def out_of_place_then_in_place_chain(a, b):
    c = a + b
    a.copy_(c)
    b.zero_()
    return c


@program(lambda: ([], t(2)))
def log_values_into_input_list(log, x):
    for i in range(3):
        x = x * 2
        log.append((i, x))
    return x


@program(lambda: (t(3), t(2, 3)))
def return_inputs_and_views_of_inputs(x, y):
    return x, y.view(6), y[0], x + 1, y.t()


@program(lambda: (t(4),))
def inplace_then_return_the_input(x):
    x.sub_(1)
    return x


class _Box:
    def __init__(self, **kw):
        self.__dict__.update(kw)


@program(lambda: (_Box(items=[t(2)], tag="a", gone=1), t(2)))
def mutate_object_list_attribute_setattr_delattr(box, x):
    box.items.append(x * 3)
    setattr(box, "tag", box.tag + "b")  # noqa: B010
    del box.gone
    box.total = sum(box.items)
    return len(box.items)


@program(lambda: ([t(2)],))
def mutation_through_an_alias(xs):
    alias = xs
    alias.append(alias[0] + 1)
    alias[0] = alias[0] * 0
    return xs[1]


@program(lambda: (t(3, 4),))
def inplace_on_views_of_an_input(x):
    x[0].add_(1)
    x.view(-1)[5] = 5.0
    x[:, 1].mul_(0)
    return x.sum()


@program(lambda: ({"n": 1, "xs": [t(2)]},))
def counters_in_input_dict(state):
    state["n"] += 1
    state["xs"] += [state["xs"][0] * state["n"]]
    return state["xs"][-1]


@program(lambda: (t(2), []))
def return_the_mutated_input_list(x, out):
    out.append(x + 1)
    return out


@program(lambda: (t(3), [t(3)]))
def augmented_assignment_mutates_input_tensors(x, xs):
    x += 1  # Tensor.__iadd__: in place, the caller's tensor changes
    xs[0] *= 2
    y = x
    y -= 0.5  # y aliases x
    return x + xs[0]


class _Counted:
    instances = 0

    def __init__(self):
        type(self).instances += 1


@program(lambda: (t(2),), globals_=lambda: {"_COUNTED_BEFORE": _reset_counted()})
def class_attribute_mutation(x):
    _Counted()
    _Counted()
    return x * _Counted.instances


def _reset_counted():
    _Counted.instances = 0
    return 0
