"""The HTTP API (OpenAPI at /api/openapi.json): one NinjaAPI, one router per topic."""

from approvals.api import approvals, policies, threads
from approvals.api.base import api

api.add_router("/", threads.router)
api.add_router("/", approvals.router)
api.add_router("/", policies.router)

__all__ = ["api"]
