"""Logging filters named in settings.LOGGING."""

import logging


class NoTracebackForClientErrors(logging.Filter):
    """A 4xx answer (a PermissionDenied, a bad request, a suspicious one) logs its one line
    without the traceback Django attaches to it: it is expected, and a grep for "Traceback"
    should find failures only. A 5xx, and every record that is no response, keeps its own."""

    def filter(self, record: logging.LogRecord) -> bool:
        status = getattr(record, "status_code", None)  # set by django.utils.log.log_response
        if isinstance(status, int) and status < 500:
            record.exc_info, record.exc_text = None, None
        return True
