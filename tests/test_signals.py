"""``held``: a signal that comes inside is handled at ``deliver`` or as it ends, never elsewhere
inside."""

from __future__ import annotations

import os
import signal
import threading

import pytest

from tokpack._signals import held


def test_a_ctrl_c_inside_held_is_raised_as_it_ends_and_the_handler_is_back() -> None:
    if threading.current_thread() is not threading.main_thread():
        pytest.skip("signals reach Python in the main thread only")
    outside = signal.signal(signal.SIGINT, signal.default_int_handler)  # as in a terminal
    try:
        reached = False
        with pytest.raises(KeyboardInterrupt):
            with held():
                os.kill(os.getpid(), signal.SIGINT)
                sum(range(1000))  # bytecodes enough for Python to run a pending handler
                reached = True
        assert reached
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    finally:
        signal.signal(signal.SIGINT, outside)


def test_a_ctrl_c_inside_held_is_raised_where_it_is_delivered() -> None:
    if threading.current_thread() is not threading.main_thread():
        pytest.skip("signals reach Python in the main thread only")
    outside = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        steps = []
        with pytest.raises(KeyboardInterrupt):
            with held() as signals:
                signals.deliver()  # nothing came: nothing happens
                steps.append("first call")
                os.kill(os.getpid(), signal.SIGINT)
                sum(range(1000))
                steps.append("second call")
                signals.deliver()
                steps.append("third call")
        assert steps == ["first call", "second call"]
    finally:
        signal.signal(signal.SIGINT, outside)


def test_held_raises_nothing_without_a_signal_and_keeps_the_handlers() -> None:
    handlers = {signum: signal.getsignal(signum) for signum in signal.valid_signals()}
    with held():
        pass
    assert {signum: signal.getsignal(signum) for signum in signal.valid_signals()} == handlers

