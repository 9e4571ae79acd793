"""Caches that make translation faster (issue #7): each returns what the uncached computation returns, and is keyed
so that a changed function (a new code object) never sees another function's entry."""
import dis

from minidynamo.resume_execution import abstract_instructions, copy_instruction


def _one(x, y):
    z = x[y]
    return z + 1


def _two(x, y):
    z = x[y]
    return z - 1


def _subscript_offset(fn) -> int:
    return next(i.offset for i in dis.get_instructions(fn) if i.opname == "BINARY_SUBSCR")


def _binary_op_offset(fn) -> int:
    return next(i.offset for i in dis.get_instructions(fn) if i.opname == "BINARY_OP")


def test_copy_instruction_matches_bytecode_and_is_a_new_object_each_time():
    offset = _subscript_offset(_one)
    first, second = copy_instruction(_one.__code__, offset), copy_instruction(_one.__code__, offset)
    assert first is not second  # callers put it in generated code: never share one Instr between two of them
    expected = abstract_instructions(_one.__code__)[1][offset]
    assert (first.name, first.arg) == (second.name, second.arg) == (expected.name, expected.arg)


def test_copy_instruction_follows_a_changed_function():
    """``_one`` and ``_two`` differ only in one operator: each code object gets its own instruction."""
    a = copy_instruction(_one.__code__, _binary_op_offset(_one))
    b = copy_instruction(_two.__code__, _binary_op_offset(_two))
    assert a.arg != b.arg
    src = "def f(x, y):\n    return x + y\n"
    ns1, ns2 = {}, {}
    exec(compile(src, "file_one.py", "exec"), ns1)  # noqa: S102
    exec(compile(src.replace("+", "*"), "file_one.py", "exec"), ns2)  # noqa: S102  (same file and lines)
    off = _binary_op_offset(ns1["f"])
    assert copy_instruction(ns1["f"].__code__, off).arg != copy_instruction(ns2["f"].__code__, off).arg
