"""Django admin actions on rows named by ids the primary key cannot be: refused, not a 500."""

from typing import Any

from django.contrib import admin
from django.contrib.admin.helpers import ACTION_CHECKBOX_NAME
from django.core.exceptions import ValidationError
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse, HttpResponseBadRequest


class CheckedSelection(admin.ModelAdmin):
    """An action on selected rows whose ids the primary key cannot be (`_selected_action=zzz`)
    is a 400 that changes nothing: Django's own filter on them raises, a 500."""

    def response_action(self, request: HttpRequest, queryset: QuerySet[Any]) -> HttpResponse | None:
        key = self.model._meta.pk
        assert key is not None
        try:
            for raw in request.POST.getlist(ACTION_CHECKBOX_NAME):
                key.run_validators(key.to_python(raw))  # the type, and the column's range
        except ValidationError:
            return HttpResponseBadRequest("Refused: a selected row's id is not an id. Nothing was changed.")
        return super().response_action(request, queryset)
