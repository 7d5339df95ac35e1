"""GET /api/approvals: the README's filters and bounds."""

import pytest
from django.test import Client

from approvals.actions.tokens import do_create_token
from approvals.models import ApprovalRequest
from tests.factories import make_gate, make_user

pytestmark = pytest.mark.django_db


def test_pending_requests_oldest_first_narrowed_by_queue_500_at_most_and_an_unknown_status_is_a_400() -> None:
    client = Client(headers={"Authorization": f"Bearer {do_create_token(user=make_user('ada', 'admin'))}"})
    refund = make_gate()
    email = make_gate(
        agent="outreach", action="send_email", args={"to": "b@example.com", "subject": "Hi", "body": "Yo"}
    )

    assert [r["id"] for r in client.get("/api/approvals").json()] == [refund.pk, email.pk]
    assert [r["id"] for r in client.get("/api/approvals", {"queue": email.queue}).json()] == [email.pk]
    unknown = client.get("/api/approvals", {"status": "bogus"})
    assert unknown.status_code == 400 and "pending" in unknown.json()["detail"]

    # More than a page's worth: the oldest 500 (copies of the refund's request, each its own gate).
    ApprovalRequest.objects.bulk_create(
        ApprovalRequest(**{**_fields(refund), "key": f"copy-{n}"}) for n in range(500)
    )
    listed = client.get("/api/approvals").json()
    assert len(listed) == 500 and listed[0]["id"] == refund.pk and email.pk in [r["id"] for r in listed]


def _fields(request_: ApprovalRequest) -> dict[str, object]:
    return {
        f.attname: getattr(request_, f.attname)
        for f in ApprovalRequest._meta.concrete_fields
        if f.attname != "id"
    }
