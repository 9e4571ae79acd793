"""``match`` statements on values derived from tensors: sequence, mapping and class patterns (``MATCH_CLASS``).

Found by differential fuzzing, round 8 (Python features mixed with torch ops, each program with and without a
forced graph break): a class pattern (``case Point(px=3):``, ``case int(v):``, ``case torch.Tensor(shape=s):``) was
a graph break at ``MATCH_CLASS``, and the object being matched, built in the frame, could not be handed to Python:
the whole frame ran eagerly.  A read of an attribute an object built in the frame does not have
(``case P(missing=...)``, ``getattr(obj, "missing", d)``) refused the frame too; it raises ``AttributeError`` now,
as Python does.  Every test compares with the plain function and counts graphs, breaks and fallbacks.  Budget: ~2 s.
"""
import torch

import minidynamo
from minidynamo.testing import check_against_eager as _check


class Point:
    __match_args__ = ("px", "py")

    def __init__(self, px, py):
        self.px, self.py = px, py


class Plain:  # no __match_args__: keyword sub-patterns only
    def __init__(self):
        self.a = 1


def _classify(subject, x):
    match subject:
        case Point(px=3, py=py):
            return ("p3", py)
        case Point(a, b) if a < b:
            return ("lt", x * a)
        case Point(a, b):
            return ("pt", a, b, x - b)
        case Plain(a=1, b=2):  # Plain has no `b`: the pattern fails, it does not raise
            return "never"
        case Plain(a=v):
            return ("plain", v)
        case int(v) | str(v):  # builtins that match themselves positionally
            return ("self", v)
        case tuple((p, q)):
            return ("pair", p, q)
        case torch.Tensor(shape=(a, b)):
            return ("tensor", a, b, subject.sum(0) * a)
        case _:
            return "other"


def test_class_patterns_on_objects_built_in_the_frame_and_on_builtins():
    def fn(x):
        subjects = [Point(x.shape[0], x.shape[1]), Plain(), x.shape[1], "s", (1, 2), x, [x.shape[0]]]
        return [_classify(s, x) for s in subjects]

    # one graph per size case: (3, 4) static, then (5, 4) makes dim 0 dynamic, (2, 7) dim 1
    for shape in [(3, 4), (5, 4), (2, 7)]:
        _check(fn, torch.randn(shape), graphs=1)
        minidynamo.reset()


def test_class_pattern_on_an_argument_before_and_after_a_graph_break():
    def fn(x, p):
        match p:
            case Point(3, q):
                x = x * q
        minidynamo.graph_break()
        match p:
            case Point(px=n, py=4):
                return x - n
            case Point():
                return x + 1

    _check(fn, torch.randn(3, 4), Point(3, 4), graphs=2, breaks=1)
    _check(fn, torch.randn(3, 4), Point(2, 5), graphs=1, breaks=2)  # no op before the break: no first graph


def test_missing_attribute_of_an_object_built_in_the_frame_raises_attribute_error():
    def fn(x):
        obj = Plain()
        got = [getattr(obj, "b", None), hasattr(obj, "b")]
        try:
            got.append(obj.b)
        except AttributeError as e:
            got.append(str(e))
        return x + obj.a, got

    _check(fn, torch.randn(3), graphs=1)
