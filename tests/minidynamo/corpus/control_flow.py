"""Control flow on Python values and on (static) shapes: if/for/while, break/continue, nested loops."""
import enum

import torch

from . import program, t


@program(lambda: (t(3), 2))
def if_on_python_int(x, n):
    if n > 1:
        x = x * n
    elif n == 1:
        x = x + 1
    else:
        x = -x
    return x


@program(lambda: (t(3, 4),))
def if_on_shape(x):
    if x.shape[0] > 2:
        x = x.sum(0)
    if x.dim() == 1 and x.size(0) == 4:
        x = x * 2
    return x


@program(lambda: (t(2), [1.0, 2.0, 3.0]))
def for_over_list_of_floats(x, ws):
    for w in ws:
        x = x * w
    return x


@program(lambda: (t(3),))
def while_loop_with_counter(x):
    i = 0
    while i < 4:
        x = x + i
        i += 1
    return x, i


@program(lambda: (t(3),))
def break_and_continue(x):
    for i in range(10):
        if i % 2 == 0:
            continue
        if i > 6:
            break
        x = x * i
    return x


@program(lambda: (t(2),))
def nested_loops(x):
    for i in range(3):
        for j in range(i):
            x = x + i * j
    return x


@program(lambda: (t(4, 3),))
def loop_over_tensor_rows(x):
    acc = torch.zeros(3)
    for row in x:
        acc = acc + row
    return acc


@program(lambda: (t(16),))
def while_on_shape_halving(x):
    while x.shape[0] > 2:
        x = x[: x.shape[0] // 2] + x[x.shape[0] // 2:]
    return x


@program(lambda: (t(3), None, t(3)))
def none_checks(x, maybe, bias):
    if maybe is not None:
        x = x * maybe
    if bias is not None:
        x = x + bias
    return x


@program(lambda: (t(3), False))
def ternary_on_bool_arg(x, flag):
    return x.relu() if flag else x.sigmoid()


@program(lambda: (t(3), 3))
def chained_comparison(x, n):
    if 0 < n < 5:
        x = x + 1
    if not (n == 3):  # noqa: SIM201
        x = x * 100
    return x


@program(lambda: (t(2, 5),))
def early_return(x):
    if x.shape[-1] == 5:
        return x.mean(-1)
    return x


@program(lambda: (t(3),))
def for_else_and_while_else(x):
    for i in range(3):
        if i == 10:
            break
    else:
        x = x + 1
    n = 0
    while n < 2:
        n += 1
    x = x * 2
    return x


@program(lambda: (t(3),))
def try_except_without_raise(x):
    try:
        y = x + 1
    except RuntimeError:
        y = x - 1
    finally:
        y = y * 2
    return y


@program(lambda: (t(3),))
def try_except_catches_python_error(x):
    d = {"a": 1}
    try:
        k = d["b"]
    except KeyError:
        k = 5
    return x * k


@program(lambda: (t(2, 3),))
def assert_on_shape(x):
    assert x.shape[1] == 3, "need three columns"
    assert x.ndim == 2
    return x.sum()


@program(lambda: ([t(2), t(2), t(2)],))
def loop_with_index_and_accumulator_list(xs):
    outs = []
    prev = xs[0]
    for i in range(1, len(xs)):
        prev = prev + xs[i] * i
        outs.append(prev)
    return outs


@program(lambda: (t(4), 5))
def loop_count_from_argument(x, n):
    for _ in range(n):
        x = x * 0.5 + 1
    return x


@program(lambda: (t(3), "relu"))
def branch_on_string_arg(x, act):
    if act == "relu":
        return torch.relu(x)
    elif act == "tanh":
        return torch.tanh(x)
    return x


@program(lambda: (t(2, 3), t(3, 2)))
def branch_on_dtype_and_shapes_equal(a, b):
    if a.dtype == torch.float32 and a.shape == b.T.shape:
        return a + b.T
    return a


@program(lambda: (t(2),))
def match_statement_on_constant(x):
    mode = ("scale", 3)
    match mode:
        case ("scale", k):
            return x * k
        case _:
            return x


@program(lambda: (t(3),))
def try_finally_with_return(x):
    try:
        return x + 1
    finally:
        x = x * 0


@program(lambda: (t(2, 3),))
def isinstance_asserts_and_guards(x):
    assert isinstance(x, torch.Tensor)
    if not isinstance(x.shape[0], int):
        return x
    return x * x.shape[0]


@program(lambda: (t(4), [2, 0, 3]))
def loop_with_continue_on_python_list(x, ks):
    out = x
    for k in ks:
        if not k:
            continue
        out = out * k
        if k == 3:
            break
    return out


@program(lambda: (t(3),))
def while_true_with_break(x):
    i = 0
    while True:
        i += 1
        x = x * 1.5
        if i >= 3:
            break
    return x


@program(lambda: (t(2, 4), 2))
def nested_loops_over_shape_and_int(x, reps):
    acc = torch.zeros(4)
    for r in range(reps):
        for row in range(x.shape[0]):
            acc = acc + x[row] * (r + 1)
    return acc


@program(lambda: (t(3), {"mode": "b", "k": 2}))
def dispatch_table_of_functions(x, cfg):
    table = {"a": torch.sin, "b": lambda v: v * cfg["k"], "c": torch.cos}
    return table[cfg["mode"]](x)


@program(lambda: (t(3),))
def raise_and_catch_inside(x):
    try:
        if x.shape[0] == 3:
            raise ValueError("three")
        y = x
    except ValueError:
        y = x * 3
    return y


class _Scale:
    def __init__(self, log):
        self.log = log

    def __enter__(self):
        self.log.append("enter")
        return 2.0

    def __exit__(self, *exc):
        self.log.append("exit")
        return False


@program(lambda: (t(3), []))
def user_defined_context_manager(x, log):
    with _Scale(log) as k:
        y = x * k
    return y, log


@program(lambda: (t(3),))
def contextlib_nullcontext(x):
    import contextlib
    with contextlib.nullcontext():
        x = x + 1
    return x


def _gen(x, n):
    for i in range(n):
        yield x * i


@program(lambda: (t(2),))
def generator_function_consumed(x):
    return list(_gen(x, 3)), sum(_gen(x, 2)), tuple(_gen(x, 1))


class Mode(enum.Enum):
    A = 1
    B = 2


@program(lambda: (t(2, 3), Mode.B))
def enum_argument_branch(x, mode):
    if mode is Mode.A:
        return x
    return x * mode.value


@program(lambda: (t(3), {"scale": None, "shift": 0}, None))
def or_and_on_python_values_select_objects(x, cfg, bias):
    scale = cfg.get("scale") or 2.0
    shift = cfg["shift"] or x
    b = bias and bias * 2
    return x * scale + shift, b, (None or 0) or "empty", 3 and 4
