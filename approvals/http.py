"""Request types for views that run behind login (LoginRequiredMiddleware) and django-htmx."""

from django.contrib.auth.models import User
from django.http import HttpRequest
from django_htmx.middleware import HtmxDetails


class AuthedRequest(HttpRequest):
    user: User
    htmx: HtmxDetails
