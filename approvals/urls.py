from django.urls import path

from approvals.views import history, inbox, ledger, policies, threads

app_name = "approvals"
urlpatterns = [
    path("", inbox.inbox, name="inbox"),
    path("approvals/<int:pk>/", inbox.decision, name="decision"),
    path("approvals/<int:pk>/claim/", inbox.claim, name="claim"),
    path("approvals/<int:pk>/undo/", inbox.undo, name="undo"),
    path("ledger/", ledger.ledger, name="ledger"),
    path("policies/preview/", policies.preview, name="policy-preview"),
    path("ledger.csv", ledger.ledger_csv, name="ledger-csv"),
    path("threads/", threads.threads, name="threads"),
    path("threads/<str:thread_id>/", threads.thread_detail, name="thread"),
    path("threads/<str:thread_id>/control/<str:verb>/", threads.control, name="thread-control"),
    path(
        "threads/<str:thread_id>/standing/<int:pk>/revoke/",
        threads.revoke_standing,
        name="thread-revoke-standing",
    ),
    path("threads/<str:thread_id>/state/", threads.edit_state, name="thread-state"),
    path("threads/<str:thread_id>/messages/", threads.continue_thread, name="thread-continue"),
    path(
        "threads/<str:thread_id>/checkpoints/<str:checkpoint_id>/",
        history.checkpoint_detail,
        name="checkpoint",
    ),
    path("threads/<str:thread_id>/diff/", history.diff, name="thread-diff"),
]
