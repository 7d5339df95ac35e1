"""The ledger: verify_ledger catches altered, deleted and inserted events; admins read and export it."""

import csv
import io

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import Client
from django.utils import timezone

from approvals.actions.audit import do_audit, event_body, event_hash
from approvals.actions.claims import do_claim, do_release
from approvals.actions.decisions import check_decision, do_decide
from approvals.actions.ledger import verify_ledger
from approvals.models import AuditEvent
from checkpoints.models import Thread
from tests.factories import make_gate, make_user

pytestmark = pytest.mark.django_db


@pytest.fixture
def events() -> list[AuditEvent]:
    """A claim, a release and a decision by rita, in that order."""
    rita = make_user("rita", "reviewer")
    request_ = make_gate()
    do_claim(request_.pk, user=rita)
    do_release(request_.pk, user=rita)
    do_decide(request_, reviewer=rita, valid=check_decision(request_, user=rita, decision="approve"))
    return list(AuditEvent.objects.order_by("id"))


def verify() -> str:
    out, err = io.StringIO(), io.StringIO()
    try:
        call_command("verify_ledger", stdout=out, stderr=err)
    except CommandError as exc:
        return f"FAILED {exc}\n{err.getvalue()}"
    return out.getvalue()


def test_an_intact_ledger_verifies(events: list[AuditEvent]) -> None:
    assert "The ledger is intact: 3 events verified." in verify()


def test_an_altered_event_is_detected(events: list[AuditEvent]) -> None:
    AuditEvent.objects.filter(pk=events[0].pk).update(
        data={**events[0].data, "args_seen": {"amount_cents": 1}}
    )

    report = verify()

    assert report.startswith("FAILED The ledger is broken: 1 problem(s) in 3 events.")
    assert f"event {events[0].pk}: its content does not match its hash (altered)" in report


def test_a_deleted_event_is_detected(events: list[AuditEvent]) -> None:
    AuditEvent.objects.filter(pk=events[1].pk).delete()

    assert f"event {events[2].pk}: does not follow the previous event" in verify()


def test_deleting_the_newest_events_is_detected(events: list[AuditEvent]) -> None:
    AuditEvent.objects.filter(pk=events[2].pk).delete()

    assert "ledger head: names a later event than the last one" in verify()


def forge_after(event: AuditEvent) -> AuditEvent:
    """An event written straight into the table, chained after `event` as an append would be."""
    forged = AuditEvent(
        actor_name="mallory", action="decision.approve", thread_id=event.thread_id, created_at=timezone.now()
    )
    forged.prev_hash = event.hash
    forged.hash = event_hash(prev_hash=forged.prev_hash, body=event_body(forged))
    forged.save()
    return forged


def test_an_event_inserted_at_the_end_is_detected(events: list[AuditEvent]) -> None:
    forge_after(events[2])

    assert (
        f"ledger head: names event {events[2].pk}, not the last one (events inserted after it?)" in verify()
    )


def test_an_event_inserted_between_two_is_detected(events: list[AuditEvent]) -> None:
    forged = forge_after(events[0])
    AuditEvent.objects.filter(pk=forged.pk).update(id=events[0].pk * 1000)  # placed by its id
    for later in events[1:]:  # shift the later events past it, keeping their content
        AuditEvent.objects.filter(pk=later.pk).update(id=later.pk + events[0].pk * 1000)

    report = verify()

    assert f"event {events[1].pk + events[0].pk * 1000}: does not follow the previous event" in report
    assert "inserted" in report


def test_a_rehashed_forgery_still_breaks_the_link_to_the_next_event(events: list[AuditEvent]) -> None:
    from approvals.actions.audit import event_body, event_hash

    forged = events[0]
    forged.actor_name = "mallory"
    forged.hash = event_hash(prev_hash=forged.prev_hash, body=event_body(forged))
    forged.save()

    assert not verify_ledger().ok


def test_deleting_a_thread_keeps_the_chain_intact(events: list[AuditEvent]) -> None:
    Thread.objects.all().delete()  # cascades to its approval requests

    assert verify_ledger().ok
    assert AuditEvent.objects.filter(approval__isnull=True, approval_ref__isnull=False).count() == 3


def test_the_ledger_names_a_deleted_thread_without_a_link_that_leads_nowhere(
    events: list[AuditEvent],
) -> None:
    kept = make_gate()
    gone = events[0].thread_id
    Thread.objects.filter(pk=gone).delete()
    do_audit(actor=None, action="thread.pause", thread_id=kept.thread_id)
    client = Client()
    client.force_login(make_user("ada", "admin"))

    page = client.get("/ledger/").content.decode()

    assert f'href="/threads/{gone}/' not in page and page.count(">deleted</small>") == 3
    assert f'href="/threads/{kept.thread_id}/"' in page


def test_only_admins_read_the_ledger(events: list[AuditEvent]) -> None:
    client = Client()
    client.force_login(make_user("sam", "reviewer"))
    assert client.get("/ledger/").status_code == 403
    assert client.get("/ledger.csv").status_code == 403


def test_admins_filter_the_ledger_and_export_it_as_csv(events: list[AuditEvent]) -> None:
    do_audit(actor=None, action="thread.pause", thread_id="t-1", data={"note": '=HYPERLINK("x")'})
    client = Client()
    client.force_login(make_user("ada", "admin"))

    page = client.get("/ledger/", {"action": "claim"}).content.decode()
    assert "claim.take" in page and "claim.release" in page and "decision.approve" not in page

    response = client.get("/ledger.csv", {"actor": "rita"})
    assert response["Content-Type"].startswith("text/csv")
    rows = list(csv.reader(io.StringIO(b"".join(response.streaming_content).decode())))  # type: ignore[attr-defined]
    assert rows[0][:4] == ["id", "at", "actor", "action"]
    assert [r[3] for r in rows[1:]] == ["claim.take", "claim.release", "decision.approve"]
    assert client.get("/ledger/", {"since": "not-a-date"}).status_code == 400


def test_the_ledger_filters_from_the_first_to_the_last_day_a_date_can_name(events: list[AuditEvent]) -> None:
    client = Client()
    client.force_login(make_user("ada", "admin"))
    ends = {"since": "0001-01-01", "until": "9999-12-31"}  # the last day has no day after

    page = client.get("/ledger/", ends)
    exported = client.get("/ledger.csv", ends)

    assert page.status_code == 200 and "decision.approve" in page.content.decode()
    assert "decision.approve" in b"".join(exported.streaming_content).decode()  # type: ignore[attr-defined]


def test_csv_cells_that_would_run_as_formulas_are_quoted(events: list[AuditEvent]) -> None:
    do_audit(actor=None, action="=cmd", thread_id="t-1")
    client = Client()
    client.force_login(make_user("ada", "admin"))

    body = b"".join(client.get("/ledger.csv").streaming_content).decode()  # type: ignore[attr-defined]

    assert "'=cmd" in body


def test_the_ledger_page_verifies_the_chain_on_request(events: list[AuditEvent]) -> None:
    client = Client()
    client.force_login(make_user("ada", "admin"))

    assert "Chain intact: 3 events verified" in client.get("/ledger/", {"verify": "1"}).content.decode()
    AuditEvent.objects.filter(pk=events[1].pk).delete()
    assert "Chain broken" in client.get("/ledger/", {"verify": "1"}).content.decode()


def test_any_text_chains_as_verify_ledger_recomputes_it() -> None:
    # On Postgres the database hashes the appended event: the UTF-8 bytes must be Python's.
    said = {"note": 'Rü-fund ☃ 🎉 "quoted" \\ back\tslash', "amount": 4250, "nested": {"b": [1, None]}}
    first = do_audit(actor=make_user("zoë", "reviewer"), action="thread.message", data=said)
    second = do_audit(actor=None, action="thread.message", thread_id="t-ü", data={"after": "ünïcode"})

    assert second.prev_hash == first.hash
    assert AuditEvent.objects.get(pk=first.pk).data == said
    assert verify_ledger().ok


@pytest.mark.django_db(transaction=True)
def test_appends_from_many_connections_at_once_form_one_chain() -> None:
    from concurrent.futures import ThreadPoolExecutor

    from django.db import connection, transaction

    def append(n: int) -> None:
        try:
            with transaction.atomic():
                do_audit(actor=None, action="thread.message", data={"n": n})
        finally:
            connection.close()

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(append, range(40)))

    chain = list(AuditEvent.objects.order_by("id"))
    assert sorted(e.data["n"] for e in chain) == list(range(40))
    assert [e.prev_hash for e in chain[1:]] == [e.hash for e in chain[:-1]]
    assert verify_ledger().ok
