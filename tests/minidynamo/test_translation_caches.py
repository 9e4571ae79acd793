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


def _loop(x, n):
    for i in range(n):
        x = x + 1
        y = x * 2  # noqa: F841
    return x


def _loop_reads_i(x, n):
    for i in range(n):
        x = x + 1
        y = x * i  # noqa: F841
    return x


def test_livevars_analysis_is_cached_per_code_object_and_returns_a_fresh_set():
    from minidynamo.bytecode_analysis import livevars_analysis
    add = _binary_op_offset(_loop)  # ``x + 1``: x is written next; ``i`` is never read
    loop = next(i.offset for i in dis.get_instructions(_loop) if i.opname == "FOR_ITER")
    assert livevars_analysis(_loop.__code__, add) == set()
    live = livevars_analysis(_loop.__code__, loop)
    assert live == {"x"}
    live.add("junk")  # callers may change what they get: the cached answer must not change with it
    assert livevars_analysis(_loop.__code__, loop) == {"x"}
    # A changed function (it reads ``i`` after that point) gets its own answer at the same kind of offset.
    assert livevars_analysis(_loop_reads_i.__code__, _binary_op_offset(_loop_reads_i)) == {"i"}
