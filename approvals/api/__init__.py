"""The HTTP API (OpenAPI at /api/openapi.json): one NinjaAPI, one router per topic."""

from approvals.api import approvals, threads
from approvals.api.base import api

api.add_router("/", threads.router)
api.add_router("/", approvals.router)

__all__ = ["api"]
