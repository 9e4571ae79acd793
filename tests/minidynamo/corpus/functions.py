"""Functions: closures, nested functions, lambdas, defaults, *args/**kwargs, keyword-only args, inlining depth."""
import functools

import torch

from . import program, t


def _helper_level3(x):
    return x.sin() + 1


def _helper_level2(x, k=2):
    return _helper_level3(x) * k


def _helper_level1(x):
    return _helper_level2(x) + _helper_level2(x, k=3)


@program(lambda: (t(3),))
def inline_three_levels(x):
    return _helper_level1(x) - x


@program(lambda: (t(3), 2.0))
def closure_over_argument(x, scale):
    def scaled(y):
        return y * scale

    return scaled(x) + scaled(x + 1)


@program(lambda: (t(3),))
def lambda_inline_and_passed(x):
    sq = lambda v: v * v
    apply = lambda f, v: f(v) + 1
    return apply(sq, x), (lambda: x.cos())()  # noqa: PLC3002


def _with_defaults(x, a=1, b=2.0, *, c=3, d=None):
    out = x * a + b - c
    return out if d is None else out + d


@program(lambda: (t(3),))
def default_and_keyword_only_args(x):
    return _with_defaults(x), _with_defaults(x, 5), _with_defaults(x, b=0.5, c=1), _with_defaults(x, d=x)


def _varargs(*xs, **kw):
    total = sum(xs)
    for k in sorted(kw):
        total = total * kw[k]
    return total, len(xs), tuple(kw)


@program(lambda: (t(2), t(2), t(2)))
def star_args_and_kwargs(a, b, c):
    args = (a, b)
    kwargs = {"z": 2, "y": 3}
    return _varargs(a, b, c, w=0.5), _varargs(*args, **kwargs), _varargs()


@program(lambda: (t(2),), kwargs=lambda: {"scale": 3.0, "shift": t(2)})
def called_with_kwargs(x, *, scale, shift=None):
    return x * scale + (0 if shift is None else shift)


@program(lambda: (t(2), t(2), t(2)))
def top_level_varargs(*xs):
    return torch.stack(xs).sum(0), len(xs)


@program(lambda: (t(3),))
def nonlocal_counter_in_closure(x):
    count = 0

    def bump(y):
        nonlocal count
        count += 1
        return y + count

    x = bump(x)
    x = bump(x)
    return x, count


def _make_adder(n):
    def add(x):
        return x + n

    return add


@program(lambda: (t(3),))
def closure_factory_called_inside(x):
    add2 = _make_adder(2)
    add5 = _make_adder(5)
    return add5(add2(x))


_ADD7 = _make_adder(7)


@program(lambda: (t(3),))
def global_closure_object(x):
    return _ADD7(x) * 2


@program(lambda: (t(4),))
def functools_partial(x):
    f = functools.partial(torch.clamp, min=-0.1)
    g = functools.partial(_with_defaults, b=10.0)
    return f(x, max=0.1), g(x)


def _recursive_sum(x, n):
    if n == 0:
        return x
    return _recursive_sum(x + n, n - 1)


@program(lambda: (t(2),))
def recursion_of_fixed_depth(x):
    return _recursive_sum(x, 4)


def _twice(f):
    @functools.wraps(f)
    def wrapper(*args, **kwargs):
        return f(f(*args, **kwargs))

    return wrapper


@_twice
def _inc(x):
    return x + 1


@program(lambda: (t(3),))
def user_decorator_with_wraps(x):
    return _inc(x) * 2


def _higher_order(f, xs):
    return [f(x) for x in xs]


@program(lambda: ([t(2), t(2)],))
def function_passed_as_argument(xs):
    return _higher_order(torch.relu, xs), _higher_order(lambda v: v * 2, xs)


@program(lambda: (t(3), (lambda v: v * 4)))
def function_as_input(x, f):
    return f(x) + 1


def _returns_many(x):
    return x, x * 2, {"k": x * 3}


@program(lambda: (t(3),))
def unpack_helper_results(x):
    a, b, d = _returns_many(x)
    return a + b + d["k"]


@program(lambda: (t(3),))
def nested_def_with_default_capturing_value(x):
    fs = []
    for i in range(3):
        def f(v, i=i):
            return v * i
        fs.append(f)
    return [f(x) for f in fs]


@program(lambda: (t(2, 3),))
def keyword_arguments_to_torch_and_helpers(x):
    return torch.sum(x, dim=1, keepdim=True), _helper_level2(x=x, k=4)


@program(lambda: (t(3),))
def early_return_in_helper(x):
    def pick(v, neg):
        if neg:
            return -v
        return v

    return pick(x, True) + pick(x, False)


@program(lambda: (t(3),))
def closures_three_levels_deep(x):
    a = 2

    def outer(y):
        b = 3

        def middle(z):
            def inner(w):
                return w * a + b
            return inner(z) - a
        return middle(y) * b
    return outer(x)


@program(lambda: (t(3),))
def late_binding_closures_in_loop(x):
    fs = [lambda v: v * i for i in range(3)]  # all see the last i, as in eager  # noqa: B023
    return [f(x) for f in fs]


@program(lambda: (t(3),))
def closure_mutating_enclosing_list(x):
    acc = []

    def push(v):
        acc.append(v * 2)

    push(x)
    push(x + 1)
    return acc


_DEFAULT_SCALES = [1.0, 2.0]


def _uses_mutable_default(x, scales=_DEFAULT_SCALES):
    return [x * s for s in scales]


@program(lambda: (t(2),))
def mutable_default_argument_read(x):
    return _uses_mutable_default(x)


@torch.no_grad()
def _no_grad_helper(x):
    return x * 2


@program(lambda: (t(3, requires_grad=True),), grad=True, exact_ops=False,
         relax="grad-mode switches are call_function ops in real Dynamo's graph")
def no_grad_decorated_helper(x):
    return x * _no_grad_helper(x)


@program(lambda: (t(2),), kwargs=lambda: {"b": t(2), "c": 3})
def args_kwargs_forwarding(a, **kw):
    def inner(a, b, c=1):
        return a * c + b
    return inner(a, **kw), sorted(kw)


@program(lambda: (t(3),))
def function_attributes_and_names(x):
    def helper(v):
        return v + 1
    return helper(x), helper.__name__, _helper_level3.__name__


@program(lambda: (t(3),))
def lambda_default_captures_tensor(x):
    y = x * 2
    f = lambda v, w=y: v + w
    return f(x), f(x, 1)


@program(lambda: (t(2, 3),))
def imported_function_aliases(x):
    from torch import cat as concat
    from torch.nn.functional import relu as r
    return concat([r(x), x], dim=0), r(-x)


def _raises_for_negative(n):
    if n < 0:
        raise ValueError("negative")
    return n


@program(lambda: (t(2), -1))
def exception_raised_in_callee_caught_in_caller(x, n):
    try:
        k = _raises_for_negative(n)
    except ValueError:
        k = 10
    return x * k


def _accumulate(x, acc=[]):  # noqa: B006 - the mutable default is the point
    acc.append(1)
    return x * len(acc)


def _fresh_default():
    """Empty the default list in place (each run starts from the same state) and expose it as a global."""
    default = _accumulate.__defaults__[0]
    default.clear()
    return default


@program(lambda: (t(2),), globals_=lambda: {"_ACC_DEFAULT": _fresh_default()})
def mutable_default_argument_mutated(x):
    return _accumulate(x) + _accumulate(x)


@program(lambda: (t(2), [[1, 2], [3, 4, 5]]))
def for_loop_with_star_targets(x, rows):
    out = x
    for first, *rest in rows:
        out = out * first + len(rest)
    return out


@program(lambda: (t(3),))
def del_local_and_reuse_name(x):
    y = x + 1
    z = y * 2
    del y
    y = z - 1
    return y


def _make_counter():
    count = 0

    def step(x):
        nonlocal count
        count += 1
        return x * count, count

    return step


@program(lambda: (t(2),), factory=True)
def closure_cell_mutated_across_calls():
    return _make_counter()


@program(lambda: (t(2),))
def default_evaluated_at_definition_time(x):
    k = 2

    def g(v, k=k):
        return v * k

    k = 5
    return g(x), k


@program(lambda: (t(2), []))
def try_finally_side_effect_order(x, log):
    try:
        log.append("body")
        y = x + 1
    finally:
        log.append("finally")
    log.append("after")
    return y
