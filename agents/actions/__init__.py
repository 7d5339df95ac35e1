"""Start and steer threads. check_* validates, do_* mutates (thread locked) and notifies on commit."""

from agents.actions.control import (
    ThreadStateError,
    Written,
    do_cancel,
    do_continue,
    do_fork,
    do_pause,
    do_resume,
    do_update_state,
    registered_agent,
    replay_warnings,
)
from agents.actions.start import (
    InvalidInput,
    check_input_text,
    check_start_thread,
    check_state,
    do_start_thread,
)

__all__ = [
    "InvalidInput",
    "ThreadStateError",
    "Written",
    "check_input_text",
    "check_start_thread",
    "check_state",
    "do_cancel",
    "do_continue",
    "do_fork",
    "do_pause",
    "do_resume",
    "do_start_thread",
    "do_update_state",
    "registered_agent",
    "replay_warnings",
]
