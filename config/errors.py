"""The error views Django calls outside any view (an unknown address, a request it refuses to
read, an exception nothing caught): pages in the app's layout, JSON under the APIs' paths.

Django's own 404 passes the exception's class name when it has no message, so an unknown
address read "Resolver404 It may have been deleted…"; this one shows no message then.
"""

from django.http import (
    HttpRequest,
    HttpResponse,
    HttpResponseBadRequest,
    HttpResponseNotFound,
    HttpResponseServerError,
)
from django.template import loader

from config.middleware import is_api, json_error


def not_found(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    if is_api(request):
        return json_error(request, "Not Found: no such address in the API.", status=404)
    args = getattr(exception, "args", ())
    message = args[0] if args and isinstance(args[0], str) else ""
    html = loader.get_template("404.html").render({"exception": message}, request)
    return HttpResponseNotFound(html)


def bad_request(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    """A request Django refuses to read (too many fields, a host it does not serve): its reason
    stays in the log, as Django's own 400 keeps it there."""
    if is_api(request):
        detail = "Bad Request: the request could not be read (too many fields?). Nothing was changed."
        return json_error(request, detail, status=400)
    # Rendered as Django's default does, without its requires_csrf_token wrapper: that reads
    # request.POST again, and a body Django refused to read raises again there (a 500).
    return HttpResponseBadRequest(loader.get_template("400.html").render())


def server_error(request: HttpRequest) -> HttpResponse:
    if is_api(request):
        return json_error(request, "Server Error: the failure is logged.", status=500)
    return HttpResponseServerError(loader.get_template("500.html").render())  # no request: see bad_request
