"""``nn.Module``s: attributes, parameters, submodules, containers, and calls that inline ``forward``.

A module read from the frame is guarded by its type and forward-hook ids (NN_MODULE).  Its parameters and buffers
become graph inputs (sources like ``L['self']._modules['gate']._parameters['weight']``: see [Note: module sources
read the module's dicts]), plain attributes become guarded constants (``self.training``, ``self.top_k``), and
calling it inlines its forward hooks and ``type(m).forward``.  ``nn.Sequential`` / ``ModuleList`` / ``ModuleDict``
support indexing, ``len`` and iteration.  Mirrors ``torch/_dynamo/variables/nn_module.py`` (upstream today inlines
builtin modules the same way, ``inline_inbuilt_nn_modules``).
"""
from __future__ import annotations

import inspect
import types

import torch
from torch.nn.modules import module as mod_mod

from ..exc import unimplemented
from ..source import AttrSource, GetItemSource, Source
from .base import BoundMethodVariable, VariableTracker
from .constant import ConstantVariable
from .iter import ListIteratorVariable
from .lists import TupleVariable

ITERATION_METHODS = {"parameters", "buffers", "children", "modules", "named_parameters", "named_buffers",
                     "named_children", "named_modules", "keys", "values", "items"}


def has_hooks(m: torch.nn.Module) -> bool:
    """Does calling ``m`` do more than ``forward`` (its own hooks, or global module hooks)?"""
    return bool(m._forward_hooks or m._forward_pre_hooks or m._backward_hooks or
                getattr(m, "_backward_pre_hooks", None) or any_global_module_hooks())


def plain_forward(m: torch.nn.Module) -> types.FunctionType | None:
    """The function calling ``m`` runs when the call is only its ``forward``: the class's, read now (a forward
    replaced on the class later is the new one), a Python function; None where ``nn.Module.__call__`` would run
    more or something else (hooks, a ``forward`` set on the instance)."""
    forward = type(m).forward
    if type(forward) is not types.FunctionType or "forward" in m.__dict__ or has_hooks(m):
        return None
    return forward


def any_global_module_hooks() -> bool:
    """``register_module_forward_hook`` & co.: hooks every module call runs (not traced: refused)."""
    return bool(mod_mod._global_forward_hooks or mod_mod._global_forward_pre_hooks or
                mod_mod._global_backward_hooks or getattr(mod_mod, "_global_backward_pre_hooks", None) or
                getattr(mod_mod, "_global_forward_hooks_always_called", None))


def unsupported_hooks(m: torch.nn.Module) -> str | None:
    """Why ``nn.Module.__call__``'s hook logic cannot be inlined for ``m`` (None: it can)."""
    if m._backward_hooks or getattr(m, "_backward_pre_hooks", None):
        return "backward hooks"
    if any_global_module_hooks():
        return "global module hooks (torch.nn.modules.module.register_module_*_hook)"
    if getattr(m, "_forward_pre_hooks_with_kwargs", None) or getattr(m, "_forward_hooks_with_kwargs", None):
        return "forward hooks registered with with_kwargs=True"
    if getattr(m, "_forward_hooks_always_called", None):
        return "forward hooks registered with always_call=True"
    return None


class NNModuleVariable(VariableTracker):
    def __init__(self, module: torch.nn.Module, **kw):
        super().__init__(**kw)
        self.module = module
        self.value = module

    def python_type(self):
        return type(self.module)

    def truth(self, tx):
        return True

    def describe(self):
        return f"module {type(self.module).__name__}"

    def _repr_body(self):
        return type(self.module).__name__

    def _child(self, tx, key, value) -> VariableTracker:
        from .builder import VariableBuilder
        if self.source is None:
            unimplemented(f"a module built inside the compiled function ({self.describe()})",
                          "construct modules outside the compiled function")
        return VariableBuilder(tx, module_child_source(self.source, self.module, key))(value)

    def var_getattr(self, tx, name):
        m = self.module
        pending = tx.output.side_effects.pending_attr(self, name)
        if pending is not None:
            return pending
        d = m.__dict__
        for store in ("_parameters", "_buffers", "_modules"):
            if name in d.get(store, {}):
                value = d[store][name]
                if value is None and self.source is None:
                    return ConstantVariable(None)
                # None too goes through the builder, which guards it: a Linear without a bias (``bias`` is None
                # in ``_parameters``) must not run the graph of one that has one, nor the other way round
                return self._child(tx, name, value)
        if name in d:
            return self._child(tx, name, d[name])
        if name in ITERATION_METHODS:
            return BoundMethodVariable(self, name)
        static = inspect.getattr_static(type(m), name, None)
        from .user_defined import lookup_class_attribute
        return lookup_class_attribute(tx, self, type(m), name, static)

    def call_function(self, tx, args, kwargs):
        """``m(*args)``: inline ``nn.Module._call_impl``: forward pre-hooks, ``forward``, forward hooks.

        [Note: module hooks]  A pre-hook ``hook(m, args)`` may return new args (a non-tuple becomes a 1-tuple); a
        forward hook ``hook(m, args, out)`` may return a new output; ``None`` keeps them.  The hooks are read
        from ``m._forward_pre_hooks[id]`` / ``m._forward_hooks[id]`` and inlined like any user function (guarded
        through those sources).  The NN_MODULE guard checks the hook dicts' keys (each registration gets a new
        id), so adding or removing a hook recompiles; a global-hooks guard makes registering a global module
        hook recompile too, and then refuse.  Backward hooks, global hooks, ``with_kwargs`` and ``always_call``
        hooks are refused (graph break).
        """
        m = self.module
        tx.output.add_guard("NO_GLOBAL_MODULE_HOOKS", None, True)
        why = unsupported_hooks(m)
        if why is not None:
            unimplemented(f"module {type(m).__name__} has {why}", "remove those hooks, or call it outside")
        if (m._forward_pre_hooks or m._forward_hooks) and self.source is None:
            unimplemented(f"hooks of a module built inside the compiled function ({self.describe()})")
        for hook_id in m._forward_pre_hooks:
            result = self._hook(tx, "_forward_pre_hooks", hook_id).call_function(
                tx, [self, TupleVariable(list(args))], {})
            if not (isinstance(result, ConstantVariable) and result.value is None):
                args = result.items if isinstance(result, TupleVariable) else [result]
        out = self._call_forward(tx, args, kwargs)
        for hook_id in m._forward_hooks:
            result = self._hook(tx, "_forward_hooks", hook_id).call_function(
                tx, [self, TupleVariable(list(args)), out], {})
            if not (isinstance(result, ConstantVariable) and result.value is None):
                out = result
        return out

    def _hook(self, tx, store: str, hook_id: int) -> VariableTracker:
        from .builder import VariableBuilder
        hook = getattr(self.module, store)[hook_id]
        return VariableBuilder(tx, GetItemSource(AttrSource(self.source, store), hook_id))(hook)

    def _call_forward(self, tx, args, kwargs):
        forward = type(self.module).forward
        from .. import polyfills
        from .functions import UserMethodVariable
        if polyfills.uses_cumulative_average(self.module):  # [Note: BatchNorm's cumulative moving average]
            return UserMethodVariable(polyfills.batch_norm_cumulative_average, self).call_function(tx, args, kwargs)
        if "forward" in self.module.__dict__:
            unimplemented(f"a forward set on the {type(self.module).__name__} instance itself",
                          "the module is called natively; define forward on its class to compile it")
        src = AttrSource(AttrSource(self.source, "__class__"), "forward") if self.source else None
        if self.source is not None:  # [Note: guarding what the class holds] in user_defined.py
            tx.output.add_guard("ID_MATCH", AttrSource(AttrSource(self.source, "forward"), "__func__"), forward)
        return UserMethodVariable(forward, self, source=src).call_function(tx, args, kwargs)

    # --- containers -----------------------------------------------------------------------------------------
    def guard_structure(self, tx, recursive: bool = False) -> None:
        """[Note: a module's structure is guarded]  ``for m in self.layers``, ``len(self.layers)``,
        ``self.layers[-1]``, ``"a" in self.heads`` and ``self.parameters()`` read which submodules (parameters,
        buffers) a module holds.  Their NN_MODULE guards check each item's type and hooks, not that the list is
        the same: ``layers.append(...)`` between calls reused the graph of the shorter list (a wrong answer,
        translator fuzz round 9).  So the keys of the dicts read are guarded, as upstream's DICT_KEYS guard on
        ``_modules`` does; ``recursive`` guards every module below too (``parameters()`` walks them all)."""
        if self.source is None:
            return

        def guard(source, module):
            for store in MODULE_STORES if recursive else ("_parameters" if isinstance(
                    module, torch.nn.ParameterList) else "_modules",):
                tx.output.add_guard("DICT_KEYS", AttrSource(source, store), list(module.__dict__[store].keys()))
            if recursive:
                for key, sub in module._modules.items():
                    if sub is not None:
                        guard(module_child_source(source, module, key), sub)

        guard(self.source, self.module)

    def _items(self, tx) -> list[VariableTracker]:
        m = self.module
        self.guard_structure(tx)
        if isinstance(m, (torch.nn.Sequential, torch.nn.ModuleList)):
            return [self._child(tx, k, sub) for k, sub in m._modules.items()]
        if isinstance(m, torch.nn.ModuleDict):
            return [ConstantVariable(k) for k in m._modules]
        if isinstance(m, torch.nn.ParameterList):
            return [self._child(tx, k, p) for k, p in m._parameters.items()]
        unimplemented(f"iterating over {self.describe()}")

    def has_unpack_var_sequence(self, tx):
        return isinstance(self.module, (torch.nn.Sequential, torch.nn.ModuleList, torch.nn.ModuleDict,
                                        torch.nn.ParameterList))

    def unpack_var_sequence(self, tx):
        return self._items(tx)

    def call_method(self, tx, name, args, kwargs):
        m = self.module
        if name == "__len__":
            self.guard_structure(tx)
            return ConstantVariable(len(m))
        if name == "__getitem__":
            return self._getitem(tx, args[0])
        if name == "__contains__" and isinstance(m, torch.nn.ModuleDict):
            self.guard_structure(tx)
            return ConstantVariable(args[0].as_python_constant() in m._modules)
        if name in ("keys", "values", "items") and isinstance(m, torch.nn.ModuleDict):
            self.guard_structure(tx)
            # a view of ``m._modules`` (re-iterable, with a len), as ModuleDict returns; not an iterator
            from .dicts import DictVariable, DictViewVariable
            return DictViewVariable(DictVariable({k: self._child(tx, k, sub) for k, sub in m._modules.items()}), name)
        if name in ("parameters", "buffers", "children", "modules", "named_parameters", "named_buffers",
                    "named_children", "named_modules"):
            return self._iterate(tx, name, args, kwargs)
        if name == "forward":  # m.forward(x) skips the hooks, as in eager
            return self._call_forward(tx, args, kwargs)
        return self.var_getattr(tx, name).call_function(tx, args, kwargs)

    def _getitem(self, tx, index):
        m = self.module
        if isinstance(m, (torch.nn.ModuleList, torch.nn.Sequential)) and is_symbolic_frame_int(index):
            return self._symbolic_getitem(tx, index)
        key = index.as_python_constant()
        if isinstance(m, torch.nn.ModuleDict):
            return self._child(tx, key, m[key])
        if isinstance(key, slice):
            return ModuleSliceVariable(self, key, self._items(tx)[key])
        self.guard_structure(tx)  # which item -1 (or 3) is, and whether it exists, depends on the length
        keys = list(m._modules) if not isinstance(m, torch.nn.ParameterList) else list(m._parameters)
        k = _item_or_raise(keys, key, m)
        value = m._modules[k] if not isinstance(m, torch.nn.ParameterList) else m._parameters[k]
        return self._child(tx, k, value)

    def _symbolic_getitem(self, tx, index):
        """``self.experts[i]`` where ``i`` is a symbolic int argument: the item is read at run time.

        [Note: a module list indexed by a symbolic int]  A loop over experts with a graph break inside resumes
        once per expert with ``expert_idx`` as an argument.  That int is traced as a symbol (a resumed loop's
        variable: [Note: a resumed loop's variable] in dynamic_shapes.py; any other int argument once it has
        changed), but a constant index would specialise it again (``expert_idx == 3``) and give one translation,
        one graph and one set of kernels per expert.  Instead the item's source
        is ``L['self']._modules['experts'][L['expert_idx']]``, evaluated on every call: the guards check
        *that call's* module (its type, hooks, parameters' shapes), and its parameters are graph inputs read
        through it.  So every expert of the same shape shares one entry.  Nothing is assumed about the other
        items: a different one fails its own guards and recompiles.  An index out of range makes the guard
        raise, which is a failed guard.  Only the symbol itself (an argument) is accepted: a computed index
        (``i + 1``) has no source to read and is specialised as before.  Upstream specialises here (one
        recompile per expert, until ``recompile_limit``); this is our extension, kept this narrow.
        """
        from ..source import DynamicGetItemSource
        from .builder import VariableBuilder
        if self.source is None:
            unimplemented(f"a module built inside the compiled function ({self.describe()})",
                          "construct modules outside the compiled function")
        value = _item_or_raise(self.module, int(index.sym_num.node.hint), self.module)
        return VariableBuilder(tx, DynamicGetItemSource(self.source, index.source))(value)

    def _iterate(self, tx, name, args, kwargs):
        a = [x.as_python_constant() for x in args]
        k = {n: v.as_python_constant() for n, v in kwargs.items()}
        self.guard_structure(tx, recursive=name not in ("children", "named_children"))
        result = []
        for entry in getattr(self.module, name)(*a, **k):
            key, value = entry if name.startswith("named_") else (None, entry)
            path = self._path_of(value)
            vt = self._child_path(tx, path, value)
            result.append(TupleVariable([ConstantVariable(key), vt]) if key is not None else vt)
        return ListIteratorVariable(result)

    def _path_of(self, obj) -> list[str]:
        for n, v in list(self.module.named_parameters()) + list(self.module.named_buffers()) + \
                list(self.module.named_modules()):
            if v is obj:
                return [p for p in n.split(".") if p]
        unimplemented("could not find a submodule's path")

    def _child_path(self, tx, path, value):
        from .builder import VariableBuilder
        src, owner = self.source, self.module
        for p in path:
            src, owner = module_child_source(src, owner, p), getattr(owner, p)
        return VariableBuilder(tx, src)(value) if path else self

    def reconstruct(self, codegen):
        return super().reconstruct(codegen)


class ModuleSliceVariable(VariableTracker):
    """``self.layers[1:]``: a new ``ModuleList``/``Sequential`` (the same type) of some of the submodules.

    It iterates, indexes and has a ``len`` like the container; a sliced ``Sequential`` is also called, chaining
    its submodules as ``Sequential.forward`` does.  Rebuilt as ``container[key]``, which makes the same new
    object the program would have.  Anything else of the container is refused (graph break).
    """

    def __init__(self, base: VariableTracker, key: slice, children: list[VariableTracker], **kw):
        super().__init__(**kw)
        self.base = base
        self.key = key
        self.children = children
        self.module_type = base.python_type()

    def python_type(self):
        return self.module_type

    def has_unpack_var_sequence(self, tx):
        return True

    def unpack_var_sequence(self, tx):
        return list(self.children)

    def call_method(self, tx, name, args, kwargs):
        if name == "__len__":
            return ConstantVariable(len(self.children))
        if name == "__getitem__":
            key = args[0].as_python_constant()
            if isinstance(key, slice):
                return ModuleSliceVariable(self, key, self.children[key])
            return _item_or_raise(self.children, key, self.module_type())
        unimplemented(f"method {name!r} of a sliced {self.module_type.__name__}")

    def call_function(self, tx, args, kwargs):
        if not issubclass(self.module_type, torch.nn.Sequential) or len(args) != 1 or kwargs:
            unimplemented(f"calling a sliced {self.module_type.__name__}")
        tx.output.add_guard("NO_GLOBAL_MODULE_HOOKS", None, True)
        if any_global_module_hooks():
            unimplemented("a sliced Sequential called while global module hooks are registered")
        x = args[0]
        for child in self.children:
            x = child.call_function(tx, [x], {})
        return x

    def reconstruct(self, codegen):
        codegen(self.base)
        codegen.load_const(self.key)
        codegen.subscr()

    def _repr_body(self):
        return f"{self.module_type.__name__}[{self.key.start}:{self.key.stop}:{self.key.step}]"


MODULE_STORES = ("_parameters", "_buffers", "_modules")


def _item_or_raise(items, index: int, module: torch.nn.Module):
    """``items[index]``; out of range, the program's own IndexError (an ``except`` in the traced code catches it;
    uncaught, the frame runs eagerly and raises it)."""
    try:
        return items[index]
    except IndexError:
        from ..exc import raise_observed_exception
        raise_observed_exception(IndexError, [ConstantVariable(f"index {index} is out of range")],
                                 f"{type(module).__name__} index {index} is out of range")


def is_symbolic_frame_int(index: VariableTracker) -> bool:
    """Is ``index`` an int argument of the frame traced as a symbol (its own placeholder, with a source)?"""
    from .sym_node import SymNodeVariable
    return isinstance(index, SymNodeVariable) and index.source is not None and \
        index.proxy.node.op == "placeholder" and index.python_type() is int


def module_child_source(base: Source, module: torch.nn.Module, key: str) -> Source:
    """The source of ``module.<key>``: a read of the dict that holds it, e.g. ``L['self']._modules['gate']``.

    [Note: module sources read the module's dicts]  Parameters, buffers and submodules are not in a module's
    ``__dict__``: ``module.gate`` only finds them after a failed normal lookup, in ``nn.Module.__getattr__``, a
    Python function (~1 us, ten times a dict read).  Guards and the transformed code read these sources on every
    call, along chains like ``self.experts[3].net[0].weight``, so a source reads the dict directly:
    ``L['self']._modules['experts']._modules['3']._modules['net']._modules['0']._parameters['weight']``, as
    upstream's sources and guards do (``DictGetItemSource(AttrSource(base, '_modules'), name)``).  It reads what
    ``var_getattr`` looked at while tracing, so the guard checks the very fact the trace relied on.  Plain
    attributes (``self.training``, ``self.top_k``) live in ``__dict__`` and keep the attribute spelling.
    """
    stores = module.__dict__
    for store in MODULE_STORES:
        if key in stores.get(store, ()):
            return GetItemSource(AttrSource(base, store), key)
    return AttrSource(base, key)


def is_module_store(source: Source) -> bool:
    """Is ``source`` a parameter, buffer or submodule read from its module's dict (``..._parameters['w']``)?"""
    return isinstance(source, GetItemSource) and isinstance(source.base, AttrSource) and \
        source.base.member in MODULE_STORES


def module_method(tx, module_vt: NNModuleVariable, name: str) -> VariableTracker:
    return BoundMethodVariable(module_vt, name)
