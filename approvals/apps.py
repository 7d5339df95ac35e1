from django.apps import AppConfig
from django.core.checks import register


class ApprovalsConfig(AppConfig):
    name = "approvals"
    verbose_name = "Approvals"

    def ready(self) -> None:
        from agents import signals
        from approvals import checks, events
        from approvals.actions import gates, langgraph_runs
        from checkpoints.signals import protect_checkpoints

        signals.gates_opened.connect(gates.on_gates_opened, dispatch_uid="approvals.gates_opened")
        signals.gates_superseded.connect(gates.on_gates_superseded, dispatch_uid="approvals.gates_superseded")
        signals.thread_changed.connect(events.on_thread_changed, dispatch_uid="approvals.thread_changed")
        signals.thread_changed.connect(
            langgraph_runs.on_thread_changed, dispatch_uid="approvals.langgraph_runs"
        )
        protect_checkpoints.connect(gates.open_request_checkpoints, dispatch_uid="approvals.protect")
        register(checks.check_notify_backoff, "approvals")
        register(checks.check_notifiers, "approvals")
        self._watch_policies()

    def _watch_policies(self) -> None:
        """Every change to a policy, or to a group a cached policy names, invalidates the policies
        cached by each process."""
        from django.contrib.auth.models import Group
        from django.db.models.signals import m2m_changed, post_delete, post_migrate, post_save

        from approvals import policy_cache
        from approvals.models import Policy

        for sender, name in ((Policy, "policy_cache"), (Group, "policy_cache.group")):
            post_save.connect(policy_cache.on_policy_saved, sender=sender, dispatch_uid=f"{name}.save")
            post_delete.connect(policy_cache.on_policy_saved, sender=sender, dispatch_uid=f"{name}.delete")
        m2m_changed.connect(
            policy_cache.on_policy_saved, sender=Policy.groups.through, dispatch_uid="policy_cache.groups"
        )
        post_migrate.connect(policy_cache.on_flush, dispatch_uid="policy_cache.flush")  # also after a flush
