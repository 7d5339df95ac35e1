"""Email reviewers through Django's email framework (EMAIL_BACKEND, EMAIL_HOST, ...)."""

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.mail import EmailMessage

from approvals.access import reviewers_who_may_decide
from approvals.notifiers import ESCALATED, BaseNotifier, Notification


class EmailNotifier(BaseNotifier):
    """To NOTIFY_EMAIL_TO when set, else to every reviewer with an email who may decide the queue."""

    def send(self, notification: Notification) -> None:
        approval = notification.approval
        recipients = self.recipients(approval["queue"])
        if not recipients:
            return
        verb = "Escalated to" if notification.event == ESCALATED else "Waiting in"
        message = EmailMessage(
            subject=f"[Gatehouse] {verb} {approval['queue']}: {approval['action']}",
            body=self.body(notification),
            to=recipients,
            headers={"X-Gatehouse-Delivery": notification.delivery_id},
        )
        message.send(fail_silently=False)

    def recipients(self, queue: str) -> list[str]:
        if settings.NOTIFY_EMAIL_TO:
            return list(settings.NOTIFY_EMAIL_TO)
        users = get_user_model().objects.filter(is_active=True).exclude(email="").order_by("pk")
        return [u.email for u in reviewers_who_may_decide(users.prefetch_related("groups"), queue)]

    def body(self, notification: Notification) -> str:
        a = notification.approval
        lines = [
            f"{a['agent']} wants to run {a['action']} in thread {a['thread_id']}.",
            "",
            a["description"] or "",
            "",
            *(f"  {k}: {v}" for k, v in a["args"].items()),
            "",
            f"Decide: {a['url']}",
        ]
        if a["escalated_from"]:
            lines.insert(0, f"Escalated from {a['escalated_from']}: {a['reason']}\n")
        return "\n".join(lines)
