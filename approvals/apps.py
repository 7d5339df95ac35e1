from django.apps import AppConfig


class ApprovalsConfig(AppConfig):
    name = "approvals"
    verbose_name = "Approvals"

    def ready(self) -> None:
        from agents import signals
        from approvals import events
        from approvals.actions import gates

        signals.gates_opened.connect(gates.on_gates_opened, dispatch_uid="approvals.gates_opened")
        signals.gates_superseded.connect(gates.on_gates_superseded, dispatch_uid="approvals.gates_superseded")
        signals.thread_changed.connect(events.on_thread_changed, dispatch_uid="approvals.thread_changed")
