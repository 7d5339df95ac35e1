"""Signals the checkpoint store sends. Receivers live in the apps above it."""

from django.dispatch import Signal

protect_checkpoints = Signal()
"""Sent before retention prunes a thread, with `thread_id`. A receiver returns the ids of
checkpoints that must be kept (say, ones an open approval request points at); the head is
always kept. Approvals connects `approvals.actions.gates.open_request_checkpoints` (the
checkpoints its pending requests point at) in its AppConfig.ready().
"""
