"""The translator fuzzer's base program generator, extended by ``generate.py`` (which the runner uses).

A program is one function ``f(x, y, lst, d, obj, n)`` after a prelude of helpers (context managers, generators,
helpers that break the graph or raise) and module globals the runner compares (``LOG``, ``G``, ``GC``): tensor
statements, in-place mutation, Python-side state, graph breaks, raises caught or not, and if/for/while/try/with
blocks and closures nested around them. ``grad`` says which inputs require grad (0: none, 1: x, 2: x and y).
"""
import random

PRELUDE = '''
import contextlib
import torch
import minidynamo

LOG = []
G = []
GC = 0


@contextlib.contextmanager
def cm_fin(tag):
    LOG.append(("enter", tag))
    try:
        yield tag
    finally:
        LOG.append(("exit", tag))


@contextlib.contextmanager
def cm_plain(tag):
    LOG.append(("enter2", tag))
    yield tag
    LOG.append(("exit2", tag))


@contextlib.contextmanager
def cm_swallow(tag):
    LOG.append(("enter3", tag))
    try:
        yield tag
    except ValueError as e:
        LOG.append(("swallow", tag, str(e)))
    LOG.append(("after3", tag))


@contextlib.contextmanager
def cm_exc(tag):
    try:
        yield tag
    except Exception as e:
        LOG.append(("seen", tag, type(e).__name__))
        raise
    else:
        LOG.append(("clean", tag))


class CM:
    def __init__(self, tag):
        self.tag = tag

    def __enter__(self):
        LOG.append(("CM enter", self.tag))
        return self

    def __exit__(self, et, ev, tb):
        LOG.append(("CM exit", self.tag, et.__name__ if et else None))
        return False


def gen_a(n):
    for i in range(n):
        yield i * 2


def gen_b(t):
    LOG.append("gen_b start")
    yield t + 1
    LOG.append("gen_b mid")
    yield t * 2


def helper(t, k):
    if k > 2:
        return t * k
    return t - k


def helper_break(t, k):
    print("helper_break", k)
    return t + k


def helper_raise(k):
    if k % 2 == 0:
        raise ValueError("helper raised %d" % k)
    return k + 1


def helper_mut(lst, t):
    lst.append(len(lst))
    t.add_(1)
    return t


@contextlib.contextmanager
def cm_break(tag):
    print("cm_break enter", tag)
    try:
        yield tag
    finally:
        print("cm_break exit", tag)
        LOG.append(("exitb", tag))


@contextlib.contextmanager
def cm_value(t):
    LOG.append("cmv enter")
    yield t * 2
    LOG.append("cmv exit")


def helper_with(t, k):
    with cm_fin("h%d" % k):
        if k > 3:
            raise ValueError("helper_with %d" % k)
        t = t + k
    return t


def helper_with_break(t, k):
    with cm_fin("hb"):
        print("hb", k)
        t = t * 2
        if k % 2:
            raise KeyError("hb%d" % k)
    return t


class Obj:
    def __init__(self):
        self.a = 1
        self.t = torch.ones(2)
'''

MISSING_MSG = ["missing", "zz", "nope"]


class Gen:
    # what a program's prelude defines, which module globals it declares, and how it may return (a subclass
    # extends these; ``program`` is the same for every round, so a seed gives the same program as before)
    PRELUDE = PRELUDE
    GLOBALS = "GC"
    RETURNS = ("return t, acc", "return t, acc, sorted(s)", "return t + y, acc, len(lst)",
               "return (t * 2).sum(), acc", "return t, t.view(-1), acc", "return y, t, acc",
               "return y[1:], t * y, acc")

    def __init__(self, seed):
        self.r = random.Random(seed)
        self.ind = 1
        self.depth = 0
        self.lines = []
        self.in_loop = 0
        self.in_try = 0
        self.closure_n = 0
        self.in_fn = 0

    def emit(self, s):
        self.lines.append("    " * self.ind + s)

    def choice(self, xs):
        return self.r.choice(xs)

    # --- leaf statements -------------------------------------------------
    def tensor_stmt(self):
        c = self.r
        return self.choice([
            "t = t * 2 + x",
            "t = torch.sin(t) + y",
            "t = t + y.sum()",
            "t = helper(t, acc)",
            "t = t.relu() - 0.5",
            "t = torch.cat([t, t])[: x.shape[0]]",
            f"t = t + x[{c.randint(0, 2)}]",
            "t = t * (acc + 1)",
            "t = t + len(lst)",
            "t = t.sum(0, keepdim=True) + t",
            "u = t.clone(); t = u * 3",
            "t = t @ torch.ones(t.shape[0], t.shape[0]) / 4",
        ])

    def inplace_stmt(self):
        c = self.r
        return self.choice([
            "t.add_(1)",
            "t.mul_(2)",
            "t[0] = acc",
            "y.add_(1)",
            f"y[{c.randint(0, 2)}] = 7.0",
            "y.mul_(t.detach())",
            "x.add_(1)",  # x may require grad: RuntimeError on a leaf
            "obj.t.add_(t.sum())",
            "t = helper_mut(lst, t)",
            "y[y > 0] = 0.0",
            "t.clamp_(min=0)",
            "y[:2].mul_(2)",
            "y.view(-1)[1] = acc",
            "y.copy_(t)",
            "t.detach().add_(1)",
            "x.detach().mul_(1.5)",
            "with torch.no_grad(): x.add_(1)",
            "t = t * x; t.mul_(2)",
            "t = x.exp(); t.add_(1)",
            "with torch.no_grad(): x.mul_(2)",
            "t = x * x; x.data.add_(1)",
            "t = t.clone(); t[1:].mul_(2)",
            "t = x.sin(); t[0].add_(1)",
            "t = t.view(-1); t.add_(acc)",
            "y.requires_grad_(); t = t + y",
            "t = torch.where(t > 0, t, x * 2)",
            "t = t.unsqueeze(0).expand(2, -1).sum(0)",
            "t = (t * 2).detach(); t.add_(1)",
            "t = x.clone(); t.mul_(x)",
            "t = t * 1; t.data.mul_(2)",
            "y.add_(x)",
            "t = t + y[1:].sum(); y.sub_(0.5)",
        ])

    def break_stmt(self):
        c = self.r
        return self.choice([
            "print('p', acc)",
            "acc += int(t.sum().item() > 0)",
            "vals = t.tolist(); acc += len(vals)",
            "t = t[t > 0.1]; t = torch.cat([t, x])[: x.shape[0]]",
            "minidynamo.graph_break()",
            "t = helper_break(t, acc)",
            f"acc += int(x.sum().item() * 0) + {c.randint(0, 3)}",
            "G.append(repr(acc))",
            "acc += len(t.nonzero())",
        ])

    def py_stmt(self):
        return self.choice([
            "acc += 1",
            "lst.append(acc)",
            "d['k%d' % acc] = acc",
            "d['a'] = d.get('a', 0) + 1",
            "obj.a += acc",
            "G.append(acc)",
            "LOG.append(('s', acc))",
            "acc = acc * 2 % 17",
            "lst[0] = lst[-1] + acc",
            "s.add(acc % 3)",
            "if lst: lst.pop()",
            "lst.extend([v + 1 for v in lst[:2]])",
            "acc += sum(v for v in lst)",
            "acc += len({k: v for k, v in d.items() if v > 0})",
            "d.update(z=acc)",
            "acc += helper_raise(acc * 2 + 1)",
            "GC += 1",
            "acc += n",
            "lst.sort(reverse=True)",
            "t = helper_with(t, acc % 3)",
            "t = helper_with_break(t, acc * 2)",
        ])

    def raise_stmt(self):
        return self.choice([
            "raise ValueError('bad %d' % acc)",
            "acc += helper_raise(acc)",
            "acc += lst[acc + 10]",
            f"acc += d['{self.choice(MISSING_MSG)}']",
            "acc += 1 // (acc - acc)",
            "t = t + torch.ones(7)",
            "acc += int('x%d' % acc)",
            "raise KeyError(acc)",
            "acc = acc + None",
            "t = t.view(3, 5)",
            "obj.missing_attr += 1",
            "acc += [1, 2][5]",
            "raise RuntimeError('rt')",
            "x.add_(1)",
            "torch.ones(2, 3) @ torch.ones(2, 3)",
            "acc += int(None)",
            "acc += len(5)",
            "acc += [].pop()",
            "acc += {}.popitem()[1]",
            "acc += d.pop('zz')",
            "acc += lst.index(99)",
            "acc = 'a' + acc",
            "t = t.reshape(7)",
            "acc += int(x.item())",
            "acc += int(float('x%d' % acc))",
            "acc += min([])",
            "acc += next(iter([]))",
            "lst.remove(99)",
            "acc += abs('a')",
            "acc += getattr(obj, 'zz')",
            "acc += divmod(acc, 0)[0]",
            "t = t.sum(dim=5)",
            "t = t[10]",
            "acc += len(sorted([1, 'a']))",
            "acc += len(iter(5))",
            "acc += ord('ab')",
            "t = t.view(-1, 3)",
            "t = torch.zeros(2) + torch.zeros(3)",
            "acc += tuple(lst)[9]",
            "acc += lst[acc:'a']",
            "t = helper_with(t, acc + 4)",
            "t = helper_with_break(t, acc * 2 + 1)",
            "acc += int(t)",
        ])

    def leaf(self):
        w = self.r.random()
        if self.depth > 0 and w < 0.03:
            return self.choice(["return t, acc", "return t + 1, -acc", "return x, acc"])
        if w < 0.05:
            return self.choice(["acc += G[-1] if G else 0", "del u" if False else "u = acc; del u",
                                "obj.a = len(G)", "acc += len(LOG)"])
        if w < 0.25:
            return self.tensor_stmt()
        if w < 0.40:
            return self.inplace_stmt()
        if w < 0.62:
            return self.break_stmt()
        if w < (0.84 if self.in_try else 0.88):
            return self.py_stmt()
        return self.raise_stmt()

    # --- compound --------------------------------------------------------
    def block(self, n):
        for _ in range(n):
            self.stmt()

    def stmt(self):
        if self.depth >= 3 or self.r.random() < 0.55:
            line = self.leaf()
            if line.startswith("GC") and self.in_fn:
                line = "G.append(0)"
            for part in [line]:
                self.emit(part)
            return
        self.depth += 1
        kind = self.choice(["try", "try", "with", "with", "with", "loop", "loop", "if", "closure", "gen", "nogradwith",
                            "comp", "fn"])
        getattr(self, "c_" + kind)()
        self.depth -= 1

    def body(self, lo=1, hi=3):
        self.ind += 1
        self.block(self.r.randint(lo, hi))
        self.ind -= 1

    def c_try(self):
        self.emit("try:")
        self.in_try += 1
        self.body()
        self.in_try -= 1
        k = self.r.random()
        exc = self.choice(["ValueError", "Exception", "(KeyError, IndexError)", "RuntimeError", "ZeroDivisionError",
                           "TypeError", "AttributeError"])
        if k < 0.7:
            self.emit(f"except {exc} as e:")
            self.ind += 1
            self.emit(self.choice(["LOG.append(('caught', type(e).__name__, str(e)))", "acc += 100",
                                   "LOG.append(repr(e))", "t = t + 1"]))
            if self.r.random() < 0.3:
                self.emit(self.choice(["raise", "print('in except')", "raise TypeError('re') from e"]))
            self.ind -= 1
            if self.r.random() < 0.3:
                self.emit("else:")
                self.body(1, 2)
        if k >= 0.4 or k < 0.0:
            self.emit("finally:")
            self.ind += 1
            self.emit(self.choice(["LOG.append(('finally', acc))", "lst.append(-1)", "print('fin')",
                                   "t = t * 1"]))
            self.ind -= 1

    def c_with(self):
        cm = self.choice(["cm_fin('%s')", "cm_plain('%s')", "cm_swallow('%s')", "cm_exc('%s')", "CM('%s')",
                          "cm_break('%s')", "cm_fin('%s'), CM('%s2')"])
        tag = f"w{self.r.randint(0, 99)}"
        cm = cm.replace("%s", tag)
        if self.r.random() < 0.15:
            self.emit("with cm_value(t) as wv:")
        else:
            self.emit(f"with {cm} as wv:")
        self.body()
        if self.r.random() < 0.3:
            self.ind += 1
            self.emit("LOG.append(('in with', str(wv)[:2]))")
            self.ind -= 1

    def c_nogradwith(self):
        self.emit(self.choice(["with torch.no_grad():", "with torch.enable_grad():"]))
        self.body()

    def c_loop(self):
        if self.r.random() < 0.6:
            it = self.choice([f"range({self.r.randint(1, 4)})", "list(lst)", "gen_a(3)", "list(d.items())",
                              "enumerate(lst[:3])", "zip(lst, 'abc')", "x[:2]"])
            var = "i"
            self.emit(f"for {var} in {it}:")
        else:
            self.emit(f"k{self.depth} = 0")
            self.emit(f"while k{self.depth} < {self.r.randint(1, 3)}:")
            self.ind += 1
            self.emit(f"k{self.depth} += 1")
            self.ind -= 1
        self.in_loop += 1
        self.ind += 1
        self.block(self.r.randint(1, 3))
        if self.r.random() < 0.5:
            self.emit(f"if acc % {self.r.randint(2, 3)} == 0:")
            self.ind += 1
            self.emit(self.choice(["break", "continue"]))
            self.ind -= 1
        self.ind -= 1
        self.in_loop -= 1

    def c_if(self):
        cond = self.choice(["acc > 2", "t.sum() > 0", "len(lst) > 3", "'a' in d", "x.shape[0] > 4", "n % 2",
                            "bool(t[0] > 0)", "obj.a > 1"])
        self.emit(f"if {cond}:")
        self.body()
        if self.r.random() < 0.5:
            self.emit("else:")
            self.body()

    def c_closure(self):
        self.closure_n += 1
        name = f"inner{self.closure_n}"
        self.emit(f"def {name}(z):")
        self.ind += 1
        self.emit("nonlocal acc")
        self.emit("acc += 1")
        self.in_fn += 1
        saved = self.lines
        self.lines = []
        self.block(self.r.randint(0, 2))
        inner = self.lines
        self.lines = saved
        self.lines += inner
        self.in_fn -= 1
        self.emit("return z * acc")
        self.ind -= 1
        self.emit(f"t = {name}(t)")
        if self.r.random() < 0.5:
            self.emit(f"t = {name}(t) + 1")

    def c_gen(self):
        self.emit(self.choice([
            "g = gen_b(t)\nG_ = next(g)\nt = t + G_",
            "for gv in gen_b(t):\n    t = t + gv",
            "acc += sum(gen_a(len(lst)))",
            "t = t + sum(v * t for v in gen_a(2))",
            "g = gen_a(4)\nacc += next(g) + next(g)",
            "acc += max(gen_a(3), default=0)",
        ]).replace("\n", "\n" + "    " * self.ind))

    def c_comp(self):
        self.emit(self.choice([
            "acc += sum([v * 2 for v in lst if v % 2])",
            "ts = [t * v for v in range(2)]; t = ts[-1]",
            "acc += len({v % 3 for v in lst})",
            "d2 = {k: v + 1 for k, v in d.items()}; acc += len(d2)",
            "acc += sum(int(v.item()) for v in t[:2])",
            "ys = [print('c', v) for v in range(2)]",
            "acc += sum([len(str(v)) for v in d])",
        ]))

    def c_fn(self):
        self.emit(self.choice([
            "t = helper(helper(t, acc), n)",
            "t = helper_break(t * 2, acc)",
            "t = (lambda q: q * 2 + acc)(t)",
            "acc += (lambda *a: len(a))(1, 2, acc)",
        ]))

    def program(self):
        grad = self.r.choice([0, 1, 1, 2])
        self.emit(f"global {self.GLOBALS}")
        self.emit("acc = 0")
        self.emit("s = set()")
        self.emit("t = x * 1")
        self.block(self.r.randint(3, 7))
        self.emit(self.choice(list(self.RETURNS)))
        src = self.PRELUDE + "\n\ndef f(x, y, lst, d, obj, n):\n" + "\n".join(self.lines) + "\n"
        return src, grad


def generate(seed):
    return Gen(seed).program()


if __name__ == "__main__":
    import sys

    print(generate(int(sys.argv[1]))[0])
