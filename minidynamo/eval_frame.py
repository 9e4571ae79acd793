"""eval_frame: the frame hook.  ``minicompile(fn)`` returns a wrapper that does what PEP 523 lets Dynamo do in C.

On every call the wrapper binds the arguments to the function's parameters (the frame's ``f_locals``), looks up the
cache of compiled versions of the function's code object, runs the first whose guards pass, and on a miss translates
the frame (``convert_frame``) -- or, past ``config.recompile_limit``, or if the frame cannot be captured, runs it
eagerly with the reason recorded.  ``OptimizedModule`` wraps an ``nn.Module`` like ``torch.compile`` does.
Mirrors ``torch/_dynamo/eval_frame.py``.

[Note: one cache per minicompile call]  Upstream keeps one cache per code object, shared by every ``torch.compile``
of that function, and guards on the backend.  We keep the cache on the compile context instead (so
``minicompile(f, backend=a)`` and ``minicompile(f, backend=b)`` never see each other's entries); ``reset()`` clears all.
"""
from __future__ import annotations

import contextlib
import functools
import gc
import inspect
import types
import warnings
import weakref
from collections.abc import Callable
from typing import Any

import torch
from torch.nn.modules.batchnorm import _BatchNorm

from . import config
from .backends import lookup_backend
from .cache_entry import CacheEntries
from .convert_frame import convert_frame
from .exc import ConstraintViolationError, Unsupported, without_frames
from .native_stretch import equality_counts
from .output_graph import GraphRaised
from .resume_execution import Continuation
from .symbolic_convert import DISABLE_DYNAMO_CODE
from .utils import counters
from .variables.nn_module import plain_forward

_contexts: weakref.WeakSet[CompileContext] = weakref.WeakSet()



def code_signature(fn: types.FunctionType) -> inspect.Signature:
    """The parameters ``fn``'s code binds, which name the frame's locals.  [Note: wrapped signatures]
    ``inspect.signature`` follows ``__wrapped__`` and ``__signature__``: for a ``functools.wraps`` wrapper such
    as ``@contextmanager``'s ``helper(*args, **kwds)`` it names the wrapped function's parameters, and the traced
    frame found ``args`` unbound.  A bare function over the same code has neither attribute."""
    bare = types.FunctionType(fn.__code__, fn.__globals__, fn.__name__, fn.__defaults__, fn.__closure__)
    bare.__kwdefaults__ = fn.__kwdefaults__
    return inspect.signature(bare)


def current_defaults(fn: types.FunctionType) -> dict:
    """The default of each parameter, as ``fn`` has them now.  [Note: defaults are read at each call]  The
    cached signature (one per code object) must not supply them: ``f.__defaults__ = (3,)`` between calls, or two
    closures of one ``def`` with different defaults, share a code object, and binding with the first call's
    defaults ran every later call with them (``f(x, s=2)`` re-defaulted to 1 still multiplied by 2: a wrong
    answer, translator fuzz round 9)."""
    code = fn.__code__
    positional = code.co_varnames[:code.co_argcount]
    values = fn.__defaults__ or ()
    defaults = dict(zip(positional[len(positional) - len(values):], values))
    defaults.update(fn.__kwdefaults__ or {})
    return defaults


class CompileContext:
    """Everything one ``minicompile(...)`` call owns: its backend, options and cache."""

    def __init__(self, backend: Callable, fullgraph: bool = False, dynamic: bool | None = None):
        self.backend = backend
        self.fullgraph = fullgraph
        self.dynamic = dynamic
        self.cache: dict[types.CodeType, CacheEntries] = {}
        self.skipped: dict[types.CodeType, Unsupported] = {}
        self.fallbacks: list[Unsupported] = []
        self.recompile_reasons: list[str] = []
        self.signatures: dict[tuple, inspect.Signature] = {}  # per code and defaulted parameters
        self.graph_breaks: list[Unsupported] = []
        self.resume_fns: dict[tuple, tuple[str, types.FunctionType]] = {}
        self.resume_origin: dict[types.CodeType, tuple[types.CodeType, dict[int, int]]] = {}
        # per resume function: the variables of the loops it resumes inside (dynamic_shapes.int_is_dynamic)
        self.loop_variables: dict[types.CodeType, frozenset[str]] = {}
        self.break_hints: dict[types.CodeType, Exception] = {}  # see [Note: break hints] in convert_frame
        self.wrappers: dict[types.FunctionType, Callable] = {}
        # automatic dynamic: per code object, the sizes each input had and which changed (dynamic_shapes.py)
        self.frame_state: dict[types.CodeType, dict] = {}
        self.dynamic_log: list[str] = []
        self.generations: dict[types.CodeType, int] = {}  # per frame-state key: sizes turned dynamic so far
        _contexts.add(self)

    def reset(self) -> None:
        self.cache.clear()
        self.skipped.clear()
        self.fallbacks.clear()
        self.recompile_reasons.clear()
        self.graph_breaks.clear()
        self.resume_fns.clear()
        self.resume_origin.clear()
        self.loop_variables.clear()
        self.break_hints.clear()
        self.frame_state.clear()
        self.dynamic_log.clear()
        self.generations.clear()

    def wrapped(self, fn: types.FunctionType) -> Callable:
        """``fn`` compiled by this context when called (a callee that ran natively at a graph break)."""
        if fn not in self.wrappers:
            self.wrappers[fn] = self.wrap(fn)
        return self.wrappers[fn]

    def resume_function(self, code, offset: int, stack_slots: list, live: list, f_globals: dict, closure,
                        run_eagerly: Unsupported | None = None):
        """The resume function for (code, offset, stack layout, live locals), made once and cached; with
        ``run_eagerly``, one that is never translated (``skipped``: [Note: a break inside a try block]).

        [Note: resume functions are made from the original code]  A break inside a resume function continues in
        a resume function of the *original* code object, at the matching original offset.  So a loop with a
        break closes on itself: every iteration comes back to the same few resume functions and their caches,
        instead of making a resume function of a resume function of ... one per iteration.
        """
        from .resume_execution import enclosing_loop_variables, make_resume_code, original_offsets
        if code in self.resume_origin:
            orig, offsets = self.resume_origin[code]
            code, offset = orig, offsets[offset]
        key = (code, offset, tuple(s is None for s in stack_slots), tuple(live), run_eagerly is not None)
        if key not in self.resume_fns:
            name = f"__resume_at_{offset}_{len(self.resume_fns) + 1}"
            new_code = make_resume_code(code, offset, stack_slots, live, name)
            self.resume_origin[new_code] = (code, original_offsets(code, new_code))
            self.loop_variables[new_code] = enclosing_loop_variables(code, offset)
            # A template: the transformed code binds it to the breaking frame's live cells at each break
            # (``resume_execution.bind_closure``); ``closure`` is not used for that reason.
            fn = types.FunctionType(new_code, f_globals, name, None,
                                    tuple(types.CellType() for _ in new_code.co_freevars) or None)
            f_globals[name] = fn
            self.resume_fns[key] = (name, fn)
            if run_eagerly is not None:
                self.skipped[new_code] = run_eagerly
        return self.resume_fns[key]

    # --- the hook -----------------------------------------------------------------------------------------
    def wrap(self, fn: Callable) -> Callable:
        @functools.wraps(fn)
        def _minicompile_wrapper(*args, **kwargs):
            return self(fn, args, kwargs)

        _minicompile_wrapper._minidynamo_orig = fn
        _minicompile_wrapper._minidynamo_ctx = self
        return _minicompile_wrapper

    def frame_locals(self, fn: types.FunctionType, args: tuple, kwargs: dict) -> dict:
        code = fn.__code__
        if not kwargs and not fn.__closure__ and len(args) == code.co_argcount and \
                not code.co_flags & (inspect.CO_VARARGS | inspect.CO_VARKEYWORDS) and not code.co_kwonlyargcount:
            return dict(zip(code.co_varnames, args))  # the common case, without inspect's binding machinery
        defaults = current_defaults(fn)
        key = (code, frozenset(defaults))
        sig = self.signatures.get(key)
        if sig is None:
            # the frame's own parameters, not those ``functools.wraps`` points at ([Note: wrapped signatures]):
            # binding ``inner(*args)``'s arguments as the wrapped function's left the frame without its ``args``
            # (UnboundLocalError on 3.11, a segfault on 3.12; training round 10 and translator fuzz round 7)
            sig = self.signatures[key] = code_signature(fn)
        bound = sig.bind(*args, **kwargs)
        passed = set(bound.arguments)
        bound.apply_defaults()  # *args and **kwargs not passed: () and {}
        bound.arguments.update({name: value for name, value in defaults.items() if name not in passed})
        # inspect calls a comprehension's implicit argument ``.0`` "implicit0" (a Parameter must be an identifier):
        # the frame's local is ``.0``, the name its bytecode reads
        f_locals = {f".{name[8:]}" if name.startswith("implicit") and f".{name[8:]}" in code.co_varnames else name:
                    value for name, value in bound.arguments.items()}
        for name, cell in zip(code.co_freevars, fn.__closure__ or ()):
            try:
                f_locals[name] = cell.cell_contents
            except ValueError:
                pass
        return f_locals

    def __call__(self, fn: types.FunctionType, args: tuple, kwargs: dict) -> Any:
        """Run one call, following the continuations its graph breaks return (see [Note: trampoline])."""
        # the hops between stretches: user code runs before and after this call ([Note: equality masks counted once])
        equality_counts.hops = 2
        try:
            result = self.run_frame(fn, args, kwargs)
            while type(result) is Continuation:
                equality_counts.hops += 1
                result = result.ctx.run_frame(result.fn, result.args, {})
            return result
        finally:
            equality_counts.hops = 2

    def run_frame(self, fn: types.FunctionType, args: tuple, kwargs: dict) -> Any:
        code = fn.__code__
        if code in self.skipped or code is DISABLE_DYNAMO_CODE:  # [Note: torch._disable_dynamo]
            return fn(*args, **kwargs)
        try:
            f_locals = self.frame_locals(fn, args, kwargs)
        except TypeError:  # arguments that do not fit: CPython raises its own TypeError, with its own message
            f_locals = None
        if f_locals is None:  # called outside the handler: see [Note: run eagerly outside an except block]
            return fn(*args, **kwargs)
        entries = self.cache.get(code)
        if entries is None:
            entries = self.cache[code] = CacheEntries()
        entry = entries.lookup(f_locals, fn.__globals__)
        if entry is not None:
            return self.run_entry(entry.fn_for(fn), fn, args, kwargs)
        if entries:
            return self.recompile(fn, entries, f_locals, args, kwargs)
        return self.compile_and_call(fn, f_locals, args, kwargs)

    def recompile(self, fn, entries, f_locals, args, kwargs):
        same_path = self.entries_on_same_path(fn, entries, f_locals)
        # the reason worth reporting is why this path's own newest entry failed (another loop index's entry
        # fails on that index, which says nothing)
        newest = (same_path or entries)[-1]
        reason = newest.guard_manager.first_failure(f_locals, fn.__globals__) or "unknown"
        if len(same_path) >= config.recompile_limit or len(entries) >= config.accumulated_recompile_limit:
            warnings.warn(f"minidynamo: {fn.__qualname__} hit recompile_limit ({config.recompile_limit}); "
                          f"running it eagerly. Last guard failure: {reason}")
            counters["eager_fallback"]["recompile_limit"] += 1
            return fn(*args, **kwargs)
        counters["recompiles"]["total"] += 1
        self.recompile_reasons.append(f"{fn.__qualname__}: {reason}")
        if config.log_recompiles or config.debug >= 1:
            print(f"[minidynamo] recompiling {fn.__qualname__}: guard failed: {reason}")
        return self.compile_and_call(fn, f_locals, args, kwargs)

    def entries_on_same_path(self, fn, entries, f_locals) -> list:
        """The cache entries that count towards ``recompile_limit`` for this call.

        [Note: recompile limit per code path]  A graph break inside a loop makes resume functions that are entered
        once per iteration, with the loop's state as arguments: ``__resume_at_N(expert_idx=3, ...)``.  Their
        entries differ by code path, not only by sizes: the loop index while it is still a constant, whether the
        iterator is exhausted (the loop ends inside this frame), whether ``outputs`` already requires grad (an
        earlier expert's result went into it), and for each of those, the row-count cases (0, 1, 2..4, 5+).
        Counting all of them against ``recompile_limit`` would send a loop body back to eager after eight.  So,
        for a resume function, only the entries on this call's code path count: those whose constants
        (EQUALS_MATCH), iterator lengths and tensors' ``requires_grad`` hold for this call
        (``GuardManager.on_same_code_path``) -- the analogue of upstream's ``cache_size.py``, which counts only
        entries whose ID_MATCH-guarded objects are this frame's.  What the limit is for, a size or value that
        keeps changing on one path, is still caught; ``accumulated_recompile_limit`` caps the total.  A user's
        own function keeps upstream's rule: every entry counts.

        Entries compiled before a size of the frame became dynamic (its ``generation`` is older) do not count
        either: they were static guesses the dynamic entry now generalises.  Each (input, dimension) turns dynamic
        at most once, so this cannot hide an endless stream of recompiles.
        """
        current = self.dynamic_generation(fn.__code__)
        entries = [e for e in entries if getattr(e, "generation", 0) == current]
        if fn.__code__ not in self.resume_origin:
            return entries
        return [e for e in entries if e.guard_manager.on_same_code_path(f_locals, fn.__globals__)]

    def dynamic_generation(self, code: types.CodeType) -> int:
        """How many sizes of ``code``'s frame have become dynamic so far (automatic dynamic, dynamic_shapes.py)."""
        from .dynamic_shapes import frame_state_key
        return self.generations.get(frame_state_key(self, code), 0)

    def compile_and_call(self, fn, f_locals, args, kwargs):
        """Translate the frame and run what came out -- or, refused, run it eagerly.

        [Note: run eagerly outside an except block]  The eager run happens *after* the ``except`` that caught the
        refusal, never inside it.  Code run inside a handler sees that handler's exception: whatever the user's
        function raises gets the ``Unsupported`` as its ``__context__`` (and the traceback a "During handling of
        the above exception" preamble), ``sys.exc_info()`` and a bare ``raise`` see it, and on 3.11 CPython even
        raises a different error -- ``f(**a, **b)`` with a repeated key gives ``KeyError`` instead of its
        ``TypeError`` when an exception is being handled.
        """
        refusal = None
        try:
            with gc_paused():
                entry = convert_frame(fn, f_locals, self.backend, self)
        except Unsupported as e:
            if self.fullgraph:
                raise
            refusal = e
        except ConstraintViolationError:
            raise  # the user asked for a dynamic size the program cannot have: tell them, as upstream
        except Exception as e:  # a translator bug must not become a crash or a wrong answer
            if config.raise_internal_errors or self.fullgraph:
                raise
            refusal = Unsupported(f"internal error in minidynamo: {type(e).__name__}: {e}",
                                  "please report this; the frame runs eagerly")
        if refusal is not None:
            return self.fall_back(fn, refusal, args, kwargs)
        entry.generation = self.dynamic_generation(fn.__code__)
        self.cache[fn.__code__].append(entry)
        return self.run_entry(entry.fn, fn, args, kwargs)

    @staticmethod
    def run_entry(transformed: Callable, fn: types.FunctionType, args: tuple, kwargs: dict) -> Any:
        """Run the transformed code; should its graph raise before the frame did anything else, run ``fn``
        natively instead, which raises (or catches) as CPython does ([Note: a graph that raises] in
        output_graph.py) -- outside the ``except``, as [Note: run eagerly outside an except block] says."""
        try:
            return transformed(*args, **kwargs)
        except GraphRaised as e:
            error = e.error
        counters["eager_fallback"][f"the graph raised {type(error).__name__}: the frame ran again natively"] += 1
        del error
        return fn(*args, **kwargs)

    def fall_back(self, fn, e: Unsupported, args, kwargs):
        counters["eager_fallback"][e.reason] += 1
        without_frames(e)  # [Note: kept refusals hold no frames]
        self.skipped[fn.__code__] = e
        self.fallbacks.append(e)
        if config.debug >= 1:
            print(f"[minidynamo] running {fn.__qualname__} eagerly: {e}")
        return fn(*args, **kwargs)


@contextlib.contextmanager
def gc_paused():
    """Python's garbage collector off for the duration, back to its previous state after.

    [Note: no collector while compiling]  Right after ``import torch`` the collector tracks ~350,000 objects, and
    translating and compiling a frame allocates enough to trigger full collections, each walking all of them.
    Measured on CPU (the small tutorial MoE, ``backend="eager"``, three fresh processes each), its first call took
    1.76-1.79 s with the collector on and 1.29-1.53 s with it paused; the next 11 calls, which recompile for new
    row counts, 0.32-0.38 s against 0.14-0.18 s: a quarter less in all, not a cost moved to later calls.  Nothing compiled is kept alive by the pause: objects in reference cycles wait for the
    collection that follows, which finds them garbage as it would have.  ``config.pause_gc_while_compiling``.
    """
    if not config.pause_gc_while_compiling or not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


class OptimizedModule(torch.nn.Module):
    """``minicompile(module)``: same parameters (under ``_orig_mod``), compiled ``forward``."""

    def __init__(self, mod: torch.nn.Module, ctx: CompileContext):
        super().__init__()
        self._orig_mod = mod
        self._ctx = ctx
        self._compiled_call = ctx.wrap(_call_module)

    def __call__(self, *args, **kwargs):
        # Not nn.Module's __call__: hooks (the module's own and global ones) belong to the wrapped module and run
        # once, inside (see forward); the wrapper itself must not run global hooks a second time.
        return self.forward(*args, **kwargs)

    def forward(self, *args, **kwargs):
        mod = self._modules["_orig_mod"]  # not self._orig_mod: nn.Module.__getattr__ costs ~1 us per call
        # the forward eager would run, read at each call: a class whose forward is replaced later (a patch, a
        # mock) compiles the new one, whose code has no cache entry yet
        forward = plain_forward(mod)
        if forward is None or forward is _BatchNorm.forward:
            # The module's own hooks must run as in eager (upstream compiles ``_orig_mod.__call__``): compile a
            # frame that *calls* the module, so the translator inlines its hooks around ``forward``.  So must a
            # BatchNorm, whose forward is replaced while tracing ([Note: BatchNorm's cumulative moving average]),
            # and a forward set on the instance or not a Python function (called natively from that frame).
            return self._compiled_call(mod, *args, **kwargs)
        return self._ctx(forward, (mod, *args), kwargs)

    def __getattr__(self, name: str):
        try:
            return super().__getattr__(name)
        except AttributeError:
            return getattr(self._modules["_orig_mod"], name)


def _call_module(mod, *args, **kwargs):
    """The frame ``OptimizedModule`` compiles for a module with hooks: ``mod(...)`` runs them around ``forward``."""
    return mod(*args, **kwargs)


def minicompile(model: Callable | None = None, *, backend: str | Callable = "inductor", fullgraph: bool = False,
                dynamic: bool | None = None, mode: str | None = None, options: dict | None = None):
    """Compile a function or ``nn.Module`` (the signature of ``torch.compile``); also a decorator."""
    if model is None:
        return lambda m: minicompile(m, backend=backend, fullgraph=fullgraph, dynamic=dynamic, mode=mode,
                                     options=options)
    ctx = CompileContext(lookup_backend(backend, mode=mode, options=options), fullgraph=fullgraph, dynamic=dynamic)
    if isinstance(model, torch.nn.Module):
        return OptimizedModule(model, ctx)
    if isinstance(model, types.MethodType):
        bound_self = model.__self__
        wrapped = ctx.wrap(model.__func__)
        return types.MethodType(wrapped, bound_self)
    if not isinstance(getattr(model, "_minidynamo_orig", model), types.FunctionType):
        raise TypeError(f"minicompile expects a Python function or nn.Module, got {type(model).__name__}")
    return ctx.wrap(getattr(model, "_minidynamo_orig", model))


def reset() -> None:
    """Forget every compiled frame and clear the counters (``torch._dynamo.reset``)."""
    for ctx in list(_contexts):
        ctx.reset()
    counters.clear()


def disable(fn: Callable | None = None, recursive: bool = True):
    """Mark ``fn`` so the translator never traces it (it always runs eagerly)."""
    if fn is None:
        return lambda f: disable(f, recursive)

    @functools.wraps(fn)
    def _disabled(*args, **kwargs):
        return fn(*args, **kwargs)

    _disabled._minidynamo_disable = True
    return _disabled


def graph_break() -> None:
    """Does nothing when run; the translator stops the graph here (``torch._dynamo.graph_break``)."""


graph_break._minidynamo_graph_break = True


def contexts_of(fn) -> list[CompileContext]:
    if isinstance(fn, OptimizedModule):
        return [fn._ctx]
    ctx = getattr(fn, "_minidynamo_ctx", None) or getattr(getattr(fn, "__func__", None), "_minidynamo_ctx", None)
    return [ctx] if ctx else []
