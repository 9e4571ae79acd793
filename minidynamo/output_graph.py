"""OutputGraph: the FX graph being built for one frame, its inputs, guards and side effects; and compiling it.

While the translator runs, ``OutputGraph`` owns the ``torch.fx.Graph`` (nodes are added through proxies), the list
of graph inputs with their sources, the fake-tensor mode, the guards and the side effects.  When the frame returns,
``compile_subgraph`` finishes the graph (outputs, dead-code removal), hands it to the backend, installs the compiled
function in the frame's globals as ``__compiled_fn_<n>``, and generates the bytecode that calls it and rebuilds the
return value.  Mirrors ``torch/_dynamo/output_graph.py``.
"""
from __future__ import annotations

import contextlib
import dataclasses
import inspect
import operator
import re
import time
import traceback
import types
from collections.abc import Callable
from typing import Any

import torch
import torch.fx
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.fx.experimental.symbolic_shapes import DimDynamic

from . import config, dynamic_shapes
from .exc import unimplemented
from .guards import Guard, TensorMeta
from .side_effects import SideEffects
from .source import Source
from .utils import counters, unique_id
from .variables.base import VariableTracker
from .variables.tensor import TensorVariable

RANDOM_OPS = {"rand", "randn", "randint", "rand_like", "randn_like", "randint_like", "bernoulli", "dropout",
              "normal", "multinomial", "randperm", "uniform", "exponential", "poisson", "feature_dropout",
              "alpha_dropout"}


# [Note: a graph that leaves grad mode changed]
# A graph that breaks inside ``with torch.no_grad():`` ends with grad mode off: the rest of the block (the call that
# broke the graph, the resume function) runs natively after it and must see grad mode off.  The graph records the
# switch as a ``_set_grad_enabled(False)`` node, and a backend that runs ``gm`` as it is does the switch; one that
# compiles it to ATen (AOTAutograd, mininductor) only uses the mode while tracing.  So the mode the graph leaves is
# set after the compiled graph runs, whatever the backend (upstream re-enters the context manager in the bytecode
# it generates after the graph), and a compile never changes the caller's mode.
def final_grad_mode(gm: torch.fx.GraphModule) -> bool | None:
    """The grad mode ``gm`` leaves behind: its last ``_set_grad_enabled`` node's, or None if it has none."""
    switches = gm.graph.find_nodes(op="call_function", target=torch._C._set_grad_enabled)
    return switches[-1].args[0] if switches else None


def hoist_leading_grad_mode(gm: torch.fx.GraphModule) -> bool | None:
    """Take a ``_set_grad_enabled`` that is ``gm``'s first operation out of it; returns its mode, or None.

    [Note: a graph that starts by changing grad mode]  A resume function that continues inside
    ``with torch.no_grad():`` is called with grad mode off and traces the block's exit (the ``GradModeExit`` it was
    handed) as its graph's first node, ``_set_grad_enabled(True)``.  A backend that compiles the graph
    (AOTAutograd) decides at the call whether to record autograd -- with grad mode off, it did not: a mutated
    input lost the ``grad_fn`` eager gave it, and an input used only under the block got a zero gradient where
    eager leaves ``.grad`` None (translator fuzz round 12).  So the switch is made before the compiled graph
    runs, and the graph is compiled under it: the backend sees the mode the graph's operations run in."""
    calls = [n for n in gm.graph.nodes if n.op in ("call_function", "call_method", "call_module")]
    # size queries (``len(t.nonzero())`` before the exit, under dynamic sizes) make no tensor: they may go first
    numbers = (torch.SymInt, torch.SymFloat, torch.SymBool, int, float, bool)
    k = next((k for k, n in enumerate(calls) if not isinstance(n.meta.get("example_value"), numbers) or
              n.target is torch._C._set_grad_enabled), None)
    if k is None or calls[k].target is not torch._C._set_grad_enabled or calls[k].args[0] is not True or \
            calls[k].users:
        return None  # (a graph that starts by disabling grad is what upstream makes of `with no_grad()`: kept)
    enabled = calls[k].args[0]
    gm.graph.erase_node(calls[k])
    gm.recompile()
    return enabled


class EntersGradMode:
    """A compiled graph run with grad mode set to ``enabled`` ([Note: a graph that starts by changing grad
    mode])."""

    def __init__(self, compiled, enabled: bool):
        self.compiled, self.enabled = compiled, enabled

    def __call__(self, *args):
        torch._C._set_grad_enabled(self.enabled)
        return self.compiled(*args)

    def __getattr__(self, name: str):
        return getattr(self.__dict__["compiled"], name)


class LeavesGradMode:
    """A compiled graph that sets grad mode to ``enabled`` once it returns ([Note: a graph that leaves grad mode
    changed])."""

    def __init__(self, compiled, enabled: bool):
        self.compiled, self.enabled = compiled, enabled

    def __call__(self, *args):
        out = self.compiled(*args)
        torch._C._set_grad_enabled(self.enabled)
        return out

    def __getattr__(self, name: str):  # ``aot_graphs``, ``source``... of the compiled graph
        return getattr(self.__dict__["compiled"], name)


# [Note: a graph that raises]  A compiled graph can raise where its fake tensors could not tell: ``cholesky`` of a
# matrix that is not positive-definite, an index tensor out of range, an integer division by zero.  Eager Python
# raises at that op, with everything before it done: ``l.append(1)`` before it has happened, a ``try`` around it
# catches it, a ``finally`` runs, and ``with torch.no_grad():`` restores grad mode on the way out.  The transformed
# code calls the graph first and replays the frame's Python side effects after it, so a raise skipped them, went
# past the user's ``except``, and left grad mode (or autocast) as the graph had set it, for the rest of the process
# (translator fuzz round 9; upstream Dynamo behaves the same way).  Two repairs, both paid only when it raises:
#   - the grad mode and autocast state the graph started with are put back (always);
#   - when nothing the graph did can be seen from outside -- no in-place op, no random numbers (``is_impure``),
#     only grad-mode and autocast switches, which the first repair undoes -- the frame has done nothing yet (the
#     graph call is the first thing its transformed code does), so ``GraphRaised`` asks ``eval_frame`` to run the
#     frame again natively, where CPython raises, catches and cleans up as it always does.  That is counted as an
#     eager fallback, so a backend that raises where eager does not still shows up.
#   A graph that mutated its inputs before raising cannot be run again (the mutation would happen twice): its
#   exception goes to the caller as before, with the state restored.
class GraphRaised(BaseException):  # not an Exception: no ``except Exception`` of the user's may swallow it
    """The compiled graph of the frame being run raised ``error`` before the frame did anything else."""

    def __init__(self, error: Exception):
        super().__init__(error)
        self.error = error


class RestoresStateOnError:
    """A compiled graph that, should it raise, puts back the grad mode and autocast state it started with (when it
    switches them), and raises ``GraphRaised`` when the frame may simply run again natively ([Note: a graph that
    raises])."""

    def __init__(self, compiled, switches_state: bool, rerunnable: bool):
        self.compiled, self.switches_state, self.rerunnable = compiled, switches_state, rerunnable

    def __call__(self, *args):
        if not self.switches_state:
            try:
                return self.compiled(*args)
            except Exception as e:  # noqa: BLE001 - whatever it raised, the native run raises it again
                raise GraphRaised(e) from None
        from .variables.ctx_manager import _set_autocast_state, autocast_state
        grad_mode, autocast = torch.is_grad_enabled(), autocast_state()
        try:
            return self.compiled(*args)
        except Exception as e:
            torch._C._set_grad_enabled(grad_mode)
            _set_autocast_state(autocast)
            if self.rerunnable:
                raise GraphRaised(e) from None
            raise

    def __getattr__(self, name: str):  # ``aot_graphs``, ``source``... of the compiled graph
        return getattr(self.__dict__["compiled"], name)


STATE_SWITCHES = (torch._C._set_grad_enabled, torch.amp._enter_autocast, torch.amp._exit_autocast)


def on_error(compiled, gm: torch.fx.GraphModule, enters_grad_mode: bool = False):
    """``compiled``, wrapped as [Note: a graph that raises] says where that is needed."""
    calls = [n for n in gm.graph.nodes if n.op in ("call_function", "call_method")]
    switches_state = enters_grad_mode or any(n.target in STATE_SWITCHES for n in calls)
    # can the frame run again after gm raised: did it change nothing but grad mode and autocast?
    rerunnable = not any(is_impure(n) for n in calls if n.target not in STATE_SWITCHES)
    if not switches_state and not rerunnable:
        return compiled
    return RestoresStateOnError(compiled, switches_state, rerunnable)


@contextlib.contextmanager
def restored_grad_mode():
    prior = torch.is_grad_enabled()
    try:
        yield
    finally:
        torch._C._set_grad_enabled(prior)


def is_impure(node: torch.fx.Node) -> bool:
    """A node that must run even if nothing reads its result (in-place ops, grad mode, RNG, profiler)."""
    t = node.target
    if node.op not in ("call_function", "call_method"):
        return node.op in ("placeholder", "output")
    if writes_in_place(node):
        return True
    if t in (torch._C._set_grad_enabled, torch.amp._enter_autocast, torch.amp._exit_autocast) or "profiler" in str(t):
        return True
    name = t if isinstance(t, str) else getattr(t, "__name__", str(t))
    return any(r in name for r in RANDOM_OPS)


def writes_in_place(node: torch.fx.Node) -> bool:
    """A call that may write into a tensor it is given: an in-place method or operator, ``setitem``, ``out=``,
    ``inplace=True``."""
    t = node.target
    name = t if isinstance(t, str) else getattr(t, "__name__", str(t))
    return node.op in ("call_function", "call_method") and (
        name.endswith("_") and not name.endswith("__") or name.startswith("i") and t in _INPLACE_OPERATORS or
        t is operator.setitem or "out" in node.kwargs or has_inplace_flag(node))


def has_inplace_flag(node: torch.fx.Node) -> bool:
    """``F.relu(x, inplace=True)`` (or ``F.relu(x, True)``): a functional that writes into its input."""
    if node.kwargs.get("inplace") is True:
        return True
    if node.op != "call_function" or not any(a is True for a in node.args):
        return False
    try:
        bound = inspect.signature(node.target).bind(*node.args, **node.kwargs)
    except (TypeError, ValueError):  # a builtin without a signature, or arguments it would not take
        return False
    return bound.arguments.get("inplace") is True


_INPLACE_OPERATORS = {getattr(operator, n) for n in dir(operator) if n.startswith("i") and n[1:] in dir(operator)
                      and n not in ("index", "is_", "is_not", "invert")}


def is_module_attribute(output, source: Source) -> bool:
    """Is ``source`` an attribute of an ``nn.Module`` (a buffer or parameter: kept static)?"""
    from .source import AttrSource
    from .variables.nn_module import is_module_store
    if is_module_store(source):
        return True
    if not isinstance(source, AttrSource):
        return False
    try:
        return isinstance(source.base.get_value(output.f_locals, output.f_globals), torch.nn.Module)
    except Exception:  # noqa: BLE001
        return False


class OutputGraph:
    def __init__(self, f_code: types.CodeType, f_globals: dict, f_locals: dict, compiler_fn: Callable,
                 export_name: str):
        self.f_code = f_code
        self.f_globals = f_globals
        self.f_locals = f_locals  # the real values: sources are evaluated against them
        self.compiler_fn = compiler_fn
        self.graph = torch.fx.Graph()
        self.tracer = torch.fx.proxy.GraphAppendingTracer(self.graph)
        # [Note: one ShapeEnv per translation] Symbols, their ranges and the guards on them belong to this frame's
        # trace.  Without dynamic inputs it holds nothing and every fake tensor is static (dynamic_shapes.py).
        self.shape_env = dynamic_shapes.ShapeEnv()
        self.fake_mode = FakeTensorMode(shape_env=self.shape_env)
        self.symbolic_inputs: list[tuple[Source, Any]] = []  # every fakified input, for ShapeEnv.produce_guards
        self.marked_symbols: list[tuple[str, Any]] = []  # mark_dynamic dims: (name, symbol)
        self.input_fakes: dict[str, tuple[torch.Tensor, torch.Tensor]] = {}
        self.int_symbols: list[tuple[Source, Any]] = []  # int arguments traced as symbols: (source, symbol)
        self.shape_guard_frames: list[tuple[Any, traceback.FrameSummary | None]] = []
        self.symbol_frames: dict[Any, traceback.FrameSummary | None] = {}
        self.ctx = None
        self.stretch_breaks: list = []  # the breaks native stretches stand for ([Note: native stretch])
        self.grad_enabled = torch.is_grad_enabled()
        from .variables.ctx_manager import autocast_state
        self.autocast_state = autocast_state()  # see [Note: autocast state]
        self.graph_inputs: list[tuple[Source, torch.Tensor, torch.fx.Proxy]] = []
        self.source_cache: dict[str, VariableTracker] = {}
        self.tensor_by_id: dict[int, TensorVariable] = {}
        # id -> (object, tracker) of the lists, dicts and user objects read from the frame: [Note: aliased inputs]
        self.object_by_id: dict[int, tuple[Any, VariableTracker]] = {}
        self.guards: dict[tuple, Guard] = {}
        self.side_effects = SideEffects()
        self.root_cells: dict[int, Any] = {}
        self.export_name = export_name
        self.current_tx = None
        self.add_guard("GRAD_MODE", None, self.grad_enabled)
        self.add_guard("DEFAULT_DTYPE", None, torch.get_default_dtype())
        self.add_guard("AUTOCAST", None, self.autocast_state)

    # --- guards ---------------------------------------------------------------------------------------------
    def add_guard(self, kind: str, source: Source | None, expected: Any = None, extra: tuple = ()) -> None:
        g = Guard(kind, source, expected, self.user_frame(), extra)
        self.guards.setdefault(g.key(), g)

    def user_frame(self) -> traceback.FrameSummary | None:
        tx = self.current_tx
        return tx.frame_summary() if tx is not None else None

    def stamp_shape_guards(self) -> None:
        """Remember the user line of each guard the ShapeEnv recorded since the last look (for show_guards)."""
        new = self.shape_env.guards[len(self.shape_guard_frames):]
        self.shape_guard_frames += [(g, self.user_frame()) for g in new]

    def guard_list(self) -> list[Guard]:
        self.stamp_shape_guards()
        guards = [self.refreshed_tensor_match(g) for g in self.guards.values()] + dynamic_shapes.symbolic_guards(self)
        tensors = [s for s, v, _ in self.graph_inputs if isinstance(v, torch.Tensor)]
        if len(tensors) > 1:
            guards.append(Guard("NO_TENSOR_ALIASING", tensors[0], None, None, tuple(tensors[1:])))
        objects = [vt.source for _, vt in self.object_by_id.values()]
        if len(objects) > 1:
            guards.append(Guard("NO_ALIASING", objects[0], None, None, tuple(objects[1:])))
        return guards

    def tensor_values(self) -> dict[str, torch.Tensor]:
        """The frame's tensors that became graph inputs, by source name: what the TENSOR_MATCHes were made from."""
        return {name: value for name, (value, _) in self.input_fakes.items()}

    def refreshed_tensor_match(self, g: Guard) -> Guard:
        """TENSOR_MATCH reads sizes after tracing: a symbol the trace specialised (``range(s0)`` made ``s0 == 5``)
        is a plain number by now, which TENSOR_MATCH checks (``produce_guards`` leaves static sizes to it)."""
        if g.kind != "TENSOR_MATCH" or g.source.name() not in self.input_fakes:
            return g
        value, fake = self.input_fakes[g.source.name()]
        return dataclasses.replace(g, expected=TensorMeta.of(value, fake))

    # --- graph construction --------------------------------------------------------------------------------
    def create_proxy(self, kind: str, target: Any, args: tuple, kwargs: dict) -> torch.fx.Proxy:
        proxy = self.tracer.create_proxy(kind, target, args, kwargs)
        tx = self.current_tx
        if tx is not None:
            proxy.node.meta["stack_trace"] = "".join(traceback.format_list([tx.frame_summary()]))
            proxy.node.meta["user_frame"] = tx.frame_summary()
        return proxy

    def add_graph_input(self, tx, source: Source, value: torch.Tensor) -> TensorVariable:
        """A tensor read from the frame becomes a placeholder (deduplicated by identity)."""
        if id(value) in self.tensor_by_id:
            existing = self.tensor_by_id[id(value)]
            self.add_guard("DUPLICATE_INPUT", source, None, (existing.source,))
            return existing
        fake = self.fakify(source, value)
        self.input_fakes[source.name()] = (value, fake)
        self.add_guard("TENSOR_MATCH", source, TensorMeta.of(value, fake))
        proxy = self.new_placeholder(source, value, fake)
        var = TensorVariable(proxy, fake, source=source)
        self.tensor_by_id[id(value)] = var
        return var

    def fakify(self, source: Source, value: torch.Tensor) -> torch.Tensor:
        """The fake tensor standing for ``value``: sizes that are dynamic become fresh ShapeEnv symbols."""
        is_state = isinstance(value, torch.nn.Parameter) or is_module_attribute(self, source)
        dynamic = dynamic_shapes.dynamic_dims_for_tensor(self, source, value, is_state)
        marked = getattr(value, "_minidynamo_dynamic_dims", set())
        try:
            fake = self.fake_mode.from_tensor(value, source=dynamic_shapes.ShapeGuardSource(source.name()),
                                              symbolic_context=dynamic_shapes.symbolic_context(value, dynamic))
        except RuntimeError as e:  # a view made under no_grad, its base since written in place: autograd
            # refuses to say whether it is a leaf, and eager never asks unless the code differentiates through it
            # (fuzz round 12: an internal error)
            unimplemented(f"tensor {source.name()} cannot be traced: {str(e).splitlines()[0][:120]}",
                          "the code reading it runs eagerly")
        for d, size in enumerate(fake.shape):
            if dynamic_shapes.is_symbolic(size):
                self.symbol_frames.setdefault(size.node.expr, self.user_frame())
                if d in marked:
                    self.marked_symbols.append((f"{source.name()}.size()[{d}]", size.node.expr))
        self.symbolic_inputs.append((source, fake))
        return fake

    def add_symint_input(self, tx, source: Source, value: int):
        """An int argument traced as a symbol: a placeholder whose example value is a SymInt."""
        from .variables.sym_node import SymNodeVariable
        guard_source = dynamic_shapes.ShapeGuardSource(source.name())
        sym = self.shape_env.create_symbol(value, guard_source, dynamic_dim=DimDynamic.DYNAMIC, positive=None,
                                           do_not_specialize_zero_one=True)  # an int, not a size: any value
        sym_int = self.shape_env.create_symintnode(sym, hint=value, source=guard_source)
        self.symbol_frames.setdefault(sym, self.user_frame())
        self.int_symbols.append((source, sym))
        self.symbolic_inputs.append((source, sym_int))
        self.add_guard("SYMINT_MATCH", source, int)  # an int, and one that fits the graph's int64
        return SymNodeVariable(self.new_placeholder(source, value, sym_int), sym_int, source=source)

    def new_placeholder(self, source: Source, value: Any, fake: Any) -> torch.fx.Proxy:
        name = re.sub(r"[^0-9a-zA-Z_]+", "_", source.name()).strip("_")
        first_op = next((n for n in self.graph.nodes if n.op != "placeholder"), None)
        if first_op is not None:
            with self.graph.inserting_before(first_op):
                node = self.graph.placeholder(name)
        else:
            node = self.graph.placeholder(name)
        node.meta["example_value"] = fake
        node.meta["source"] = source.name()
        proxy = torch.fx.Proxy(node, self.tracer)
        self.graph_inputs.append((source, value, proxy))
        return proxy

    def remove_node_if_pure(self, node: torch.fx.Node) -> None:
        if not node.users and not is_impure(node):
            self.graph.erase_node(node)

    def root_cell_for(self, tx, fn, index: int, cell, source: Source | None):
        """The tracker for cell ``index`` of a real function's closure (shared by every inlining of it)."""
        from .variables.builder import VariableBuilder
        from .variables.functions import CellVariable
        key = id(cell)
        if key not in self.root_cells:
            try:
                contents = cell.cell_contents
            except ValueError:
                contents_vt = None
            else:
                if source is not None:
                    contents_vt = VariableBuilder(tx, source)(contents)
                elif isinstance(contents, torch.Tensor):
                    unimplemented("a tensor in the closure of a function with no known source")
                else:  # e.g. the __class__ cell of a method that calls super()
                    from .variables.builder import wrap_constant_result
                    contents_vt = wrap_constant_result(contents)
            self.root_cells[key] = CellVariable(contents_vt, source=source)
        return self.root_cells[key]

    # --- compiling ------------------------------------------------------------------------------------------
    def count_calls(self) -> int:
        return sum(1 for n in self.graph.nodes if n.op in ("call_function", "call_method", "call_module"))

    def dead_code_elimination(self) -> None:
        for node in reversed(list(self.graph.nodes)):
            if node.op in ("call_function", "call_method") and not node.users and not is_impure(node):
                self.graph.erase_node(node)

    def compile_subgraph(self, outputs: list[VariableTracker]) -> tuple[str | None, list[Source]]:
        """Finish the graph with ``outputs``, compile it, install it; returns (global name, input sources)."""
        self.graph.output(tuple(o.as_proxy().node for o in outputs))
        self.dead_code_elimination()
        for source, value, proxy in list(self.graph_inputs):
            if not proxy.node.users:
                self.graph.erase_node(proxy.node)
                self.graph_inputs.remove((source, value, proxy))
        if self.count_calls() == 0 and not outputs:
            return None, []
        gm = torch.fx.GraphModule(torch.nn.Module(), self.graph, class_name="GraphModule")
        gm.meta["user_frame"] = self.f_code.co_name
        example_inputs = [value for _, value, _ in self.graph_inputs]
        name = f"__compiled_fn_{unique_id('g').split('_')[-1]}"
        t0 = time.perf_counter()
        entry = hoist_leading_grad_mode(gm)
        with restored_grad_mode():  # a compiler that traces gm runs its _set_grad_enabled calls too
            if entry is not None:
                torch._C._set_grad_enabled(entry)
            compiled = self.compiler_fn(gm, example_inputs)
        if entry is not None:
            compiled = EntersGradMode(compiled, entry)
        compiled = on_error(compiled, gm, enters_grad_mode=entry is not None)
        if (final := final_grad_mode(gm)) is not None:
            compiled = LeavesGradMode(compiled, final)
        self.compile_time = time.perf_counter() - t0
        self.gm = gm
        if self.count_calls():
            counters["stats"]["unique_graphs"] += 1
        if config.debug >= 1:
            print(f"[minidynamo] graph {name} for {self.f_code.co_name}:\n{gm.print_readable(print_output=False)}")
        self.f_globals[name] = compiled
        return name, [s for s, _, _ in self.graph_inputs]
