"""The 404 view: Django's, except that an exception without a message shows none.

Django's own passes the exception's class name when it has no message, so an unknown address
read "Resolver404 It may have been deleted…".
"""

from django.http import HttpRequest, HttpResponse, HttpResponseNotFound
from django.template import loader


def not_found(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    args = getattr(exception, "args", ())
    message = args[0] if args and isinstance(args[0], str) else ""
    html = loader.get_template("404.html").render({"exception": message}, request)
    return HttpResponseNotFound(html)
