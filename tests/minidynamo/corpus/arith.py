"""Arithmetic on tensors and Python numbers: operators, promotion, augmented assignment, constant folding."""
import math
import operator

import torch

from . import program, t


@program(lambda: (t(3, 4), t(4)))
def add_broadcast(x, y):
    return x + y


@program(lambda: (t(3, 4), t(3, 4)))
def all_binary_ops(x, y):
    return x + y, x - y, x * y, x / (y.abs() + 1), x ** 2, -x


@program(lambda: (t(5), 3, 2.5))
def tensor_and_python_numbers(x, n, f):
    return x * n + f - n / 2


@program(lambda: (t(4), 3))
def python_arith_folds_to_constants(x, n):
    k = (n * 4 + 1) // 2 - n % 2  # pure Python: no graph ops
    return x * k, k


@program(lambda: (t(4, dtype=torch.int64), t(4, dtype=torch.int64) + 1))
def integer_tensor_ops(a, b):
    return a // b, a % b, a * b - a, a & b, a | b, a ^ b


@program(lambda: (t(4), t(4)))
def comparisons_give_bool_tensors(x, y):
    return x > y, x <= 0.5, x == x, (x > 0) & (y > 0), ~(x > 0)  # noqa: PLR0124


@program(lambda: (t(3, 4), t(4, 5)))
def matmul_operator(a, b):
    return a @ b


@program(lambda: (t(2, 3),))
def augmented_assignment(x):
    y = x * 1
    y += 1
    y *= 2
    y -= x
    y /= 4
    return y


@program(lambda: (t(3, dtype=torch.int32), t(3, dtype=torch.float64)))
def dtype_promotion(a, b):
    return a + b, a * 2.5, a + 1, (a > 1) + a


@program(lambda: (t(4), 2.0))
def python_float_power(x, p):
    return x ** p, p ** 2, 2 ** x


@program(lambda: (t(4),))
def reverse_operators(x):
    return 1 - x, 2 / (x.abs() + 1), 3 * x, 10 // (x.abs() + 1)


@program(lambda: (t(4),))
def math_module_on_constants(x):
    return x * math.pi + math.sqrt(16.0) + math.floor(2.7) - math.log(math.e)


@program(lambda: (t(4), t(4)))
def operator_module_functions(x, y):
    return operator.add(x, y), operator.mul(x, 2), operator.neg(y), operator.truediv(x, 2)


@program(lambda: (t(6),))
def unary_python_builtin_abs_on_tensor(x):
    return abs(x) + abs(-3)


@program(lambda: (t(2, 2), 7, 2))
def int_division_and_modulo_python(x, a, b):
    return x + a // b + a % b + divmod(a, b)[0]


@program(lambda: (t(3, 3),))
def chained_expression(x):
    return ((x + 1) * (x - 1) / 2).exp().sum() * 0.5


@program(lambda: (t(4), True))
def bool_arg_arith(x, flag):
    return x * flag + int(flag)


@program(lambda: (t(4, dtype=torch.float64),))
def float64_ops(x):
    return x * 1e-3 + x.double() ** 3


@program(lambda: (t(3),))
def python_scalar_output_from_constants(x):
    return x + 1, 2 ** 10, 7 / 2, 7 // 2, -7 % 3


@program(lambda: (t(5),))
def rounding_and_clamping_ops(x):
    return x.round(), torch.floor(x), x.ceil(), x.trunc(), x.frac()


@program(lambda: (t(3).abs() + 0.5,))
def precedence_and_negative_powers(x):
    return -2 ** 2, x ** -1, -x ** 2, (-x) ** 2, 2 ** -1, round(2.5), round(3.5), 7 // -2, -7 % 3
