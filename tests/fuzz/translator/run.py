"""Differential fuzzing of minidynamo's frame translator: random Python programs, compiled against plain CPython.

    .venv/bin/python tests/fuzz/translator/run.py START COUNT OUT.jsonl [MODE]   # seeds START..START+COUNT-1
    .venv/bin/python tests/fuzz/translator/summary.py OUT.jsonl [...]           # counts, then each bad seed
    .venv/bin/python tests/fuzz/translator/replay.py SEED MODE [PROGRAM.py]     # one seed, tracebacks printed
    .venv/bin/python tests/fuzz/translator/generate.py SEED                     # print seed SEED's program

MODE is ``eager`` (``minicompile(f)``), ``aot`` (``backend="aot_eager"``), ``full`` / ``fullaot`` (the same with
``fullgraph=True``) or ``mix`` (the default: each seed takes one of the four from ``seed % 6``). Not collected by
pytest (no ``test_`` file); a developer's tool, run by hand (60 seeds take about 10 s on a CPU). Each seed is a
program from ``generate.py``: one function over two small tensors, a list, a dict, an object and an int, with
graph breaks, exceptions, context managers, generators, closures, loops, match, globals and module mutation. The
program is written to a temp directory (``FUZZ_PROGS`` to choose another), imported twice and run three times
(two input variants, then the first again, so guards and recompiles are exercised): once plainly, once compiled.
Compared, as JSON summaries: the return value (tensor values, dtypes, shapes, requires_grad), the exception
raised (type and message), the input gradients after ``backward()`` when the program asks for grad, the printed
output, the inputs afterwards (mutation), the grad mode on exit, the program's globals (``LOG``, ``G``, ``GC``,
``GV``) and its ``nn.Module``'s state. Under ``fullgraph=True`` a graph break must raise before any side effect,
naming the program's file and line. In every mode a fallback to eager for an internal error
(``MINICOMPILE_RAISE_INTERNAL=1`` is set, so it raises instead) counts as bad. ``OUT.jsonl`` is appended to: a
``{"start": seed}`` line before each seed (so ``summary.py`` names a seed that crashed or hung the runner) and its
result after; replay a bad seed with ``replay.py SEED MODE``, or edit the program it wrote and pass the file.

Seeds from 20,000,000 on come from the third generator (``generate_extra.py``), whose lambdas and comprehensions
make cells of ``t`` often -- and read them unbound after a break (a resume function raised ``NameError`` where
CPython raises ``UnboundLocalError`` until [Note: unbound cells in resume functions]).
The cyclic garbage collector is off during each call and runs after it (``_no_cycle_collector``): when it runs
is not part of Python's semantics, and eager and compiled code would otherwise free a cycle, and run a
finaliser, at different points.
"""
import contextlib
import gc
import importlib.util
import io
import json
import math
import os
import re
import sys
import tempfile
import traceback

os.environ.setdefault("MINICOMPILE_RAISE_INTERNAL", "1")
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", ".."))
import torch

import minidynamo
from minidynamo.exc import Unsupported
from tests.fuzz.translator.generate import generate

MODES = ["eager", "aot", "eager", "aot", "full", "fullaot"]  # mix: seed % 6
PROGS = os.environ.get("FUZZ_PROGS") or tempfile.mkdtemp(prefix="translator_fuzz_")
os.makedirs(PROGS, exist_ok=True)
_mod_n = [0]


def load(path):
    _mod_n[0] += 1
    spec = importlib.util.spec_from_file_location(f"fz_{_mod_n[0]}", path)
    m = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(m)
    return m


def inputs(mod, variant, grad):
    if variant == 0:
        x = torch.tensor([0.5, -1.0, 2.0, 0.25])
        y = torch.tensor([1.0, -2.0, 0.5, 3.0])
        lst, d, n = [1, 2, 3], {"a": 1, "b": -2}, 3
    else:
        x = torch.tensor([1.5, 0.3, -0.7, 2.0, -0.1])
        y = torch.tensor([-1.0, 2.0, 0.25, 1.0, 4.0])
        lst, d, n = [4, 5], {"b": 3}, 4
    if grad:
        x.requires_grad_(True)
        if grad == 2:
            y.requires_grad_(True)
    return [x, y, lst, d, mod.Obj(), n]


def norm(v, depth=0):
    """A JSON-able, comparable summary."""
    if isinstance(v, torch.Tensor):
        t = v.detach()
        return ["T", str(t.dtype), list(t.shape), bool(v.requires_grad),
                [round(a, 4) if not math.isnan(a) else "nan" for a in t.double().flatten().tolist()]]
    if isinstance(v, (list, tuple)):
        return [type(v).__name__] + [norm(a, depth + 1) for a in v]
    if isinstance(v, dict):
        return ["dict"] + [[repr(k), norm(a, depth + 1)] for k, a in v.items()]
    if isinstance(v, (set, frozenset)):
        return ["set", sorted(repr(a) for a in v)]
    if hasattr(v, "__dict__") and not callable(v) and depth < 3:
        return ["obj", type(v).__name__, norm(vars(v), depth + 1)]
    if isinstance(v, str):
        return re.sub(r"fz_\d+", "fz", v)
    if isinstance(v, (int, float, bool, type(None))):
        return v
    return repr(type(v))


@contextlib.contextmanager
def _no_cycle_collector():
    """Run a call with the cyclic garbage collector off, then collect.

    Cyclic garbage is freed when the collector next runs, which Python does not promise at any point. An exception
    swallowed by a ``with`` makes such a cycle (value -> traceback -> the context manager's generator frame ->
    ``__exit__``'s frame -> value), and it holds the frame the exception was raised in, so that frame's locals
    outlive the call. Compiled code runs the same statements in other frames (resume functions) with other
    allocation counts, so a generator local could be finalised, and its ``finally`` append to ``LOG``, at a
    different point than in CPython (seen on Python 3.12, whose collector runs at the eval breaker). With the
    collector off during the call and run once after it, cyclic garbage is freed at the same point in both; what
    reference counting frees is still compared in order."""
    gc.disable()
    try:
        yield
    finally:
        gc.enable()
        gc.collect()


def run_once(fn, mod, variant, grad):
    args = inputs(mod, variant, grad)
    out = io.StringIO()
    rec = {}
    with contextlib.redirect_stdout(out), _no_cycle_collector():
        try:
            r = fn(*args)
            rec["ret"] = norm(r)
            if grad:
                ts = [v for v in (r if isinstance(r, tuple) else (r,))
                      if isinstance(v, torch.Tensor) and v.requires_grad]
                if ts:
                    try:
                        sum(v.sum() for v in ts).backward()
                        rec["grad"] = [norm(args[0].grad), norm(args[1].grad)]
                    except Exception as e:  # noqa: BLE001
                        rec["grad"] = ["EXC", type(e).__name__, str(e)]
        except Unsupported as e:
            rec["unsupported"] = str(e)
        except Exception as e:  # noqa: BLE001
            rec["exc"] = [type(e).__name__, re.sub(r"fz_\d+", "fz", str(e))]
            if "minidynamo" in "".join(traceback.format_tb(e.__traceback__)):
                rec["tb"] = traceback.format_exc()[-3000:]
    rec["grad_mode"] = torch.is_grad_enabled()
    torch.set_grad_enabled(True)
    rec["stdout"] = out.getvalue()
    rec["args"] = norm(args[:2] + args[2:])
    rec["LOG"] = norm(mod.LOG)
    rec["G"] = norm(mod.G)
    rec["GC"] = mod.GC
    rec["GV"] = mod.GV
    net = mod.NET
    rec["NET"] = [net.count, net.scale, norm(net.calls), getattr(net, "extra", None),
                  norm(net.lin.weight.grad), norm(net.lin.bias.grad)]
    return rec


def diff(a, b):
    keys = sorted(set(a) | set(b) - {"tb"})
    return [k for k in keys if k != "tb" and a.get(k) != b.get(k)]


def check(seed, mode):
    src, grad = generate(seed)
    path = os.path.join(PROGS, f"p{seed}.py")
    with open(path, "w") as fh:
        fh.write(src)
    minidynamo.reset()
    E = load(path)
    C = load(path)
    if mode in ("full", "fullaot"):
        cfn = minidynamo.minicompile(C.f, backend="eager" if mode == "full" else "aot_eager", fullgraph=True)
    else:
        cfn = minidynamo.minicompile(C.f, backend="aot_eager" if mode == "aot" else "eager")
    res = {"seed": seed, "mode": mode, "grad": grad, "bad": []}
    full = mode in ("full", "fullaot")
    for variant in (0, 1, 0) if not full else (0, 1):
        e = run_once(E.f, E, variant, grad)
        c = run_once(cfn, C, variant, grad)
        if full and "unsupported" in c:
            lineok = os.path.basename(path) + ":" in c["unsupported"]
            if not lineok:
                res["bad"].append({"variant": variant, "why": "fullgraph error without file:line",
                                   "msg": c["unsupported"]})
            if variant == 0 and (c["stdout"] or c["LOG"] != ["list"] or c["G"] != ["list"] or c["GV"] or c["GC"]):
                res["bad"].append({"variant": variant, "why": "fullgraph raised after side effects",
                                   "c": c})
            break
        dk = diff(e, c)
        if dk:
            res["bad"].append({"variant": variant, "keys": dk, "e": {k: e.get(k) for k in dk},
                               "c": {k: c.get(k) for k in dk}, "tb": c.get("tb")})
            break
    fb = dict(minidynamo.counters["eager_fallback"])
    internal = [k for k in fb if "internal" in k]
    if internal:
        res["bad"].append({"why": "internal fallback", "reasons": internal})
    res["breaks"] = sum(minidynamo.counters["graph_break"].values())
    res["fallbacks"] = list(fb)
    return res


def main():
    if len(sys.argv) not in (4, 5) or (len(sys.argv) == 5 and sys.argv[4] not in [*MODES, "mix"]):
        sys.exit(__doc__.split("\n\n")[1] + "\n\nMODE: eager | aot | full | fullaot | mix")
    start, count, outfile = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
    mode = sys.argv[4] if len(sys.argv) > 4 else "mix"
    print("programs in", PROGS, file=sys.stderr)
    with open(outfile, "a") as fh:
        for seed in range(start, start + count):
            m = mode if mode != "mix" else MODES[seed % 6]
            fh.write(json.dumps({"start": seed, "mode": m}) + "\n")
            fh.flush()
            try:
                res = check(seed, m)
            except Exception:  # noqa: BLE001
                res = {"seed": seed, "mode": m, "bad": [{"why": "runner", "err": traceback.format_exc()[-2000:]}]}
            fh.write(json.dumps(res, default=str) + "\n")
            fh.flush()


if __name__ == "__main__":
    main()
