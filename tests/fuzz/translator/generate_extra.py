"""The translator fuzzer's third generator (twenty-seventh session): seeds from ``EXTRA_FROM`` on.

Extends ``generate.Gen`` with what the first two rounds did not write: tensor methods that return several
tensors (``max(0)``, ``split``, ``unbind``), iteration over a tensor's rows with a data-dependent ``break``,
``any``/``all``/``assert`` over tensors, builtins over containers (``enumerate``, ``zip``, ``reversed``,
``sorted``, ``min``/``max`` with a default, ``next`` with a default, ``functools.reduce``), chained comparisons,
f-strings and ``str`` of shapes, ``isinstance``/``getattr``/``hasattr``/``callable``, star-calls, a ``return``
inside ``try``/``finally``, ``del`` after a graph break, a class defined in the function, a ``@torch.no_grad()``
nested function and ``with`` statements of several items. Older seeds keep their programs: ``generate.generate``
sends only seeds from ``EXTRA_FROM`` here.
"""
from tests.fuzz.translator import generate
from tests.fuzz.translator.generate import Gen as BaseGen

EXTRA_FROM = 20_000_000

PRELUDE = generate.PRELUDE.replace("import contextlib\n", "import contextlib\nimport functools\nimport operator\n", 1)


class Gen(BaseGen):
    PRELUDE = PRELUDE

    def tensor_stmt(self):
        if self.r.random() < 0.35:
            return self.choice([
                "vmax, imax = t.max(0); t = t + vmax - imax",
                "p0, p1 = t.split([1, t.shape[0] - 1]); t = torch.cat([p1, p0])",
                "t = torch.stack(t.unbind(0)[::-1])",
                "t = t.flip(0) + t.roll(1, 0)",
                "t = torch.where(t > t.mean(), t, -t)",
                "t = t.new_zeros(t.shape) + t.abs()",
                "t = t.to(torch.float64).to(torch.float32) + t.ndim",
                "t = torch.clamp(t, min=-1.0, max=acc + 1.0)",
                "t = t + float(acc) / 3",
                "t = helper(*(t, acc))",
                "t = helper(**{'t': t, 'k': acc})",
                "t = t[torch.argsort(t)]",
                "t = sum(t.chunk(2)[0]) + t if t.shape[0] > 1 else t",
            ])
        return super().tensor_stmt()

    def break_stmt(self):
        if self.r.random() < 0.3:
            return self.choice([
                "acc += int(any(t > 0))",
                "acc += int(all(v > -100 for v in t))",
                "assert (t > -1e9).all(), 'tiny'",
                "if t.abs().max() > 10: t = t / 10",
                "acc += len(repr(t.shape)) + len(f'{t.sum():.2f}')",
                "acc += max(range(3), key=lambda i: float(t[i]))",
                "acc += sorted(t.tolist()).index(t.max().item())",
            ])
        return super().break_stmt()

    def py_stmt(self):
        if self.r.random() < 0.3:
            return self.choice([
                "acc += max(lst, default=0) - min(lst, default=0)",
                "acc += len(f'{acc:>4}') + len(str(t.shape))",
                "acc += int(isinstance(t, torch.Tensor)) + int(callable(helper))",
                "acc += getattr(obj, 'a', 0) + int(hasattr(obj, 'zz'))",
                "acc += sum(i * v for i, v in enumerate(lst[:3]))",
                "acc += len(list(zip(lst, reversed(lst))))",
                "acc += next(iter(lst), -1)",
                "acc += {**d, 'q': 1}.get('q')",
                "acc += 3 if 0 < acc < 5 else 1",
                "acc += len([*lst, *d])",
                "acc += functools.reduce(operator.add, lst, 0)",
                "acc += round(acc / 3) + t.dim()",
                "acc += int(t.dtype == torch.float32) + t.numel()",
                "acc += sum(sorted(d.values(), reverse=True)[:1])",
                "acc += len(sorted(set(lst) | {acc}))",
            ])
        return super().py_stmt()

    def raise_stmt(self):
        if self.r.random() < 0.3:
            return self.choice([
                "assert acc < 0, 'acc %d' % acc",
                "acc += {'a': 1}['b']",
                "a_, b_ = t.max(0), 1, 2",
                "acc += t.shape[5]",
                "raise AssertionError(acc)",
                "acc += next(iter([]), None) + 1",
                "acc += functools.reduce(operator.add, [])",
                "t = t.split(0)",
            ])
        return super().raise_stmt()

    def stmt(self):
        if self.depth < 3 and self.r.random() < 0.1:
            self.depth += 1
            getattr(self, "c_" + self.choice(["rows", "tryreturn", "delete", "localclass", "nograd_fn",
                                              "withmany"]))()
            self.depth -= 1
            return
        super().stmt()

    def c_rows(self):
        self.emit(self.choice(["for ri, row in enumerate(t[:3]):", "for row in t:", "for ri, row in zip(lst, t):"]))
        self.in_loop += 1
        self.ind += 1
        self.emit(self.choice(["acc += 1", "t = t + row", "G.append(float(row))"]))
        self.block(self.r.randint(0, 1))
        self.emit(self.choice(["if row > 0:", "if row.item() > 1:", "if acc > 3:"]))
        self.ind += 1
        self.emit(self.choice(["break", "continue"]))
        self.ind -= 1
        self.ind -= 1
        self.in_loop -= 1

    def c_tryreturn(self):
        self.closure_n += 1
        n = self.closure_n
        self.emit_lines(self.choice([
            "def tf%d(v):\n    try:\n        return v + 1\n    finally:\n        LOG.append('tf')\nacc += tf%d(acc)",
            ("def tr%d(v):\n    try:\n        print('tr', v.shape)\n        return v * 2\n    finally:\n"
             "        LOG.append(('tr', float(v.sum())))\nt = tr%d(t)"),
        ]).replace("%d", str(n)))

    def c_delete(self):
        self.emit_lines(self.choice([
            "tmp_ = t * 2\nprint('del', acc)\ndel tmp_",
            "tmp_ = acc\nminidynamo.graph_break()\ndel tmp_\ntmp_ = t\nt = tmp_ + 1",
            "tl_ = [t, x]\ndel tl_[0]\nt = tl_[0] * 2",
        ]))

    def c_localclass(self):
        self.closure_n += 1
        n = self.closure_n
        self.emit_lines(self.choice([
            "class Loc%d:\n    k = 2\n    def get(self):\n        return self.k\nacc += Loc%d().get()",
            "class Box%d:\n    def __init__(self, v):\n        self.v = v\nt = Box%d(t * 2).v",
        ]).replace("%d", str(n)))

    def c_nograd_fn(self):
        self.closure_n += 1
        n = self.closure_n
        self.emit_lines(self.choice([
            "@torch.no_grad()\ndef ng%d(v):\n    return v * 2\nt = ng%d(t) + t",
            "@torch.enable_grad()\ndef eg%d(v):\n    return v.sin()\nt = eg%d(t)",
        ]).replace("%d", str(n)))

    def c_withmany(self):
        tag = self.r.randint(0, 99)
        self.emit(self.choice([f"with cm_fin('m{tag}') as ma, cm_plain('n{tag}') as mb:",
                               f"with CM('m{tag}'), torch.no_grad(), cm_exc('e{tag}'):",
                               f"with cm_swallow('s{tag}'), cm_break('b{tag}'):"]))
        self.body()
