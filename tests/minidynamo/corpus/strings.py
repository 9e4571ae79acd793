"""Strings and f-strings on constants: keys, formatting, methods, comparisons that steer the trace."""
import torch

from . import program, t


@program(lambda: ([t(2), t(2), t(2)],))
def fstring_keys(xs):
    return {f"layer{i}": x * i for i, x in enumerate(xs)}


@program(lambda: (t(2), "mean"))
def string_argument_selects_reduction(x, reduction):
    if reduction.upper() == "MEAN":
        return x.mean()
    return x.sum()


@program(lambda: (t(2),))
def string_methods(x):
    s = "a,b,c"
    parts = s.split(",")
    joined = "-".join(parts)
    return x * len(parts), joined, s.replace(",", ""), "  pad ".strip(), s.startswith("a"), "{}+{}".format(1, 2)  # noqa: UP032


@program(lambda: (t(2), 3, 1.5))
def fstring_formatting(x, n, f):
    tag = f"n={n:03d} f={f:.2f} {'yes' if n > 2 else 'no'} {n!r}"
    return x + len(tag), tag


@program(lambda: (t(2),))
def percent_formatting_and_concat(x):
    s = "%s_%d" % ("w", 4)  # noqa: UP031
    return x * 2, s + "!" * 3, s * 2, s[1:], s in "xw_4y"


@program(lambda: (t(3), ("q", "k", "v")))
def string_tuple_iteration(x, names):
    out = {}
    for i, n in enumerate(names):
        out[n.upper() + str(i)] = x + i
    return out


@program(lambda: (t(2),))
def getattr_with_fstring_names(x):
    fns = [getattr(torch, f"{name}") for name in ("sin", "cos")]
    return [f(x) for f in fns]


@program(lambda: (t(2, 3), "x"))
def fstring_with_shapes_and_dtypes(x, prefix):
    key = f"{prefix}_{x.shape[0]}x{x.shape[1]}_{x.dtype}"
    return {key: x.sum(1)}, key.split("_")[1], len(key) > 3


@program(lambda: (t(3), ["alpha", "beta"]))
def string_list_input_methods(x, names):
    caps = [n.capitalize() for n in names]
    longest = max(names, key=len)
    return x * len(longest), caps, ",".join(sorted(names, reverse=True)), longest.endswith("a")


@program(lambda: (t(2),))
def string_comparisons_and_membership(x):
    mode = "train" + "ing"
    if mode == "training" and "rain" in mode and mode != "eval":
        x = x + 1
    return x, mode.find("n"), mode.count("n"), mode[::-1], mode.isalpha()


@program(lambda: (t(2), {"act": "relu", "norm": "none"}))
def config_strings_select_ops(x, cfg):
    act = {"relu": torch.relu, "gelu": torch.nn.functional.gelu}[cfg["act"]]
    y = act(x)
    if cfg["norm"] != "none":
        y = y / y.norm()
    return y, f"{cfg['act']}-{cfg['norm']}"
