"""Django admin: queues and who may see them; requests and the ledger, read-only."""

from typing import Any

from django.contrib import admin, messages
from django.contrib.auth import get_user_model
from django.db.models import QuerySet
from django.http import HttpRequest

from approvals.actions.claims import do_release
from approvals.actions.errors import Conflict
from approvals.models import ApprovalRequest, ApprovalStatus, AuditEvent, Queue


@admin.register(Queue)
class QueueAdmin(admin.ModelAdmin):
    list_display = ["name", "description", "access", "pending"]
    search_fields = ["name", "description"]
    filter_horizontal = ["groups"]
    readonly_fields = ["members"]
    fields = ["name", "description", "groups", "members"]

    @admin.display(description="who may see it")
    def access(self, queue: Queue) -> str:
        names = [g.name for g in queue.groups.all()]
        return ", ".join(names) if names else "every reviewer (no groups listed)"

    @admin.display(description="pending")
    def pending(self, queue: Queue) -> int:
        return ApprovalRequest.objects.filter(queue=queue.name, status=ApprovalStatus.PENDING).count()

    @admin.display(description="members (through the groups)")
    def members(self, queue: Queue) -> str:
        if queue.pk is None or not queue.groups.exists():
            return "Every reviewer: add groups to restrict this queue. Manage group members under Users."
        users = get_user_model().objects.filter(groups__in=queue.groups.all(), is_active=True).distinct()
        return ", ".join(sorted(u.get_username() for u in users)) or "nobody yet"


@admin.register(ApprovalRequest)
class ApprovalRequestAdmin(admin.ModelAdmin):
    """Read-only: decisions and claims go through the inbox so they are checked and audited."""

    list_display = ["id", "action", "queue", "status", "claimed_by", "decided_by", "created_at", "expires_at"]
    list_filter = ["status", "queue", "agent"]
    search_fields = ["thread__id", "action"]
    list_select_related = ["claimed_by", "decided_by"]
    actions = ["release_claims"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    @admin.action(description="Release the claims of the selected requests", permissions=["view"])
    def release_claims(self, request: HttpRequest, queryset: QuerySet[ApprovalRequest]) -> None:
        released = 0
        for request_id in queryset.filter(claimed_by__isnull=False).values_list("pk", flat=True):
            try:
                do_release(request_id, user=request.user)  # type: ignore[arg-type]
                released += 1
            except (Conflict, PermissionError) as exc:
                messages.warning(request, f"Request {request_id}: {exc}")
        messages.success(request, f"Released {released} claim(s).")


@admin.register(AuditEvent)
class AuditEventAdmin(admin.ModelAdmin):
    """The ledger is append-only: nothing here may change it."""

    list_display = ["id", "created_at", "actor_name", "action", "thread_id", "approval_ref"]
    list_filter = ["action"]
    search_fields = ["actor_name", "thread_id", "action"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False
