"""bytecode_transformation: decoding, re-assembling, and running generated code -- in a subprocess.

Generated code that is wrong can crash CPython instead of raising (PITFALLS.md: 3.12 segfaults on an unbound local),
so the code-running checks here run in a child interpreter with ``-X faulthandler``: a crash fails one test.
"""
import subprocess
import sys
import textwrap

from bytecode import Bytecode, Instr

from minidynamo import bytecode_transformation as bt


def sample(x, ys, *args, k=2, **kw):
    total = 0
    for y in ys:
        if y % 2:
            continue
        total += y * k
    squares = [v * v for v in ys if v]
    with open(__file__) as f:
        first = f.readline()[:1]
    try:
        total += kw["missing"]
    except KeyError:
        total -= 1
    return total, squares, first, args


def test_decode_names_opcodes_and_lines():
    instrs = bt.decode(lambda x: x + 1)
    names = [i.opname for i in instrs]
    assert names[0] == "RESUME" and "BINARY_OP" in names and names[-1] == "RETURN_VALUE"
    assert all(i.lineno is not None for i in instrs if i.opname != "RESUME")
    index = bt.offset_index(instrs)
    assert [index[i.offset] for i in instrs] == list(range(len(instrs)))


def test_round_trip_through_bytecode_preserves_behaviour():
    """Re-assembling every instruction of a function (exception table included) gives the same function."""
    bc = Bytecode.from_code(sample.__code__, conserve_exception_block_stackdepth=True)
    code = bc.to_code(compute_exception_stack_depths=False)
    import types
    clone = types.FunctionType(code, sample.__globals__, "sample", sample.__defaults__)
    clone.__kwdefaults__ = sample.__kwdefaults__
    assert clone(1, [1, 2, 3, 4], 9, k=3) == sample(1, [1, 2, 3, 4], 9, k=3)


def test_make_code_keeps_signature_and_cells():
    def outer(a, b=5):
        def inner():
            return a
        return inner() + b

    body = [Instr("LOAD_DEREF", bt.CellVar("a")), Instr("LOAD_FAST", "b"), Instr("BINARY_OP", 0),
            Instr("RETURN_VALUE")]
    code = bt.make_code(outer.__code__, body)
    assert code.co_varnames[:2] == ("a", "b") and code.co_cellvars == ("a",)
    import types
    fn = types.FunctionType(code, {}, "outer", (5,))
    assert fn(2) == 7 and fn(2, b=1) == 3


def test_call_sequences_are_version_specific():
    names = [i.name for i in bt.create_call(2)]
    assert names == (["PRECALL", "CALL"] if bt.PY311 else ["CALL"])
    assert bt.create_load_attr("x").name == "LOAD_ATTR"


CHILD = textwrap.dedent("""
    import torch, minidynamo
    from minidynamo.testing import CompileCounter
    minidynamo.config.raise_internal_errors = True

    def f(x, ys, k=2):
        out = [y * k for y in ys]
        with torch.no_grad():
            z = x.sin()
        d = {"a": x + 1}
        d["b"] = z
        ys.append(x)
        return sum(out) + z, d, len(ys)

    cnt = CompileCounter()
    cf = minidynamo.minicompile(f, backend=cnt)
    for n in (2, 3, 3):
        x = torch.randn(n)
        a, b = [torch.ones(n)], [torch.ones(n)]
        r1, r2 = cf(x, a), f(x, b)
        assert torch.allclose(r1[0], r2[0]) and r1[2] == r2[2] and len(a) == len(b)
        assert all(torch.allclose(r1[1][k], r2[1][k]) for k in "ab")
    assert cnt.frame_count == 2, cnt.frame_count
    print("child ok")
""")


def test_generated_code_runs_in_a_child_interpreter_without_crashing():
    proc = subprocess.run([sys.executable, "-X", "faulthandler", "-c", CHILD], capture_output=True, text=True,
                          timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "child ok" in proc.stdout


CELL_CHILD = textwrap.dedent("""
    import torch, minidynamo
    from minidynamo.testing import CompileCounter
    minidynamo.config.raise_internal_errors = True

    def f(x, n):
        scale = 2
        acc = x * 0
        get = lambda: scale  # a closure made before the breaks, over cells written after them
        for i in range(n):
            acc = acc + x * get()
            minidynamo.graph_break()  # inside a loop: resume functions of resume functions
            scale = scale + 1
        ys = [acc * k for k in range(2)]  # 3.11: a comprehension capturing `acc` (a cell)
        return ys[1] + get(), scale

    cnt = CompileCounter()
    cf = minidynamo.minicompile(f, backend=cnt)
    for n in (2, 3, 3):
        x = torch.randn(4)
        r1, r2 = cf(x, n), f(x, n)
        assert torch.allclose(r1[0], r2[0]) and r1[1] == r2[1], (r1, r2)
    assert not minidynamo.counters["eager_fallback"], minidynamo.counters["eager_fallback"]
    resume = [c for c in cf._minidynamo_ctx.cache if c.co_name.startswith("__resume_at")]
    assert resume and all(not c.co_cellvars and "scale" in c.co_freevars for c in resume)
    print("child ok", cnt.frame_count)
""")


def test_graph_breaks_in_a_frame_with_cells_run_in_a_child_interpreter():
    """Resume functions take the frame's cells as free variables: a wrong cell layout crashes rather than raises."""
    proc = subprocess.run([sys.executable, "-X", "faulthandler", "-c", CELL_CHILD], capture_output=True, text=True,
                          timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "child ok" in proc.stdout
