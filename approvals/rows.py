"""The reads every decision makes (and every page its access), as prepared statements
(checkpoints/backends/orm/prepared.py): the ORM spent 0.5-1 ms of CPU compiling each of these
joins, several times a decision."""

from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.db import connection, models

from approvals.models import ApprovalRequest, Queue
from checkpoints.backends.orm import prepared


def _m2m(model: type[models.Model], name: str) -> tuple[str, str, str]:
    """A many-to-many field's table, its column for `model` and its column for the target."""
    field: Any = model._meta.get_field(name)
    return field.m2m_db_table(), field.m2m_column_name(), field.m2m_reverse_name()


def group_names(user_id: Any) -> frozenset[str]:
    """The names of the user's groups."""
    table, own, group = _m2m(get_user_model(), "groups")
    rows = prepared.fetch_all(
        f"SELECT g.name FROM {Group._meta.db_table} g JOIN {table} m ON m.{group} = g.id WHERE m.{own} = %s",
        [user_id],
    )
    return frozenset(name for (name,) in rows)


def queue_groups() -> list[tuple[str, str]]:
    """(queue, group) for every group a queue is limited to."""
    table, own, group = _m2m(Queue, "groups")
    return prepared.fetch_all(
        f"SELECT q.name, g.name FROM {Queue._meta.db_table} q JOIN {table} m ON m.{own} = q.id "
        f"JOIN {Group._meta.db_table} g ON g.id = m.{group}",
        [],
    )


def request_with(request_id: int, *, related: tuple[str, ...], lock: bool = False) -> ApprovalRequest | None:
    """The request and its `related` foreign keys' rows, as select_related(*related) reads them;
    `lock`: FOR UPDATE of the request's row alone (Postgres; SQLite's transactions hold the
    database's write lock). None if there is no such request."""
    low, high = connection.ops.integer_field_range("BigAutoField")
    if not low <= request_id <= high:  # no such row; SQLite would refuse the parameter
        return None
    fields: list[Any] = [ApprovalRequest._meta.get_field(name) for name in related]
    selects, joins = [prepared.columns(ApprovalRequest, "r")], []
    for n, field in enumerate(fields):
        model = field.related_model
        selects.append(prepared.columns(model, f"j{n}"))
        joins.append(
            f"LEFT JOIN {model._meta.db_table} j{n} ON j{n}.{model._meta.pk.column} = r.{field.column}"
        )
    lock_clause = " FOR UPDATE OF r" if lock and connection.features.has_select_for_update_of else ""
    row = prepared.fetch_one(
        f"SELECT {', '.join(selects)} FROM {ApprovalRequest._meta.db_table} r {' '.join(joins)} "
        f"WHERE r.id = %s{lock_clause}",
        [request_id],
    )
    if row is None:
        return None
    start = len(ApprovalRequest._meta.concrete_fields)
    request_ = prepared.instance(ApprovalRequest, row[:start])
    for field in fields:
        model = field.related_model
        end = start + len(model._meta.concrete_fields)
        part = row[start:end]
        pk_at = model._meta.concrete_fields.index(model._meta.pk)
        field.set_cached_value(request_, None if part[pk_at] is None else prepared.instance(model, part))
        start = end
    return request_
