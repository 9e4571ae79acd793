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
        if self.hint:
            parts.append(f"  hint: {self.hint}")
        return "\n".join(parts)


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


class ConstraintViolationError(RuntimeError):
    """A dimension the user marked dynamic cannot be (size 0/1, or the program specialised it).  Reaches the user,
    as upstream's ``torch.fx.experimental.symbolic_shapes.ConstraintViolationError`` does."""
