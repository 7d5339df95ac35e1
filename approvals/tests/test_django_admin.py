"""Django admin belongs to the admin role, a group (README, "Security model": admin "does
everything … and reaches Django admin"; admins "manage queues and membership in Django admin"):
a member of the admin group who is neither staff nor superuser manages queues, users and groups
there; what no one may do there (add a token, change the ledger) stays refused; other roles,
staff or not, get nothing."""

from typing import Any

import pytest
from django.contrib.auth.models import Group
from django.test import Client

from approvals.actions.audit import do_audit
from approvals.models import Queue
from approvals.roles import ensure_roles
from tests.factories import make_user

pytestmark = pytest.mark.django_db

MODEL_PAGES = ["approvals/queue", "approvals/apitoken", "auth/user", "auth/group", "checkpoints/thread"]


def client_for(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_a_member_of_the_admin_group_manages_queues_users_and_groups() -> None:
    ada = make_user("ada", "admin")
    assert not (ada.is_staff or ada.is_superuser)
    admin = client_for(ada)

    index = admin.get("/admin/").content.decode()
    for page in MODEL_PAGES:
        assert f'href="/admin/{page}/"' in index, page
        assert admin.get(f"/admin/{page}/").status_code == 200, page
    ensure_roles()
    added = admin.post(
        "/admin/approvals/queue/add/",
        {"name": "payouts", "description": "", "groups": [Group.objects.get(name="reviewer").pk]},
    )
    assert added.status_code == 302
    assert list(Queue.objects.get(name="payouts").groups.values_list("name", flat=True)) == ["reviewer"]


def test_what_no_one_may_do_there_stays_refused_to_the_admin_role() -> None:
    admin = client_for(make_user("ada", "admin"))
    event = do_audit(actor=None, action="test.event")

    assert admin.get("/admin/approvals/apitoken/add/").status_code == 403  # tokens: create_api_token
    assert admin.get(f"/admin/approvals/auditevent/{event.pk}/delete/").status_code == 403  # the ledger


@pytest.mark.parametrize("role", ["operator", "reviewer"])
def test_other_roles_get_no_model_page_even_as_staff(role: str) -> None:
    user = make_user("olga", role)
    user.is_staff = True
    user.save()
    client = client_for(user)

    for page in MODEL_PAGES:
        assert client.get(f"/admin/{page}/").status_code == 302, page  # to the admin's login


def test_the_thread_admin_shows_storage_and_recent_checkpoints_and_deletes_through_the_store() -> None:
    from checkpoints.models import Checkpoint, StoredValue, Thread
    from tests.factories import make_gate

    gone, other, kept = make_gate(), make_gate(), make_gate()
    admin = client_for(make_user("ada", "admin"))

    page = admin.get(f"/admin/checkpoints/thread/{gone.thread_id}/change/").content.decode()
    assert "Newest 50 checkpoints" in page and "Storage" in page and str(gone.checkpoint_id) in page
    deleted = admin.post(
        "/admin/checkpoints/thread/",
        {"action": "delete_threads", "_selected_action": [gone.thread_id, other.thread_id]},
    )

    assert deleted.status_code == 302
    assert list(Thread.objects.values_list("id", flat=True)) == [kept.thread_id]
    assert set(Checkpoint.objects.values_list("thread_id", flat=True)) == {kept.thread_id}
    assert set(StoredValue.objects.values_list("thread_id", flat=True)) == {kept.thread_id}


def test_deleting_threads_in_the_admin_is_in_the_ledger_with_what_was_deleted() -> None:
    from approvals.actions.ledger import verify_ledger
    from approvals.models import AuditEvent
    from tests.factories import make_gate

    one, two = make_gate(), make_gate()
    admin = client_for(make_user("ada", "admin"))

    admin.post(f"/admin/checkpoints/thread/{one.thread_id}/delete/", {"post": "yes"})
    admin.post(
        "/admin/checkpoints/thread/", {"action": "delete_threads", "_selected_action": [two.thread_id]}
    )

    events = AuditEvent.objects.filter(action="thread.delete").order_by("id")
    assert [(e.actor_name, e.thread_id, e.checkpoint_id) for e in events] == [
        ("ada", one.thread_id, str(one.checkpoint_id)),
        ("ada", two.thread_id, str(two.checkpoint_id)),
    ]
    assert events[0].data == {
        "agent": "refunds",
        "status": "waiting",
        "checkpoints": 2,
        "pending_requests": [one.pk],
        "state_digest": events[0].data["state_digest"],
    }
    assert verify_ledger().ok


def test_the_thread_delete_page_counts_what_goes_and_needs_no_permission_on_checkpoints() -> None:
    from tests.factories import make_gate

    gate = make_gate()
    admin = client_for(make_user("ada", "admin"))

    page = admin.get(f"/admin/checkpoints/thread/{gate.thread_id}/delete/").content.decode()

    assert f"Thread {gate.thread_id} (refunds, waiting)" in page
    assert "Checkpoints: 2" in page and "permission" not in page


def test_a_thread_another_admin_deleted_first_is_deleted_once_and_recorded_once() -> None:
    from approvals.actions.threads import do_delete_thread
    from approvals.models import AuditEvent
    from tests.factories import make_gate

    gate = make_gate()
    ada = make_user("ada", "admin")

    do_delete_thread(gate.thread_id, user=ada)
    do_delete_thread(gate.thread_id, user=ada)  # the second admin's, a moment later

    assert AuditEvent.objects.filter(action="thread.delete").count() == 1


def test_every_page_names_the_icon_so_no_browser_asks_for_a_missing_favicon_ico() -> None:
    from django.contrib.staticfiles import finders

    ada = client_for(make_user("ada", "admin"))
    icon = '<link rel="icon" href="/static/favicon.svg" type="image/svg+xml">'

    for page in ["/", "/threads/", "/ledger/", "/admin/", "/admin/checkpoints/thread/"]:
        assert icon in ada.get(page).content.decode(), page
    assert icon in Client().get("/login/").content.decode()
    assert finders.find("favicon.svg")


def test_a_request_in_the_admin_shows_its_description_rendered_safely_and_links_to_its_decision_page() -> (
    None
):
    from tests.factories import make_gate

    item = make_gate(
        description="Refund **$42.50** to `ORD-1001`. <script>alert(1)</script>[x](javascript:alert(1))"
    )
    admin = client_for(make_user("ada", "admin"))

    page = admin.get(f"/admin/approvals/approvalrequest/{item.pk}/change/").content.decode()

    assert "<strong>$42.50</strong>" in page and "<code>ORD-1001</code>" in page
    assert "**$42.50**" not in page
    assert "<script>alert(1)" not in page and 'href="javascript' not in page
    assert f'<a href="/approvals/{item.pk}/" target="_blank" rel="noopener">View in Gatehouse</a>' in page
    assert f'<a href="/approvals/{item.pk}/" class="viewsitelink">' in page  # Django's "View on site"


def test_a_thread_in_the_admin_links_to_its_thread_page() -> None:
    from tests.factories import make_gate

    item = make_gate()
    admin = client_for(make_user("ada", "admin"))

    page = admin.get(f"/admin/checkpoints/thread/{item.thread_id}/change/").content.decode()

    link = f'<a href="/threads/{item.thread_id}/" target="_blank" rel="noopener">View in Gatehouse</a>'
    assert link in page
    assert f'<a href="/threads/{item.thread_id}/" class="viewsitelink">' in page


def test_the_admin_and_its_login_page_say_gatehouse_not_django() -> None:
    # A reviewer sent to the admin lands on its login page: it named Django, not this product.
    login = Client().get("/admin/login/").content.decode()
    index = client_for(make_user("ada", "admin")).get("/admin/").content.decode()

    for page in (login, index):
        assert "Gatehouse administration" in page and "<title>" in page
        assert "Django administration" not in page and "Django site admin" not in page
