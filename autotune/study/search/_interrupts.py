"""Ctrl-C only where the study process can take it: hold it back elsewhere, deliver it later.

A ``KeyboardInterrupt`` can be raised between any two bytecodes of the main thread. In a few
places that leaves something behind that nothing cleans up: a rank process that was started
but not yet tracked (interpreter exit waits for it), or Optuna's heartbeat thread, a
non-daemon thread that is started just before the objective is called and stopped just after
it. A Ctrl-C between that thread's start and the ``with`` block Optuna guards it with leaves it
beating forever, and interpreter exit then waits for it forever.

:func:`sigint_deferred` holds Ctrl-C back for a block (a Python-level SIGINT handler notes it)
and raises the ``KeyboardInterrupt`` when the outermost such block ends; :func:`sigint_allowed`
opens a window inside one where Ctrl-C raises at once (a Ctrl-C that came meanwhile is raised
on entry). Blocking SIGINT with ``pthread_sigmask`` does not do this: the mask is per thread,
the kernel hands the signal to another thread (the heartbeat thread) and CPython still runs
the handler in the main thread at its next bytecode.

Outside the main thread, or where SIGINT has a handler other than Python's default (ignored,
or an application's own), both are no-ops.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType

__all__ = ["sigint_allowed", "sigint_deferred"]

#: Open :func:`sigint_deferred` blocks that installed or share :func:`_on_sigint`.
_open = 0
#: True where Ctrl-C is held back (the innermost block is :func:`sigint_deferred`).
_holding = False
#: A Ctrl-C came while it was held back.
_pending = False
#: The SIGINT handler before the outermost :func:`sigint_deferred` block.
_previous: object = None


def _on_sigint(signum: int, frame: FrameType | None) -> None:
    global _pending
    if _holding:
        _pending = True
        return
    raise KeyboardInterrupt


def _raise_pending() -> None:
    global _pending
    if _pending:
        _pending = False
        raise KeyboardInterrupt


@contextmanager
def sigint_deferred() -> Iterator[None]:
    """Hold Ctrl-C back inside the block, and raise one that came meanwhile when it ends
    (unless an enclosing :func:`sigint_deferred` block still holds it back).

    Raises:
        KeyboardInterrupt: when the block ends, after a Ctrl-C inside it.
    """
    global _open, _holding, _previous, _pending
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    current = signal.getsignal(signal.SIGINT)
    if current is not _on_sigint:
        if current is not signal.default_int_handler:  # SIG_IGN, or someone else's handler
            yield
            return
        _previous, _pending, _open = current, False, 0
        signal.signal(signal.SIGINT, _on_sigint)
    saved = _holding
    _open += 1
    _holding = True
    try:
        yield
    finally:
        # Bookkeeping first, while a Ctrl-C is still only noted; then raise a noted one.
        _open -= 1
        if _open == 0:
            signal.signal(signal.SIGINT, _previous)  # type: ignore[arg-type]
            _holding = False
            _raise_pending()
        else:
            _holding = saved
            if not saved:
                _raise_pending()


@contextmanager
def sigint_allowed() -> Iterator[None]:
    """Inside a :func:`sigint_deferred` block: let Ctrl-C raise at once within this block.

    Raises:
        KeyboardInterrupt: on entry, if a Ctrl-C was held back; or on a Ctrl-C in the block.
    """
    global _holding
    if _open == 0 or signal.getsignal(signal.SIGINT) is not _on_sigint:
        yield
        return
    saved = _holding
    try:
        _holding = False
        _raise_pending()
        yield
    finally:
        _holding = saved
