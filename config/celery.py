"""The Celery app: workers advance threads, a task a step and the steps that follow it."""

import logging
import os
from typing import Any

from celery import Celery
from celery.signals import after_setup_logger

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

app = Celery("gatehouse")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


class QuietSweeps(logging.Filter):
    """Drop the INFO lines about beat's periodic sweeps ("Sending due task …", "Task … received",
    "… succeeded"): they come every few seconds and bury the steps. Their warnings and errors
    still show, and so does what they change (audited, and logged by the tasks themselves)."""

    def __init__(self, names: set[str]) -> None:
        super().__init__()
        self.names = names

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno > logging.INFO:
            return True
        message = record.getMessage()
        return not any(name in message for name in self.names)


def sweep_names() -> set[str]:
    """The beat schedule's entry names and task names."""
    schedule: dict[str, dict[str, Any]] = app.conf.beat_schedule or {}
    return {*schedule, *(entry["task"] for entry in schedule.values())}


@after_setup_logger.connect
def _quiet_sweeps(logger: logging.Logger, **kwargs: Any) -> None:
    quiet = QuietSweeps(sweep_names())
    for handler in logger.handlers:
        handler.addFilter(quiet)
