"""Django admin: queues and who may see them; API tokens (revoke); requests and the ledger, read-only."""

from typing import Any

from django.contrib import admin, messages
from django.contrib.auth import get_user_model
from django.contrib.auth.admin import GroupAdmin, UserAdmin
from django.contrib.auth.models import Group
from django.db.models import Count, OuterRef, QuerySet, Subquery
from django.db.models.functions import Coalesce
from django.http import HttpRequest
from django.urls import NoReverseMatch, reverse
from django.utils.html import format_html
from django.utils.safestring import SafeString, mark_safe

from approvals.access import Access
from approvals.actions.claims import do_release
from approvals.actions.errors import Conflict
from approvals.actions.policies import do_delete_policy, do_record_policy_change, policy_facts
from approvals.actions.threads import do_delete_thread
from approvals.actions.tokens import do_revoke_tokens
from approvals.forms import PolicyAdminForm
from approvals.markdown import render_markdown
from approvals.models import ApiToken, ApprovalRequest, ApprovalStatus, AuditEvent, Policy, Queue
from checkpoints.admin import ThreadAdmin
from checkpoints.digest import canonical_json
from checkpoints.models import Thread
from config.admin_selection import CheckedSelection


def admins_only(request: HttpRequest) -> bool:
    """Django admin is the admin role's (a member of the admin group, or a superuser), as every
    model admin here says; Django's own rule, is_staff, is not a Gatehouse role."""
    return Access.of(request.user).is_admin


admin.site.has_permission = admins_only  # type: ignore[method-assign]
# Gatehouse's name where Django's would be (its login page is where a reviewer sent there lands).
admin.site.site_header = "Gatehouse administration"
admin.site.site_title = "Gatehouse admin"


def as_json(value: Any) -> str:
    # Encrypted JSON columns are text columns to Django: show their value as JSON, not a repr.
    return canonical_json(value) if value is not None else "-"


def page_url(name: str, key: Any) -> str | None:
    """The app's page for a row ("View on site"), or None when a stored id cannot be in a URL."""
    try:
        return reverse(name, args=[key])
    except NoReverseMatch:
        return None


def gatehouse_link(url: str | None) -> SafeString | str:
    if url is None:
        return "-"
    return format_html('<a href="{}" target="_blank" rel="noopener">View in Gatehouse</a>', url)


@admin.register(Queue)
class QueueAdmin(CheckedSelection):
    list_display = ["name", "description", "access", "pending"]
    search_fields = ["name", "description"]
    filter_horizontal = ["groups"]
    readonly_fields = ["members"]
    fields = ["name", "description", "groups", "members"]

    def get_queryset(self, request: HttpRequest) -> QuerySet[Queue]:
        # The changelist's groups and pending counts in its own queries, not two per row.
        pending = (
            ApprovalRequest.objects.filter(queue=OuterRef("name"), status=ApprovalStatus.PENDING)
            .order_by()
            .values("queue")
            .annotate(n=Count("pk"))
            .values("n")
        )
        rows = super().get_queryset(request).prefetch_related("groups")
        return rows.annotate(pending_count=Coalesce(Subquery(pending), 0))

    @admin.display(description="who may see it")
    def access(self, queue: Queue) -> str:
        names = [g.name for g in queue.groups.all()]
        return ", ".join(names) if names else "every reviewer (no groups listed)"

    @admin.display(description="pending")
    def pending(self, queue: Queue) -> int:
        return int(queue.pending_count)  # type: ignore[attr-defined]

    @admin.display(description="members (through the groups)")
    def members(self, queue: Queue) -> str:
        if queue.pk is None or not queue.groups.exists():
            return "Every reviewer: add groups to restrict this queue. Manage group members under Users."
        users = get_user_model().objects.filter(groups__in=queue.groups.all(), is_active=True).distinct()
        return ", ".join(sorted(u.get_username() for u in users)) or "nobody yet"


@admin.register(Policy)
class PolicyAdmin(CheckedSelection):
    """Admins only. The form refuses a condition that does not compile (Policy.clean, with the
    CEL error); every save and delete bumps the version and goes to the ledger with its diff."""

    form = PolicyAdminForm  # refuses a tool no agent gates
    list_display = ["name", "tool", "agent", "action", "when", "order", "enabled", "version", "thread_id"]
    list_filter = ["action", "enabled", "tool"]
    search_fields = ["name", "tool", "agent", "when"]
    filter_horizontal = ["groups"]
    readonly_fields = ["version", "created_by", "created_at", "updated_at"]
    fieldsets = [
        (None, {"fields": ["name", "tool", "agent", "order", "enabled"]}),
        (
            "When it matches, what it does",
            {
                "fields": ["when", "action", "queue", "approvers", "groups", "message"],
                "description": "Queue is for route; approvers and groups are for require; the message is "
                "the reason recorded (approve) or told the agent (deny).",
            },
        ),
        (
            "One thread only (standing decisions)",
            {
                "fields": ["thread_id", "until"],
                "classes": ["collapse"],
                "description": "Reviewers create these from the decision page. Blank: all threads, always.",
            },
        ),
        ("Version", {"fields": ["version", "created_by", "updated_at"]}),
    ]

    def has_module_permission(self, request: HttpRequest) -> bool:
        return Access.of(request.user).is_admin

    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return Access.of(request.user).is_admin

    def has_add_permission(self, request: HttpRequest) -> bool:
        return Access.of(request.user).is_admin

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return Access.of(request.user).is_admin

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return Access.of(request.user).is_admin

    def save_model(self, request: HttpRequest, obj: Policy, form: Any, change: bool) -> None:
        # Locked (the admin's save is one transaction), and the version taken from the row: a
        # save that landed since the form's copy was read would otherwise share its next version.
        old = Policy.objects.select_for_update().filter(pk=obj.pk).first() if change else None
        if old is not None:
            obj.version = old.version
        # On the request, not self: one admin instance serves every request.
        request._policy_before = policy_facts(old) if old is not None else None  # type: ignore[attr-defined]
        if not change:
            obj.created_by = request.user  # type: ignore[assignment]
        super().save_model(request, obj, form, change)

    def save_related(self, request: HttpRequest, form: Any, formsets: Any, change: bool) -> None:
        super().save_related(request, form, formsets, change)
        policy, before = form.instance, getattr(request, "_policy_before", None)
        after = policy_facts(policy)
        if before is not None and after == before:
            return
        if before is not None:
            policy.version += 1
            Policy.objects.filter(pk=policy.pk).update(version=policy.version)
        kind = "update" if before is not None else "create"
        do_record_policy_change(policy, actor=request.user, kind=kind, before=before, after=after)

    def delete_model(self, request: HttpRequest, obj: Policy) -> None:
        do_delete_policy(obj.pk, actor=request.user)

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[Policy]) -> None:
        for pk in queryset.values_list("pk", flat=True):
            do_delete_policy(pk, actor=request.user)


@admin.register(ApiToken)
class ApiTokenAdmin(CheckedSelection):
    """List and revoke tokens. New ones come from `create_api_token`, which shows the token once."""

    list_display = ["prefix", "user", "name", "created_at", "last_used_at", "revoked_at"]
    list_filter = [("revoked_at", admin.EmptyFieldListFilter)]
    search_fields = ["user__username", "name", "prefix"]
    list_select_related = ["user"]
    readonly_fields = ["user", "name", "prefix", "created_at", "last_used_at", "revoked_at"]
    actions = ["revoke"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False  # revoked rows stay, so the list shows who had a token and when it ended

    @admin.action(description="Revoke the selected tokens", permissions=["view"])
    def revoke(self, request: HttpRequest, queryset: QuerySet[ApiToken]) -> None:
        revoked = do_revoke_tokens(queryset)
        messages.success(request, f"Revoked {revoked} token(s); they are refused from now on.")


@admin.register(ApprovalRequest)
class ApprovalRequestAdmin(CheckedSelection):
    """Read-only: decisions and claims go through the inbox so they are checked and audited."""

    list_display = ["id", "action", "queue", "status", "claimed_by", "decided_by", "created_at", "expires_at"]
    list_filter = ["status", "queue", "agent"]
    search_fields = ["thread__id", "action"]
    list_select_related = ["claimed_by", "decided_by"]
    actions = ["release_claims"]
    exclude = ["args", "decision_args"]
    readonly_fields = ["in_gatehouse", "described", "arguments", "decided_arguments"]

    def view_on_site(self, item: ApprovalRequest) -> str | None:
        return page_url("approvals:decision", item.pk)

    def get_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        """The decision page's link first; the description where the model has it, rendered."""
        fields = [f for f in super().get_fields(request, obj) if f not in ("in_gatehouse", "described")]
        return ["in_gatehouse", *("described" if f == "description" else f for f in fields)]

    @admin.display(description="decision page")
    def in_gatehouse(self, item: ApprovalRequest) -> SafeString | str:
        return gatehouse_link(page_url("approvals:decision", item.pk))

    @admin.display(description="description")
    def described(self, item: ApprovalRequest) -> SafeString | str:
        # Model and tool text is untrusted: rendered as the decision page does, through the sanitizer.
        return mark_safe(render_markdown(item.description)) if item.description else "-"

    @admin.display(description="args")
    def arguments(self, item: ApprovalRequest) -> str:
        return as_json(item.args)

    @admin.display(description="decision args")
    def decided_arguments(self, item: ApprovalRequest) -> str:
        return as_json(item.decision_args)

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
class AuditEventAdmin(CheckedSelection):
    """The ledger is append-only: nothing here may change it."""

    list_display = ["id", "created_at", "actor_name", "action", "thread_id", "approval_ref"]
    list_filter = ["action"]
    search_fields = ["actor_name", "thread_id", "action"]
    exclude = ["data"]
    readonly_fields = ["event_data"]

    @admin.display(description="data")
    def event_data(self, event: AuditEvent) -> str:
        return as_json(event.data)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


admin.site.unregister(Thread)


@admin.register(Thread)
class AuditedThreadAdmin(ThreadAdmin):
    """The store's thread admin, linking to the thread page; deleting a thread is an admin's
    action, in the ledger."""

    def get_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        return ["in_gatehouse", *super().get_fields(request, obj)]

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        return ["in_gatehouse", *super().get_readonly_fields(request, obj)]

    def view_on_site(self, thread: Thread) -> str | None:
        return page_url("approvals:thread", thread.pk)

    @admin.display(description="thread page")
    def in_gatehouse(self, thread: Thread) -> SafeString | str:
        return gatehouse_link(page_url("approvals:thread", thread.pk))

    def remove_thread(self, request: HttpRequest, thread_id: str) -> None:
        do_delete_thread(thread_id, user=request.user)  # type: ignore[arg-type]


# Django's own user and group pages refuse an action on ids that cannot be ids, as ours do.
admin.site.unregister(get_user_model())
admin.site.unregister(Group)


@admin.register(get_user_model())
class CheckedUserAdmin(CheckedSelection, UserAdmin):
    pass


@admin.register(Group)
class CheckedGroupAdmin(CheckedSelection, GroupAdmin):
    pass
