"""Approval rows and ledger data under CHECKPOINT_ENCRYPTION_KEY: plain and encrypted rows read
alike, text that looks like a token is not mistaken for one, the ledger page and CSV show the
plaintext, and verify_ledger reports ciphertext that no key opens instead of crashing."""

import pytest
from cryptography.fernet import Fernet
from django.core.management import call_command
from django.db import connection
from django.test import Client
from pytest_django.fixtures import Settings

from approvals.actions.audit import do_audit
from approvals.actions.decisions import check_decision, do_decide
from approvals.actions.ledger import verify_ledger
from approvals.actions.policies import do_create_policy
from approvals.actions.tokens import do_create_token
from approvals.models import ApprovalRequest, AuditEvent, Signoff
from checkpoints.sealed_columns import stored_text
from tests.factories import make_gate, make_user

pytestmark = pytest.mark.django_db


def raw(model: type[ApprovalRequest] | type[AuditEvent], pk: int, name: str) -> str:
    return str(model.objects.filter(pk=pk).annotate(_s=stored_text(name)).values_list("_s", flat=True).get())


def test_rows_written_before_a_key_was_set_stay_readable_and_rotation_encrypts_them(
    settings: Settings,
) -> None:
    settings.CHECKPOINT_ENCRYPTION_KEY = ""
    rita = make_user("rita", "reviewer")
    request_ = make_gate(description="gAAAA is how a token begins")  # not a token: plain text
    valid = check_decision(request_, user=rita, decision="reject", message="gAAAAB not a token either")
    do_decide(request_, reviewer=rita, valid=valid)
    assert raw(ApprovalRequest, request_.pk, "args").startswith("{")

    settings.CHECKPOINT_ENCRYPTION_KEY = Fernet.generate_key().decode()
    request_.refresh_from_db()
    assert request_.description == "gAAAA is how a token begins"
    assert request_.decision_message == "gAAAAB not a token either"
    call_command("rotate_checkpoint_key", stdout=None)

    for name in ("args", "description", "decision_message"):
        assert raw(ApprovalRequest, request_.pk, name).startswith("gAAAA")
    request_.refresh_from_db()
    assert request_.args == {"order_id": "ORD-1001", "amount_cents": 4250}
    assert verify_ledger().ok


def test_the_ledger_page_and_its_csv_show_the_plaintext(settings: Settings) -> None:
    settings.CHECKPOINT_ENCRYPTION_KEY = Fernet.generate_key().decode()
    event = do_audit(actor=None, action="thread.message", data={"said": "ORD-1003 arrived crushed"})
    assert "crushed" not in raw(AuditEvent, event.pk, "data")
    client = Client()
    client.force_login(make_user("ada", "admin"))

    assert "ORD-1003 arrived crushed" in client.get("/ledger/").content.decode()
    exported = client.get("/ledger.csv")
    assert "ORD-1003 arrived crushed" in b"".join(exported.streaming_content).decode()  # type: ignore[attr-defined]


def test_ciphertext_no_key_opens_is_reported_by_verify_ledger_not_raised(settings: Settings) -> None:
    settings.CHECKPOINT_ENCRYPTION_KEY = Fernet.generate_key().decode()
    first = do_audit(actor=None, action="thread.message", data={"said": "one"})
    do_audit(actor=None, action="thread.message", data={"said": "two"})
    foreign = Fernet(Fernet.generate_key()).encrypt(b'{"said":"forged"}').decode()
    with connection.cursor() as cursor:
        table = connection.ops.quote_name(AuditEvent._meta.db_table)
        cursor.execute(f"UPDATE {table} SET data = %s WHERE id = %s", [foreign, first.pk])

    report = verify_ledger()

    assert [p.event_id for p in report.problems] == [first.pk]
    assert "cannot be read" in report.problems[0].problem


def test_data_the_configured_keys_cannot_open_is_a_clear_503_saying_which_setting(
    settings: Settings, caplog: pytest.LogCaptureFixture
) -> None:
    settings.CHECKPOINT_ENCRYPTION_KEY = Fernet.generate_key().decode()
    rita = make_user("rita", "reviewer")
    request_ = make_gate()
    token = do_create_token(user=rita)
    settings.CHECKPOINT_ENCRYPTION_KEY = Fernet.generate_key().decode()  # the old key dropped too soon
    web = Client(raise_request_exception=False)
    web.force_login(rita)
    api = Client(raise_request_exception=False, headers={"Authorization": f"Bearer {token}"})

    page, decision = web.get("/"), web.get(f"/approvals/{request_.pk}/")
    listed = api.get("/api/approvals")

    for response in (page, decision):
        assert response.status_code == 503
        assert (
            "cannot be decrypted with the configured CHECKPOINT_ENCRYPTION_KEY" in response.content.decode()
        )
    assert listed.status_code == 503
    assert "rotate_checkpoint_key" in listed.json()["detail"]
    assert "encrypted data cannot be opened" in caplog.text  # an error for the operator to fix


def test_a_sign_off_s_edited_arguments_are_encrypted_and_read_back(settings: Settings) -> None:
    settings.CHECKPOINT_ENCRYPTION_KEY = Fernet.generate_key().decode()
    do_create_policy(
        actor=None,
        fields={
            "name": "two people",
            "tool": "issue_refund",
            "when": "true",
            "action": "require",
            "approvers": 2,
        },
    )
    rita = make_user("rita", "reviewer")
    request_ = make_gate()
    edited = {"order_id": "ORD-1001", "amount_cents": 3131}
    do_decide(
        request_, reviewer=rita, valid=check_decision(request_, user=rita, decision="edit", args=edited)
    )

    signoff = Signoff.objects.get(request=request_)
    stored = str(
        Signoff.objects.filter(pk=signoff.pk)
        .annotate(_s=stored_text("args"))
        .values_list("_s", flat=True)
        .get()
    )
    assert stored.startswith("gAAAA") and "3131" not in stored
    assert signoff.args == edited
