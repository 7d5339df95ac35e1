"""Lists that must hold up with a year of data: the policy preview and the admin changelists read
a page in a fixed number of queries, however many rows it shows; GET /api/approvals pages
through every matching request (recent decisions first, the pending queue oldest first)."""

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.contrib.admin.sites import site
from django.contrib.auth.models import Group
from django.db import connection
from django.template.defaultfilters import filesizeformat
from django.test import Client, RequestFactory
from django.test.utils import CaptureQueriesContext

from agents.runtime import RESULT_PREFIX
from approvals.actions.decisions import check_decision, do_decide
from approvals.actions.tokens import do_create_token
from approvals.models import ApprovalRequest, ApprovalStatus, Queue, Signoff
from checkpoints.backends import get_backend
from checkpoints.models import Thread
from tests.factories import make_gate, make_user

pytestmark = pytest.mark.django_db
T0 = datetime(2025, 1, 1, tzinfo=UTC)


def queries(run: Callable[[], Any]) -> int:
    """The queries of a run after a first one (which fills per-user and per-process caches)."""
    run()
    with CaptureQueriesContext(connection) as captured:
        run()
    return len(captured.captured_queries)


def api(user: Any) -> Client:
    return Client(headers={"Authorization": f"Bearer {do_create_token(user=user)}"})


def ran_refund(cents: int, *, metadata: dict[str, Any]) -> ApprovalRequest:
    """A refund approved and run (an effect) in a thread of its own with this metadata."""
    request_ = make_gate(args={"order_id": "ORD-1001", "amount_cents": cents})
    Thread.objects.filter(pk=request_.thread_id).update(metadata=metadata)
    reviewer = make_user(f"rita-{request_.pk}", "reviewer")
    valid = check_decision(request_, user=reviewer, decision="approve", args=None, message="")
    do_decide(request_, reviewer=reviewer, valid=valid)
    get_backend().put_write(
        thread_id=request_.thread_id,
        checkpoint_id=str(request_.checkpoint_id),
        task_id=RESULT_PREFIX + request_.key,
        kind="result",
        value="refunded",
    )
    return request_


def test_the_policy_preview_reads_threads_and_effects_in_queries_that_do_not_grow_with_its_requests() -> None:
    client = api(make_user("ada", "admin"))
    body = {
        "name": "vip refunds",
        "tool": "issue_refund",
        # Reads the thread's metadata and its effects: both must come in one query each.
        "when": "thread.metadata.tier == 'vip' && effects.count == 0",
        "action": "approve",
    }

    def preview() -> Any:
        answer = client.post("/api/policies/preview", body, content_type="application/json")
        assert answer.status_code == 200, answer.content
        return answer.json()

    for n in range(3):
        ran_refund(1000 + n, metadata={"tier": "vip"})
    few = queries(preview)
    for n in range(3):
        ran_refund(2000 + n, metadata={"tier": "vip" if n else "basic"})
    many = queries(preview)

    assert many == few
    answer = preview()  # each request's own thread and effects still decide it
    assert answer["considered"] == 6
    assert answer["counts"] == {"approved automatically": 5, "to a person": 1}


def admin_request() -> Any:
    request = RequestFactory().get("/admin/")
    request.user = make_user("ada-admin", "admin")
    return request


def changelist(model: type[Any]) -> Callable[[], list[dict[str, Any]]]:
    """The changelist's rows as the admin shows them: each column's value."""
    model_admin, request = site._registry[model], admin_request()

    def rows() -> list[dict[str, Any]]:
        page = model_admin.get_changelist_instance(request)
        return [
            {
                c: getattr(model_admin, c)(row) if hasattr(model_admin, c) else getattr(row, c)
                for c in map(str, page.list_display)
            }
            for row in page.result_list
        ]

    return rows


def test_the_thread_changelist_reads_storage_in_queries_that_do_not_grow_with_its_rows() -> None:
    rows = changelist(Thread)
    for n in range(3):
        ran_refund(1000 + n, metadata={})
    few = queries(rows)
    for n in range(3):
        make_gate(args={"order_id": f"ORD-{n}", "amount_cents": 100})
    many = queries(rows)

    assert many == few
    listed = {row["id"]: row for row in rows()}
    assert len(listed) == 6
    for thread in Thread.objects.all():  # the column says what the backend says
        assert listed[thread.id]["storage"] == filesizeformat(
            get_backend().storage_bytes(thread_id=thread.id)
        )
        assert listed[thread.id]["checkpoint_count"] == thread.checkpoints.count() == 2


def test_the_queue_changelist_reads_groups_and_pending_counts_in_queries_that_do_not_grow_with_its_rows() -> (
    None
):
    rows = changelist(Queue)

    def add_queues(names: list[str]) -> None:
        for n, name in enumerate(names):
            queue = Queue.objects.create(name=name)
            queue.groups.add(Group.objects.create(name=f"{name}-team"))
            for _ in range(n):
                ApprovalRequest.objects.filter(pk=make_gate().pk).update(queue=name)

    add_queues(["a", "b", "c"])
    few = queries(rows)
    add_queues(["d", "e", "f"])
    many = queries(rows)

    assert many == few
    listed = {row["name"]: (row["access"], row["pending"]) for row in rows()}
    assert listed == {name: (f"{name}-team", n % 3) for n, name in enumerate("abcdef")}


def requests_raised(
    count: int, *, status: str, queue: str = "default", start: int = 0
) -> list[ApprovalRequest]:
    """`count` requests of one gate's thread, raised an hour apart from T0 + `start` hours, two
    at a time at the same instant (so ties are broken by id); a decided one decided a minute after
    it was raised, so its list's order (by decision) is the order raised."""
    gate = make_gate()
    fields = {
        f.attname: getattr(gate, f.attname)
        for f in ApprovalRequest._meta.concrete_fields
        if f.attname not in ("id", "key", "status", "queue")
    }
    made = ApprovalRequest.objects.bulk_create(
        ApprovalRequest(**fields, key=f"{status}-{queue}-{start}-{n}", status=status, queue=queue)
        for n in range(count)
    )
    for n, request_ in enumerate(made):
        request_.created_at = T0 + timedelta(hours=start + n // 2)
        decided_at = None if status == ApprovalStatus.PENDING else request_.created_at + timedelta(minutes=1)
        ApprovalRequest.objects.filter(pk=request_.pk).update(
            created_at=request_.created_at, decided_at=decided_at
        )
    ApprovalRequest.objects.filter(pk=gate.pk).delete()
    return made


def walk(client: Client, *, cursor: str, **params: Any) -> list[int]:
    """Every page, each asked for from the last row of the one before, until a short page."""
    seen: list[int] = []
    for _ in range(100):  # a list that does not page would repeat its first page forever
        answer = client.get("/api/approvals", {**params, **({cursor: seen[-1]} if seen else {})})
        assert answer.status_code == 200, answer.content
        page = [row["id"] for row in answer.json()]
        seen += page
        if len(page) < params["limit"]:
            return seen
    raise AssertionError(f"no last page after 100 pages: {seen[:20]}…")


def newest_first(rows: list[ApprovalRequest]) -> list[int]:
    return [r.pk for r in sorted(rows, key=lambda r: (r.created_at, r.pk), reverse=True)]


def test_decided_requests_page_newest_first_and_every_one_is_listed_once() -> None:
    approved = requests_raised(23, status=ApprovalStatus.APPROVED)
    requests_raised(5, status=ApprovalStatus.APPROVED, queue="other", start=3)
    requests_raised(4, status=ApprovalStatus.REJECTED, start=1)
    client = api(make_user("ada", "admin"))

    first = client.get("/api/approvals", {"status": "approved", "queue": "default"}).json()
    assert [r["id"] for r in first] == newest_first(approved)  # a page's worth, the newest on top

    assert walk(client, cursor="before", status="approved", queue="default", limit=5) == newest_first(
        approved
    )
    assert walk(client, cursor="before", status="approved", queue="default", limit=23) == newest_first(
        approved
    )
    assert walk(client, cursor="before", status="approved", limit=1000) == newest_first(
        list(ApprovalRequest.objects.filter(status="approved"))
    )


def test_pending_requests_page_oldest_first_and_every_one_is_listed_once() -> None:
    pending = requests_raised(17, status=ApprovalStatus.PENDING)
    requests_raised(3, status=ApprovalStatus.APPROVED)
    client = api(make_user("ada", "admin"))

    oldest_first = newest_first(pending)[::-1]
    assert [r["id"] for r in client.get("/api/approvals").json()] == oldest_first
    assert walk(client, cursor="after", limit=4) == oldest_first


def test_a_page_after_a_request_decided_since_goes_on_from_where_it_stood() -> None:
    pending = requests_raised(6, status=ApprovalStatus.PENDING)
    client = api(make_user("ada", "admin"))
    ids = newest_first(pending)[::-1]
    ApprovalRequest.objects.filter(pk=ids[1]).update(status=ApprovalStatus.APPROVED)

    assert [r["id"] for r in client.get("/api/approvals", {"after": ids[1], "limit": 2}).json()] == ids[2:4]


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"before": "abc"}, "before"),
        ({"before": 0}, "before"),
        ({"after": -1}, "after"),
        ({"after": 2**63}, "after"),
        ({"before": 99999999}, "before"),  # no such request
        ({"limit": "many"}, "limit"),
    ],
)
def test_a_bad_paging_parameter_is_a_400_naming_it(params: dict[str, Any], field: str) -> None:
    requests_raised(2, status=ApprovalStatus.PENDING)
    answer = api(make_user("ada", "admin")).get("/api/approvals", params)

    assert answer.status_code == 400, answer.content
    assert [name.removeprefix("query.") for name in answer.json()["errors"]] == [field]


def test_a_request_in_a_queue_the_reviewer_cannot_see_is_no_place_to_page_from() -> None:
    hidden = requests_raised(2, status=ApprovalStatus.APPROVED, queue="payroll")
    make_user("sam", "reviewer", queues=("payroll",))  # restricts payroll to its team
    rita = api(make_user("rita", "reviewer"))

    answer = rita.get("/api/approvals", {"status": "approved", "before": str(hidden[1].pk)})

    assert answer.status_code == 400 and answer.json()["errors"] == {
        "before": f"Approval request {hidden[1].pk} does not exist."
    }


def test_the_api_lists_two_person_requests_in_queries_that_do_not_grow_with_its_rows() -> None:
    ada = make_user("ada", "admin")
    client = api(ada)

    def signed_once(count: int, start: int) -> None:
        made = requests_raised(count, status=ApprovalStatus.PENDING, start=start)
        ApprovalRequest.objects.filter(pk__in=[r.pk for r in made]).update(required_approvals=2)
        Signoff.objects.bulk_create(Signoff(request=r, reviewer=ada) for r in made)

    def listed() -> Any:
        rows = client.get("/api/approvals").json()
        assert {tuple(row["approvals"]) for row in rows} == {("ada",)}
        return rows

    signed_once(3, start=0)
    few = queries(listed)
    signed_once(3, start=10)
    assert queries(listed) == few  # one for each row's signoffs before
