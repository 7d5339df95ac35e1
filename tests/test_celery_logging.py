"""`make run` shows steps, not beat's sweeps every few seconds."""

import logging

from config.celery import QuietSweeps, sweep_names


def record(level: int, message: str, *args: object) -> logging.LogRecord:
    return logging.LogRecord("celery.app.trace", level, __file__, 1, message, args, None)


def test_sweep_lines_are_hidden_and_everything_else_shows() -> None:
    quiet = QuietSweeps(sweep_names())
    sweep = "approvals.tasks.expire_requests_task"

    assert {"expire-approvals", sweep, "agents.tasks.reconcile_threads_task"} <= sweep_names()
    due = record(logging.INFO, "Scheduler: Sending due task %s (%s)", "expire-approvals", sweep)
    assert not quiet.filter(due)
    assert not quiet.filter(record(logging.INFO, "Task %s[1] succeeded in 0.01s: 0", sweep))
    assert quiet.filter(record(logging.ERROR, "Task %s[1] raised unexpected: boom", sweep))
    step = "agents.tasks.advance_thread_task"
    assert quiet.filter(record(logging.INFO, "Task %s[2] succeeded in 0.2s: None", step))
