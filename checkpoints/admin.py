"""Admin: threads with what they cost in storage and their newest checkpoints; the store."""

from typing import Any

from django.contrib import admin
from django.db.models import Count, OuterRef, QuerySet, Subquery
from django.db.models.expressions import RawSQL
from django.db.models.functions import Coalesce
from django.http import HttpRequest
from django.template.defaultfilters import filesizeformat
from django.utils.html import format_html, format_html_join

from checkpoints.backends import get_backend
from checkpoints.backends.orm.maintenance import storage_sql
from checkpoints.models import Checkpoint, StoreItem, Thread
from checkpoints.store import decode_path
from config.admin_selection import CheckedSelection

RECENT = 50
HEADINGS = ("step", "source", "node", "by", "state", "at", "id")


def storage_bytes() -> RawSQL:
    """Each thread's storage_bytes as a column of the thread's row: one query for the
    changelist, not one per row."""
    return RawSQL(storage_sql(f'"{Thread._meta.db_table}"."id"'), ())


@admin.register(Thread)
class ThreadAdmin(CheckedSelection):
    list_display = ["id", "agent", "status", "checkpoint_count", "storage", "updated_at"]
    list_filter = ["status", "agent"]
    search_fields = ["id"]
    list_per_page = 50
    fields = (
        "id",
        "agent",
        "status",
        "head",
        "metadata",
        "error",
        "created_at",
        "updated_at",
        "storage",
        "recent",
    )
    readonly_fields = fields
    actions = ["delete_threads"]

    def get_queryset(self, request: HttpRequest) -> QuerySet[Thread]:
        # Subqueries, not a join and GROUP BY: the page's count then leaves them out, and the
        # storage is read for the page's rows only (a query per row took 56 for 100 rows).
        checkpoints = (
            Checkpoint.objects.filter(thread=OuterRef("pk"))
            .order_by()
            .values("thread")
            .annotate(n=Count("pk"))
        )
        return (
            super()
            .get_queryset(request)
            .annotate(
                checkpoint_count=Coalesce(Subquery(checkpoints.values("n")), 0), storage_bytes=storage_bytes()
            )
        )

    def get_actions(self, request: HttpRequest) -> dict[str, Any]:
        actions = super().get_actions(request)
        actions.pop("delete_selected", None)  # deleting goes through the backend (values, writes)
        return actions

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Thread | None = None) -> bool:
        return False

    @admin.display(description="checkpoints", ordering="checkpoint_count")
    def checkpoint_count(self, thread: Thread) -> int:
        return int(getattr(thread, "checkpoint_count", 0))

    @admin.display(description="storage")
    def storage(self, thread: Thread) -> str:
        """Its checkpoints, stored values and writes (values shared by its checkpoints count once)."""
        stored = getattr(thread, "storage_bytes", None)
        return filesizeformat(
            stored if stored is not None else get_backend().storage_bytes(thread_id=thread.id)
        )

    @admin.display(description=f"newest {RECENT} checkpoints")
    def recent(self, thread: Thread) -> str:
        rows = format_html_join(
            "",
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td><code>{}</code></td></tr>",
            (
                (c.step, c.source, c.node, c.created_by, filesizeformat(c.size_bytes), c.created_at, c.id)
                for c in get_backend().history(thread_id=thread.id, limit=RECENT)
            ),
        )
        head = format_html_join("", "<th>{}</th>", ((h,) for h in HEADINGS))
        return format_html("<table><tr>{}</tr>{}</table>", head, rows)

    def get_deleted_objects(
        self, objs: Any, request: HttpRequest
    ) -> tuple[list[str], dict[str, int], set[str], list[str]]:
        """The delete page's summary, counted rather than listed row by row (a thread may hold
        thousands of checkpoints); the store deletes those rows itself, so deleting a thread
        needs no permission on checkpoints or requests."""
        threads = list(objs)
        checkpoints = Checkpoint.objects.filter(thread__in=threads).count()
        summary = [f"Thread {t.pk} ({t.agent}, {t.status})" for t in threads]
        return summary, {"threads": len(threads), "checkpoints": checkpoints}, set(), []

    def delete_model(self, request: HttpRequest, obj: Thread) -> None:
        self.remove_thread(request, obj.id)

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[Thread]) -> None:
        for thread_id in queryset.values_list("id", flat=True):
            self.remove_thread(request, thread_id)

    def remove_thread(self, request: HttpRequest, thread_id: str) -> None:
        """Through the backend (values, writes, LangGraph's rows); approvals' admin audits it."""
        get_backend().delete_thread(thread_id=thread_id)

    @admin.action(
        description="Delete the selected threads with all their checkpoints", permissions=["delete"]
    )
    def delete_threads(self, request: HttpRequest, queryset: QuerySet[Thread]) -> None:
        count = queryset.count()
        self.delete_queryset(request, queryset)
        self.message_user(request, f"Deleted {count} threads.")


@admin.register(StoreItem)
class StoreItemAdmin(CheckedSelection):
    """Keys and lifetimes only: values may be encrypted, and belong to their tenant."""

    list_display = ["tenant", "path", "key", "updated_at", "expires_at"]
    list_filter = ["tenant"]
    search_fields = ["tenant", "key"]
    fields = ("tenant", "path", "key", "created_at", "updated_at", "expires_at")
    readonly_fields = fields

    @admin.display(description="namespace")
    def path(self, item: StoreItem) -> str:
        return " / ".join(decode_path(item.namespace))

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: StoreItem | None = None) -> bool:
        return False
