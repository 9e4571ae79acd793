"""How the tour prints: a heading per step, progress lines for slow work, warnings gathered, text clipped/indented.

A step that fails is reported and the tour goes on (``step``), so an unfinished stage never hides the later ones.
Slow work (compiling, timing) prints what it is doing, a heartbeat every 10 s and the seconds it took
(``progress``); warnings raised meanwhile are collected (``quiet_warnings``) and summarised afterwards
(``print_warnings``) instead of breaking a line in the middle.
"""

from __future__ import annotations

import collections
import contextlib
import io
import os
import threading
import time
import traceback
import warnings
from collections.abc import Callable


def step(title: str, fn: Callable[[], None]) -> bool:
    """Run one stage of the tour; a stage that fails is reported, never fatal."""
    print(f"\n== {title}")
    try:
        fn()
        return True
    except Exception as e:  # noqa: BLE001 -- the tour must survive any unfinished stage
        print(f"   not yet available: {type(e).__name__}: {e}")
        if os.environ.get("MINICOMPILE_DEBUG"):
            traceback.print_exc()
        return False


@contextlib.contextmanager
def progress(what: str, quiet: bool = False):
    """Print ``what...`` now, a heartbeat every 10 s while it runs, and the elapsed seconds when it is done."""
    t0 = time.perf_counter()
    if not quiet:
        print(f"   {what}...", flush=True)
    done = threading.Event()

    def heartbeat():
        while not done.wait(10):
            print(f"     ... {time.perf_counter() - t0:.0f} s", flush=True)

    threading.Thread(target=heartbeat, daemon=True).start()
    try:
        yield
    finally:
        done.set()
    if not quiet:
        print(f"   {what}: {time.perf_counter() - t0:.1f} s", flush=True)


@contextlib.contextmanager
def quiet_warnings():
    """Collect warnings instead of printing them mid-line; ``print_warnings`` shows a summary."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        yield caught


def print_warnings(caught: list) -> None:
    messages = collections.Counter(clip(str(w.message).splitlines()[0], 150) for w in caught)
    for message, n in list(messages.items())[:3]:
        print(f"     warning{f' x{n}' if n > 1 else ''}: {message}")


def clip(text: str, n: int) -> str:
    return text if len(text) <= n else text[: n - 3] + "..."


def text_of(show: Callable[..., str], *args) -> str:
    """The text a ``show_*`` helper prints (and returns), without printing it: the tour indents it."""
    with contextlib.redirect_stdout(io.StringIO()):
        return show(*args)


def indent(text: str) -> str:
    return "\n".join("   " + line for line in text.splitlines())
