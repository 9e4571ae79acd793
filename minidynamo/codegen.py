"""PyCodegen: emit the bytecode that rebuilds Python values after the graph has run.

After tracing, the translator knows the *symbolic* return value (say a tuple of two graph outputs and a constant).
``PyCodegen`` turns each tracker back into instructions: graph outputs are read from the tuple the compiled graph
returned, sourced values are re-loaded from where they came from, containers are rebuilt, constants are loaded.
Mirrors ``torch/_dynamo/codegen.py``.
"""
from __future__ import annotations

import types
from typing import Any

from bytecode import Instr

from . import bytecode_transformation as bt
from .variables.base import VariableTracker
from .variables.constant import LITERAL_TYPES
from .variables.dicts import DictVariable, SetVariable
from .variables.functions import NestedUserFunctionVariable, PartialVariable
from .variables.iter import ListIteratorVariable
from .variables.lists import BaseListVariable
from .variables.misc import EqualityMaskVariable

GRAPH_OUT = "___graph_out"

# [Note: one object per tracker]  A list, dict, set or tuple made inside the compiled frame is one tracker however
# many names, containers and stack slots hold it (``a = [x]; b = a``).  Rebuilt once per reference it would become
# several objects: ``return a, a`` would give two lists, and after a graph break ``a.append(1)`` would not show in
# ``b``.  So the first rebuild keeps the object in a temporary and later ones load it (upstream's
# ``PyCodegen.tempvars``).  So is an iterator: ``zip(it, it)`` must take from one object, and so is a function
# made in the frame: a graph break at ``f.__defaults__ = (5,)`` stores into the ``f`` the resume function gets; and
# so is a mask left unmade, which a stack slot and a local hand to the same two subscripts.
# Sourced values are reloaded from their source, which is the same object anyway.
REBUILT_ONCE = (BaseListVariable, DictVariable, SetVariable, ListIteratorVariable, NestedUserFunctionVariable,
               PartialVariable, EqualityMaskVariable)


# [Note: deterministic const names]  An object the transformed code needs (a helper function, the compile
# context, a module) is stashed in the frame's globals and loaded by name.  The name numbers the stashed objects of
# that globals dict in the order they were first stashed: ``___const_function_0``, ``___const_CompileContext_1``.
# Upstream (``install_global_by_id``) names them by ``id(value)``, a memory address that changes from process to
# process, so the transformed bytecode of one program read differently on every run.  Numbered, it is the same
# in every fresh process that compiles the same program: notebooks, docs and cache keys stay stable.  An object
# already stashed keeps its name; names are never removed, so a number is never given twice.
CONST_PREFIX = "___const_"


def const_global_name(f_globals: dict, value: Any) -> str:
    """The name ``value`` is stashed under in ``f_globals`` (stashing it first if it is not there yet)."""
    stashed = 0
    for name, v in f_globals.items():
        if name.startswith(CONST_PREFIX):
            if v is value:
                return name
            stashed += 1
    name = f"{CONST_PREFIX}{type(value).__name__}_{stashed}"
    f_globals[name] = value
    return name


class PyCodegen:
    def __init__(self, tx, code: types.CodeType, f_globals: dict, graph_outputs: dict[int, int] | None = None):
        self.tx = tx
        self.code = code
        self.f_globals = f_globals
        self.graph_outputs = graph_outputs or {}  # id(tracker) -> index in the graph's output tuple
        self.instructions: list[Instr] = []
        self.source_locals: dict[str, str] = {}  # source name -> the local holding its value (load_graph_inputs)
        # id(tracker) -> (the local holding the object it was rebuilt as, the tracker): see [Note: one object
        # per tracker].  The tracker is kept so that its id cannot be reused by a temporary one.
        self.tempvars: dict[int, tuple[str, VariableTracker]] = {}
        self.rebuilding: set[int] = set()  # ids of the trackers being rebuilt now (a cycle is refused)

    def __call__(self, vt: VariableTracker) -> None:
        """Push ``vt``'s value on the stack."""
        if id(vt) in self.graph_outputs:
            self.append(Instr("LOAD_FAST", GRAPH_OUT))
            self.load_const(self.graph_outputs[id(vt)])
            self.subscr()
            return
        if vt.source is not None:  # the real object (after side effects were applied to it)
            vt.source.reconstruct(self)
            return
        if id(vt) in self.tempvars:
            self.load_local(self.tempvars[id(vt)][0])
            return
        if id(vt) in self.rebuilding:  # BUILD_LIST makes a list from items that already exist: not itself
            from .exc import unimplemented
            unimplemented(f"{vt.describe()} contains itself: generated code cannot rebuild it",
                          "do not put a container made in the compiled function inside itself")
        self.rebuilding.add(id(vt))
        try:
            vt.reconstruct(self)
        finally:
            self.rebuilding.discard(id(vt))
        if isinstance(vt, REBUILT_ONCE):
            name = f"___tmp_{len(self.tempvars)}"
            self.append(Instr("COPY", 1))
            self.store_local(name)
            self.tempvars[id(vt)] = (name, vt)

    def append(self, *instrs: Instr) -> None:
        self.instructions.extend(instrs)

    # --- loads ------------------------------------------------------------------------------------------------
    def load_const(self, value: Any) -> None:
        if type(value) in LITERAL_TYPES or (type(value) is tuple and all(type(v) in LITERAL_TYPES for v in value)):
            self.append(Instr("LOAD_CONST", value))
        else:
            self.load_const_object(value)

    def load_const_object(self, value: Any, push_null: bool = False) -> None:
        """Load an arbitrary object by stashing it in the frame's globals (``___const_<type>_<k>``)."""
        self.append(bt.create_load_global(const_global_name(self.f_globals, value), push_null))

    def load_source(self, source) -> None:
        """Push ``source``'s value: from a local where ``load_graph_inputs`` saved it, else read it again."""
        local = self.source_locals.get(source.name())
        if local is not None:
            self.append(Instr("LOAD_FAST", local))
        else:
            source.reconstruct(self)

    def load_graph_inputs(self, sources: list) -> None:
        """Push the compiled graph's inputs, reading each module a symbolic index selects only once.

        [Note: one read of a module selected at run time]  ``experts[L['expert_idx']]`` is read by a Python
        function (``utils.module_list_item``: [Note: reading a module list's item]), and an expert's four
        parameters all sit under it.
        So a ``DynamicGetItemSource`` that several inputs share is read once into a local, and the inputs load it
        from there (the guard function does the same for its checks: [Note: guard order and shared prefixes]).
        Nothing runs between the reads, so they would all have returned the same object."""
        from .source import DynamicGetItemSource
        uses: dict[str, int] = {}
        shared = {}
        for source in sources:
            prefix = source
            while hasattr(prefix, "base"):
                prefix = prefix.base
                if isinstance(prefix, DynamicGetItemSource):
                    uses[prefix.name()] = uses.get(prefix.name(), 0) + 1
                    shared[prefix.name()] = prefix
        for k, name in enumerate(n for n, count in uses.items() if count > 1):
            self.load_source(shared[name])
            self.store_local(f"___selected_{k}")
            self.source_locals[name] = f"___selected_{k}"
        for source in sources:
            self.load_source(source)

    def load_local(self, name: str) -> None:
        if name in self.code.co_cellvars or name in self.code.co_freevars:
            self.append(bt.create_load_deref(name, self.code))
        else:
            self.append(Instr("LOAD_FAST", name))

    def load_closure(self, name: str) -> None:
        """Push the cell object of the frame's cell or free variable ``name`` (``LOAD_CLOSURE``, 3.11+)."""
        if name not in self.code.co_cellvars and name not in self.code.co_freevars:
            from .exc import unimplemented
            unimplemented(f"no cell {name!r} in {self.code.co_name} to hand on at a graph break")
        self.append(bt.create_load_closure(name, self.code))

    def load_global(self, name: str, push_null: bool = False) -> None:
        self.append(bt.create_load_global(name, push_null))

    def load_import_from(self, module_name: str, name: str) -> None:
        import sys
        self.load_const_object(sys.modules[module_name])
        self.load_attr(name)

    def load_attr(self, name: str) -> None:
        self.append(bt.create_load_attr(name))

    def subscr(self) -> None:
        self.append(Instr("BINARY_SUBSCR"))

    def push_null(self) -> None:
        self.append(Instr("PUSH_NULL"))

    # --- builds and calls -------------------------------------------------------------------------------------
    def build(self, container: type, n: int) -> None:
        if container is tuple:
            self.append(Instr("BUILD_TUPLE", n))
        elif container is list:
            self.append(Instr("BUILD_LIST", n))
        elif container is set:
            self.append(Instr("BUILD_SET", n))
        elif container is dict:
            self.append(Instr("BUILD_MAP", n))
        elif container is slice:
            self.append(Instr("BUILD_SLICE", n))
        else:
            raise AssertionError(container)

    def call(self, nargs: int) -> None:
        """Call: the stack holds NULL (or self), the callable, then ``nargs`` arguments."""
        self.append(*bt.create_call(nargs))

    def get_iter(self) -> None:
        self.append(Instr("GET_ITER"))

    # --- stores -----------------------------------------------------------------------------------------------
    def store_attr(self, name: str) -> None:
        self.append(Instr("STORE_ATTR", name))

    def store_attr_raw(self, obj: VariableTracker, name: str, value_local: str) -> None:
        """``object.__setattr__(obj, name, <local>)``: a store that skips the class's own ``__setattr__``."""
        self.load_const_object(object.__setattr__, push_null=True)
        self(obj)
        self.load_const(name)
        self.load_local(value_local)
        self.call(3)
        self.append(Instr("POP_TOP"))

    def delete_attr(self, name: str) -> None:
        self.append(Instr("DELETE_ATTR", name))

    def store_global(self, name: str) -> None:
        self.append(Instr("STORE_GLOBAL", name))

    def store_local(self, name: str) -> None:
        if name in self.code.co_cellvars or name in self.code.co_freevars:
            self.append(bt.create_store_deref(name, self.code))
        else:
            self.append(Instr("STORE_FAST", name))

    def apply_container_mutation(self, obj: VariableTracker, new_items: str) -> None:
        """Make the real list/dict/set behind ``obj.source`` hold the items stored in local ``new_items``."""
        from .variables.dicts import DictVariable, SetVariable

        if isinstance(obj, (DictVariable, SetVariable)):
            # obj.clear(); obj.update(new)
            obj.source.reconstruct(self)
            self.append(bt.create_load_method("clear"))
            self.call(0)
            self.append(Instr("POP_TOP"))
            obj.source.reconstruct(self)
            self.append(bt.create_load_method("update"))
            self.load_local(new_items)
            self.call(1)
            self.append(Instr("POP_TOP"))
            return
        # lst[:] = new
        self.load_local(new_items)
        obj.source.reconstruct(self)
        self.append(Instr("LOAD_CONST", None), Instr("LOAD_CONST", None), Instr("BUILD_SLICE", 2))
        self.append(Instr("STORE_SUBSCR"))


    def advance_iterator(self, it: VariableTracker) -> None:
        """``advance_iterator(<real iterator>, n)``: take the ``n`` items the trace took from an input iterator."""
        from .utils import advance_iterator
        self.load_const_object(advance_iterator, push_null=True)
        it.source.reconstruct(self)
        self.load_const(it.consumed)
        self.call(2)
        self.append(Instr("POP_TOP"))


class Fresh(VariableTracker):
    """Rebuild a sourced container from its items rather than reloading it from its source."""

    def __init__(self, obj: VariableTracker):
        super().__init__()
        self.obj = obj

    def reconstruct(self, codegen):
        saved, self.obj.source = self.obj.source, None
        try:
            reconstruct = type(self.obj).reconstruct
            if isinstance(self.obj, DictVariable) and self.obj.user_cls is not dict:
                reconstruct = DictVariable.reconstruct
            reconstruct(self.obj, codegen)
        finally:
            self.obj.source = saved


class LoadedObject(VariableTracker):
    """A value the generated code loads from a stashed object (a compiled callee, a GradModeExit...): the object
    itself, or ``call_fn(obj, call_arg)`` called at run time."""

    def __init__(self, obj, call_arg: VariableTracker | None = None, call_fn=None):
        super().__init__()
        self.obj = obj
        self.call_arg = call_arg
        self.call_fn = call_fn

    def reconstruct(self, codegen):
        if self.call_fn is not None:  # call_fn(obj, call_arg) at run time
            codegen.load_const_object(self.call_fn, push_null=True)
            codegen.load_const_object(self.obj)
            codegen(self.call_arg)
            codegen.call(2)
        else:
            codegen.load_const_object(self.obj)
