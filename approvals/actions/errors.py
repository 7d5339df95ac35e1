"""Errors the approvals actions raise; views and the API turn them into 403 and 409."""


class NotAllowed(PermissionError):
    """The user's role or queue access does not allow this (HTTP 403). Nothing was changed."""


class Conflict(Exception):
    """The request's state does not allow this any more (HTTP 409): decided, claimed, superseded."""


class ThreadDeleted(Conflict):
    """The request's thread was deleted (by an admin) while the action waited for it. HTTP 409."""

    def __init__(self) -> None:
        super().__init__("This request's thread was deleted; nothing was changed.")
