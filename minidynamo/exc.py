"""How the translator refuses: one exception, ``Unsupported``, raised through ``unimplemented``.

Every refusal carries a *reason* (what the translator met), a *hint* (what a learner can do about it) and the user's
``file:line`` where it happened.  ``convert_frame`` catches it and runs the frame eagerly (or, with
``fullgraph=True``, lets it reach the user).  Mirrors ``torch/_dynamo/exc.py``.
"""
from __future__ import annotations


class Unsupported(RuntimeError):
    """The translator met something it cannot put in a graph."""

    def __init__(self, reason: str, hint: str = "", user_stack: list | None = None):
        self.reason = reason
        self.hint = hint
        self.user_stack = list(user_stack or [])
        super().__init__(reason)

    def __str__(self) -> str:
        parts = [self.reason]
        if self.user_stack:
            fs = self.user_stack[-1]
            parts.append(f"  at {fs.filename}:{fs.lineno} in {fs.name}" + (f": {fs.line}" if fs.line else ""))
            # the compiled function's own line too: a refusal inside an inlined callee (a @contextmanager's
            # generator runs inside contextlib) named only the callee's (fuzz round 12, fullgraph=True)
            for fs in reversed(self.user_stack[:-1]):
                parts.append(f"  called from {fs.filename}:{fs.lineno} in {fs.name}" +
                             (f": {fs.line}" if fs.line else ""))
        if self.hint:
            parts.append(f"  hint: {self.hint}")
        return "\n".join(parts)


def without_frames(e: BaseException) -> BaseException:
    """``e`` with its traceback (and those of the exceptions chained to it) dropped, to be kept for reports.

    [Note: kept refusals hold no frames]  A traceback holds every frame it passed through, and each frame its
    locals: the translator's, among them the translated frame's ``f_locals``.  A refusal kept in the compile
    context (``graph_breaks``, ``skipped``, ...) with its traceback kept the user's arguments, the objects the
    frame made and the generators it dropped alive until ``reset()``: a ``__del__``, a ``weakref.finalize`` or a
    generator's ``finally`` never ran when the program dropped them.  The reason, hint and ``user_stack`` are
    what reports read."""
    seen, todo = set(), [e]
    while todo:
        x = todo.pop()
        if x is not None and id(x) not in seen:
            seen.add(id(x))
            x.__traceback__ = None
            todo += [x.__cause__, x.__context__]
    return e


class ObservedException(Unsupported):
    """A Python exception the traced code raises (``raise ValueError(...)``, a missing dict key).

    The translator looks for the user's handler (``try/except``) in the raising frame, then in its callers; a frame
    with a matching ``except`` continues tracing there.  Unhandled, it is an ordinary refusal: the frame runs
    eagerly (or breaks at the call) and Python raises it for real.  Upstream: ``torch._dynamo.exc.ObservedException``.
    """

    def __init__(self, reason: str, exc_vt, hint: str = "the frame runs eagerly so Python raises it"):
        super().__init__(reason, hint)
        self.exc_vt = exc_vt


def raise_observed_exception(exc_type: type, args: list, reason: str) -> NoReturn:  # noqa: F821
    from .variables.misc import ExceptionVariable
    raise ObservedException(reason, ExceptionVariable(exc_type, list(args)))


class RecompileLimitExceeded(RuntimeError):
    pass


def unimplemented(reason: str, hint: str = "") -> NoReturn:  # noqa: F821
    """Refuse to trace: the one idiom every handler uses (upstream: ``torch._dynamo.exc.unimplemented``)."""
    raise Unsupported(reason, hint)


def refuse_frame(reason: str, hint: str = "the frame runs eagerly") -> NoReturn:  # noqa: F821
    """Refuse the whole frame: no graph break can help, Python must run all of it.

    [Note: drops Python must see]  At a break, what the frame made lives on as the resume function's arguments,
    which the trampoline ([Note: trampoline] in resume_execution.py) holds until the resume function returns -- and
    no Python call can hand a function the only reference to an argument.  So an object whose *drop* runs code
    (a ``__del__``, a generator's ``finally`` or ``with`` block, run when ``break`` leaves ``for v in gen():``)
    would run that code later than in Python; made while tracing and never materialised, it would not run it at
    all.  Such a frame is not split: ``convert_frame`` lets this refusal through and the frame runs eagerly."""
    e = Unsupported(reason, hint)
    e.whole_frame = True
    raise e


class ConstraintViolationError(RuntimeError):
    """A dimension the user marked dynamic cannot be (size 0/1, or the program specialised it).  Reaches the user,
    as upstream's ``torch.fx.experimental.symbolic_shapes.ConstraintViolationError`` does."""
