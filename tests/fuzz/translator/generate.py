"""The translator fuzzer's program generator: ``generate(seed)`` returns ``(source, grad)``.

    .venv/bin/python tests/fuzz/translator/generate.py SEED      # print seed SEED's program

Extends ``generate_base`` (the first generator's statements) with match, walrus, *args/**kwargs, an nn.Module with
attribute and buffer mutation, a global scalar, closable generators, a swallowing ``__exit__``, nested grad modes,
data-dependent while loops, container mutation and nested closures. A seed always gives the same program.
"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", ".."))
from tests.fuzz.translator import generate_base
from tests.fuzz.translator.generate_base import Gen as BaseGen

PRELUDE = generate_base.PRELUDE + '''

GV = 0


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)
        with torch.no_grad():
            self.lin.weight.copy_(torch.eye(4) * 0.5)
            self.lin.bias.fill_(0.1)
        self.register_buffer("calls", torch.zeros(1))
        self.count = 0
        self.scale = 1.0

    def forward(self, t):
        self.count += 1
        self.calls.add_(1)
        if t.shape[0] == 4:
            return self.lin(t) * self.scale
        return t * self.scale


NET = Net()


def va(*args, **kw):
    return len(args) + sum(v for v in kw.values() if isinstance(v, int))


def va_t(t, *rest, scale=1, **kw):
    for r in rest:
        t = t + r
    return t * scale + len(kw)


def gen_fin(n):
    LOG.append("gf start")
    try:
        for i in range(n):
            yield i
    finally:
        LOG.append("gf fin")


def gen_from(t):
    yield from gen_a(2)
    yield int(t.numel())


class Swallow:
    def __init__(self, tag):
        self.tag = tag

    def __enter__(self):
        LOG.append(("SW enter", self.tag))
        return self.tag

    def __exit__(self, et, ev, tb):
        LOG.append(("SW exit", self.tag, et.__name__ if et else None))
        return True


class Point:
    __match_args__ = ("px", "py")

    def __init__(self, px, py):
        self.px = px
        self.py = py
'''


class Gen(BaseGen):
    PRELUDE = PRELUDE
    GLOBALS = "GC, GV"
    RETURNS = (*BaseGen.RETURNS, "return {'t': t, 'acc': acc, 'gv': GV}", "return [t, NET.count], acc")

    def tensor_stmt(self):
        if self.r.random() < 0.35:
            return self.choice([
                "t = NET(t) if t.shape[0] == 4 else t + NET(t[:1]).sum()",
                "t = va_t(t, x, y, scale=2)",
                "t = va_t(t, *[x, y], **{'q': 1})",
                "t = t + va(*lst, **{'u': acc})",
                "t = t + (w := t.sum())",
                "t = torch.stack([t, x]).sum(0)",
                "t = t * NET.scale",
                "t = t + sum(gen_from(t))",
            ])
        return super().tensor_stmt()

    def inplace_stmt(self):
        if self.r.random() < 0.3:
            return self.choice([
                "NET.calls.add_(t.sum().detach())",
                "NET.count += 1",
                "NET.scale = NET.scale * 0.5 + acc",
                "NET.extra = acc",
                "obj.t = t.detach() * 2",
                "obj.b = [acc, len(lst)]",
                "del d['a']",
                "lst.insert(0, acc)",
                "lst[1:2] = [acc, acc]",
                "d.setdefault('q', []).append(acc)",
                "obj.__dict__['c'] = acc",
            ])
        return super().inplace_stmt()

    def break_stmt(self):
        if self.r.random() < 0.3:
            return self.choice([
                "if (m := t.sum().item()) > 0: acc += 1",
                "acc += int(bool(t.max() > 1))",
                "print('t', t.shape, acc, sep='|')",
                "print(f'{acc=}')",
                "GV += int(t[0].item() > 0)",
                "NET.count += int(t.sum() > 0)",
                "acc += t.argmax().item()",
                "acc += sum(int(v > 0) for v in t.tolist())",
                "torch._dynamo.graph_break() if False else minidynamo.graph_break()",
            ])
        return super().break_stmt()

    def py_stmt(self):
        if self.r.random() < 0.3:
            return self.choice([
                "GV += acc",
                "acc += GV % 5",
                "acc += va(1, 2, *lst, k=3)",
                "acc += va(**d) if all(isinstance(v, int) for v in d.values()) else 0",
                "acc += (q := acc + 1) * 2 - q",
                "acc += len([w for v in lst if (w := v * 2) > 2])",
                "acc += NET.count",
                "acc += len(obj.__dict__)",
                "acc += sum(gen_fin(2))",
                "acc, n2 = divmod(acc + 7, 3)",
                "first, *rest = lst or [0]; acc += first + len(rest)",
                "acc += hash((acc, 1)) % 3",
            ])
        return super().py_stmt()

    def raise_stmt(self):
        if self.r.random() < 0.3:
            return self.choice([
                "t = t + torch.ones(2, 2, 2)",
                "t = torch.mm(t, t)",
                "t = t.expand(3, 9)",
                "acc += int(torch.ones(3).item())",
                "t = torch.cat([t, torch.ones(2, 2)])",
                "acc += va(*acc)",
                "acc += va(**lst)",
                "t = NET(torch.ones(3, 4, 5))",
                "t.requires_grad_(True) if t.grad_fn is None else t.backward()",
                "g = gen_fin(3); next(g); raise ValueError('after gen')",
                "acc += GV.missing",
            ])
        return super().raise_stmt()

    def leaf(self):
        line = super().leaf()
        if self.in_fn and line.startswith("GV"):
            return "G.append(1)"
        return line

    def stmt(self):
        if self.depth < 3 and self.r.random() < 0.12:
            self.depth += 1
            getattr(self, "c_" + self.choice(["match", "swallow", "gradnest", "dwhile", "closure2", "genclose"]))()
            self.depth -= 1
            return
        super().stmt()

    def emit_lines(self, s):
        for part in s.split("\n"):
            self.emit(part)

    def c_match(self):
        subj = self.choice(["acc", "(acc, len(lst))", "lst", "d", "Point(acc, n)", "t.shape[0]",
                            "int(t.sum().item() > 0)", "obj"])
        self.emit(f"match {subj}:")
        self.ind += 1
        pats = self.choice([
            ["0", "1 | 2", "int(v) if v > 5"],
            ["(0, _)", "(a, b) if a > b", "(a, 3)"],
            ["[]", "[v]", "[v, *more]"],
            ["{'a': v}", "{'b': v, **rest}", "{}"],
            ["Point(0, py)", "Point(px=px, py=4)", "Point(px, py) if px > py"],
            ["4", "5", "int()"],
            ["0", "1"],
            ["Obj(a=1)", "Obj(a=v)"],
        ])
        for p in pats:
            self.emit(f"case {p}:")
            self.body(1, 2)
        if self.r.random() < 0.6:
            self.emit("case _:")
            self.body(1, 1)
        self.ind -= 1

    def c_swallow(self):
        self.emit(self.choice(["with Swallow('s%d') as sv:", "with Swallow('s%d'), cm_fin('f%d'):"]).replace(
            "%d", str(self.r.randint(0, 9))))
        self.body()

    def c_gradnest(self):
        outer, inner = self.choice([("torch.no_grad()", "torch.enable_grad()"),
                                    ("torch.enable_grad()", "torch.no_grad()"),
                                    ("torch.set_grad_enabled(False)", "torch.set_grad_enabled(True)"),
                                    ("torch.no_grad()", "torch.no_grad()")])
        self.emit(f"with {outer}:")
        self.ind += 1
        self.block(self.r.randint(0, 1))
        self.emit(f"with {inner}:")
        self.body()
        self.block(self.r.randint(0, 1))
        self.ind -= 1

    def c_dwhile(self):
        k = f"kw{self.depth}"
        self.emit(f"{k} = 0")
        cond = self.choice(["t.sum() > -5", "bool(t[0] < 100)", "acc < 20", "x.max() > 0"])
        self.emit(f"while {k} < 3 and {cond}:")
        self.ind += 1
        self.emit(f"{k} += 1")
        self.in_loop += 1
        self.block(self.r.randint(1, 2))
        if self.r.random() < 0.5:
            cond = self.choice(["acc % 2", "t.sum() < 0", f"{k} == 2"])
            self.emit(f"if {cond}:")
            self.ind += 1
            self.emit(self.choice(["break", "continue"]))
            self.ind -= 1
        self.in_loop -= 1
        self.ind -= 1

    def c_closure2(self):
        self.closure_n += 1
        n = self.closure_n
        self.emit_lines(self.choice([
            "cnt%d = [0]\ndef bump%d(v):\n    cnt%d[0] += 1\n    return v + cnt%d[0]\nt = bump%d(t)\nacc += cnt%d[0]",
            "def mk%d(k):\n    def add(v):\n        return v * k + acc\n    return add\nt = mk%d(2)(t)",
            ("sc%d = acc\ndef upd%d():\n    nonlocal sc%d\n    sc%d += 1\n    print('upd', sc%d)\n    return sc%d\n"
            "acc += upd%d() + sc%d"),
            "fs%d = [lambda v, i=i: v + i for i in range(3)]\nt = fs%d[acc %% 3](t)",
        ]).replace("%%", "\x00").replace("%d", str(n)).replace("\x00", "%"))

    def c_genclose(self):
        self.emit_lines(self.choice([
            "for gi in gen_fin(3):\n    acc += gi\n    if gi == 1:\n        break",
            "gg = gen_fin(2)\nacc += next(gg)\nt = t + acc",
            "gs = gen_from(t)\nacc += next(gs) + next(gs)",
            "acc += sum(v for v in gen_fin(3) if v)",
        ]))


def generate(seed):
    if seed >= 20_000_000:  # the third generator's seeds (generate_extra.EXTRA_FROM); older seeds keep their programs
        from tests.fuzz.translator.generate_extra import Gen as ExtraGen
        return ExtraGen(seed).program()
    return Gen(seed).program()


if __name__ == "__main__":
    print(generate(int(sys.argv[1]))[0])
