"""User classes: methods, properties, static/class methods, plain objects, dataclasses, inheritance, __call__."""
import dataclasses

import torch

from . import program, t


class Scaler:
    factor = 3.0  # a class attribute

    def __init__(self, w, bias=0.5):
        self.w = w
        self.bias = bias

    def apply(self, x):
        return x * self.w + self.bias

    @property
    def double_w(self):
        return self.w * 2

    @staticmethod
    def shift(x, k):
        return x + k

    @classmethod
    def scale_by_class(cls, x):
        return x * cls.factor

    def __call__(self, x):
        return self.apply(x) - 1


class Sub(Scaler):
    factor = 10.0

    def apply(self, x):
        return super().apply(x) * 2


@program(lambda: (Scaler(t(3)), t(3)))
def methods_and_attributes_of_input_object(s, x):
    return s.apply(x) + s.bias, s.double_w


@program(lambda: (t(3),))
def static_and_class_methods(x):
    return Scaler.shift(x, 2), Scaler.scale_by_class(x), Sub.scale_by_class(x), Scaler(None).shift(x, 1)


@program(lambda: (Sub(t(3)), t(3)))
def inheritance_and_super(s, x):
    return s.apply(x), s.scale_by_class(x), type(s).factor


@program(lambda: (Scaler(t(3), bias=2.0), t(3)))
def callable_user_object(s, x):
    return s(x)


@program(lambda: (t(3),))
def object_constructed_inside(x):
    s = Scaler(x + 1)
    return s.apply(x), s.w


@dataclasses.dataclass
class Config:
    hidden: int
    scale: float = 2.0
    use_bias: bool = True


@dataclasses.dataclass
class Batch:
    x: torch.Tensor
    y: torch.Tensor


@program(lambda: (t(2, 4), Config(hidden=4)))
def dataclass_config_input(x, cfg):
    out = x.reshape(-1, cfg.hidden) * cfg.scale
    if cfg.use_bias:
        out = out + 1
    return out


@program(lambda: (Batch(t(3), t(3)),))
def dataclass_of_tensors_input(b):
    return b.x * b.y, b.x.shape


@program(lambda: (t(2),))
def dataclass_created_inside(x):
    cfg = Config(hidden=2, scale=0.5)
    return x * cfg.scale + cfg.hidden, dataclasses.asdict(cfg)["hidden"]


@dataclasses.dataclass(frozen=True)
class Frozen:
    k: int
    name: str = "f"


@program(lambda: (t(2), Frozen(3)))
def frozen_dataclass_input(x, fz):
    return x * fz.k, fz.name + "!"


class Plain:
    pass


def _plain(**attrs):
    p = Plain()
    p.__dict__.update(attrs)
    return p


@program(lambda: (_plain(a=t(2), n=3, tag="x"),))
def plain_object_attribute_reads(obj):
    return obj.a * obj.n, obj.tag, hasattr(obj, "missing")


class Accumulator:
    def __init__(self):
        self.total = 0
        self.seen = []

    def add(self, x):
        self.total = self.total + 1
        self.seen.append(x)
        return x * self.total


@program(lambda: (Accumulator(), t(2)))
def mutating_method_on_input_object(acc, x):
    return acc.add(x) + acc.add(x * 2)


@program(lambda: (_plain(x=t(2), steps=0), t(2)))
def attribute_assignment_on_input_object(state, delta):
    state.x = state.x + delta
    state.steps = state.steps + 1
    state.new_attr = delta * 2
    return state.x.sum()


class Point:
    __slots__ = ("x", "y")

    def __init__(self, x, y):
        self.x = x
        self.y = y


@program(lambda: (t(2), t(2)))
def object_constructed_and_returned_values(a, b):
    p = Point(a, b)
    return p.x * p.y


class Vec:
    def __init__(self, data):
        self.data = data

    def __add__(self, other):
        return Vec(self.data + other.data)

    def __len__(self):
        return self.data.shape[0]

    def __getitem__(self, i):
        return self.data[i]


@program(lambda: (t(4), t(4)))
def dunder_methods(a, b):
    v = Vec(a) + Vec(b)
    return v.data, len(v), v[1]


class WithTensorProperty:
    def __init__(self, t_):
        self._t = t_

    @property
    def normed(self):
        return self._t / self._t.norm()


@program(lambda: (WithTensorProperty(t(4)),))
def property_computing_tensor(obj):
    return obj.normed * 2


class Base:
    def __init__(self, k):
        self.k = k

    def run(self, x):
        return self.step(x) + self.k

    def step(self, x):
        return x


class Derived(Base):
    def __init__(self, k, m):
        super().__init__(k)
        self.m = m

    def step(self, x):
        return super().step(x) * self.m


@program(lambda: (t(3),))
def polymorphic_dispatch_constructed_inside(x):
    objs = [Base(1), Derived(2, 3)]
    return [o.run(x) for o in objs], isinstance(objs[1], Base)


@program(lambda: (Derived(1, 4), t(3)))
def polymorphic_input_object(obj, x):
    return obj.run(x), type(obj).__name__


class Registry:
    items = {"double": 2, "triple": 3}  # noqa: RUF012

    @classmethod
    def factor(cls, name):
        return cls.items[name]


@program(lambda: (t(2),))
def class_attribute_dict_via_classmethod(x):
    return x * Registry.factor("triple") + Registry.items["double"]


class Lazy:
    def __init__(self):
        self.cache = None

    def get(self, x):
        if self.cache is None:
            self.cache = x * 2
        return self.cache


@program(lambda: (Lazy(), t(2)))
def lazy_attribute_initialisation_on_input(obj, x):
    return obj.get(x) + obj.get(x + 100)


class WithSetter:
    def __init__(self):
        self._scale = 1.0

    @property
    def scale(self):
        return self._scale

    @scale.setter
    def scale(self, v):
        self._scale = v * 2

    def scaled(self, x):
        return x * self.scale


@program(lambda: (WithSetter(), t(2)))
def property_setter_on_input_object(obj, x):
    obj.scale = 3.0
    return obj.scaled(x)


class Fluent:
    def __init__(self, x):
        self.x = x

    def add(self, k):
        self.x = self.x + k
        return self

    def mul(self, k):
        self.x = self.x * k
        return self


@program(lambda: (t(3),))
def method_chaining_returning_self(x):
    return Fluent(x).add(1).mul(3).add(-2).x


class Nested:
    def __init__(self):
        self.inner = Plain()
        self.inner.vals = {"w": 2.0}


@program(lambda: (Nested(), t(2)))
def chained_attribute_and_item_assignment(obj, x):
    obj.inner.vals["w"] = obj.inner.vals["w"] + 1
    obj.inner.last = x * obj.inner.vals["w"]
    return obj.inner.last


class Validated:
    def __init__(self):
        object.__setattr__(self, "log", [])

    def __setattr__(self, name, value):
        self.log.append(name)
        object.__setattr__(self, name, value * 2 if isinstance(value, int) else value)


@program(lambda: (Validated(), t(2)))
def custom_setattr_on_input_object(obj, x):
    obj.k = 3
    obj.t = x + 1
    return obj.t * obj.k


class Fallback:
    def __init__(self):
        self.known = 2

    def __getattr__(self, name):
        return len(name)


@program(lambda: (Fallback(), t(2)))
def custom_getattr_fallback(obj, x):
    return x * obj.known + obj.abc


class Doubled:
    def __get__(self, obj, objtype=None):
        return obj.base * 2


class HasDescriptor:
    doubled = Doubled()

    def __init__(self, base):
        self.base = base


@program(lambda: (HasDescriptor(3), t(2)))
def custom_descriptor_attribute(obj, x):
    return x * obj.doubled, vars(obj)["base"], obj.__dict__["base"]


class KeyWithEq:
    def __init__(self, k):
        self.k = k

    def __eq__(self, other):
        return isinstance(other, KeyWithEq) and self.k == other.k

    def __hash__(self):
        return hash(self.k)

    def __lt__(self, other):
        return self.k < other.k


@program(lambda: (t(2), KeyWithEq(1), KeyWithEq(1), KeyWithEq(2)))
def user_eq_and_lt_are_called(x, a, b, c):
    # == and != (object.__ne__ inverts __eq__), `in`/count/index (`is`, then ==), < and the reflected >
    return (x * (2 if a == b else 3), a != b, a != c, b in [c, a], [c, b].count(a), [c, b].index(a), a < c,
            c > a)
