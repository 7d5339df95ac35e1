"""Benchmark policy evaluation at a gate: `manage.py bench_policies --policies 100 --json`.

Creates N policies on one tool, none of which matches (the worst case: every condition runs),
inside a transaction rolled back at the end, and times the gate's work: the tool's policies
(cached in the process, checked against the policies' generation in Postgres), evaluating their compiled
conditions (compiled once, cached by text), and end to end `do_apply_policies` on a request of
a real thread (which also reads the thread's metadata for `thread.tenant`).
"""

import json as json_lib
import statistics
import time
from typing import Any

from django.core.management.base import BaseCommand, CommandParser
from django.db import transaction

from agents.registry import registry
from approvals import policy_cache
from approvals.actions.policy_gates import do_apply_policies
from approvals.models import ApprovalRequest, Policy, PolicyAction
from approvals.policies import compiled, effects_summary, first_match, gate_variables, rules_for
from checkpoints.backends import get_backend
from checkpoints.backends.base import NewCheckpoint
from checkpoints.command_args import positive_int
from checkpoints.models import CheckpointSource, ThreadStatus

TOOL = "bench_policies_tool"


class Command(BaseCommand):
    help = "Time evaluating N policies at a gate (p50 of repeated runs); nothing is kept."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--policies", type=positive_int, default=100)
        parser.add_argument("--repeat", type=positive_int, default=200)
        parser.add_argument("--json", action="store_true")
        parser.add_argument(
            "--args-only",
            action="store_true",
            help="conditions over args only (no thread.tenant: no thread read)",
        )

    def handle(
        self, *args: Any, policies: int, repeat: int, json: bool, args_only: bool, **options: Any
    ) -> None:
        tenant = "" if args_only else " && thread.tenant == 'org:{i}'"
        with transaction.atomic():
            Policy.objects.bulk_create(
                Policy(
                    name=f"bench {i}",
                    tool=TOOL,
                    when=f"args.amount_cents > {100_000 + i}" + tenant.format(i=i),
                    action=PolicyAction.APPROVE,
                    order=i,
                )
                for i in range(policies)
            )
            policy_cache.policies_changed()  # bulk_create sends no signal
            report = _measure(repeat)
            transaction.set_rollback(True)  # (the generation too: nothing to announce)
        report["policies"] = policies
        report["conditions"] = "args" if args_only else "args and thread.tenant"
        if json:
            self.stdout.write(_dumps(report))
        else:
            for key, value in report.items():
                self.stdout.write(f"{key}: {value}")


def _measure(repeat: int) -> dict[str, Any]:
    args = {"order_id": "ORD-1001", "amount_cents": 4250}

    def variables(with_effects: bool) -> dict[str, Any]:
        return gate_variables(
            args=args,
            agent="refunds",
            tool=TOOL,
            thread_id="bench",
            metadata={},
            effects=effects_summary([], current=args),
        )

    compiled.cache_clear()
    rules = rules_for(agent="refunds", tool=TOOL, thread_id="bench")
    first_match(rules, variables=variables)  # compiles every condition once
    evaluate, total = [], []
    for _ in range(repeat):
        started = time.perf_counter()
        loaded = rules_for(agent="refunds", tool=TOOL, thread_id="bench")
        loaded_at = time.perf_counter()
        assert first_match(loaded, variables=variables) is None
        done = time.perf_counter()
        evaluate.append((done - loaded_at) * 1000)
        total.append((done - started) * 1000)
    gate = _gate_request(args)
    at_gate = []
    for _ in range(repeat):
        started = time.perf_counter()
        assert do_apply_policies([gate], thread_id=gate.thread_id, agent="refunds") is False
        at_gate.append((time.perf_counter() - started) * 1000)
    return {
        "gate_p50_ms": round(statistics.median(at_gate), 3),
        "gate_p95_ms": round(sorted(at_gate)[int(len(at_gate) * 0.95)], 3),
        "evaluate_p50_ms": round(statistics.median(evaluate), 3),
        "evaluate_p95_ms": round(sorted(evaluate)[int(len(evaluate) * 0.95)], 3),
        "load_and_evaluate_p50_ms": round(statistics.median(total), 3),
        "compiles": compiled.cache_info().misses,
    }


def _gate_request(args: dict[str, Any]) -> ApprovalRequest:
    """A request (unsaved: no policy matches, so nothing writes it) on a new thread."""
    thread, first = get_backend().create_thread(
        thread_id=f"bench-policies-{time.time_ns()}",
        agent="refunds",
        status=ThreadStatus.WAITING,
        first=NewCheckpoint(
            values=registry.get("refunds").initial_values("bench"), source=CheckpointSource.INPUT, next=[]
        ),
        metadata={"tenant": "org:bench"},
    )
    return ApprovalRequest(
        thread_id=thread.id, checkpoint_id=first.id, key="bench", agent="refunds", action=TOOL, args=args
    )


def _dumps(report: dict[str, Any]) -> str:
    return json_lib.dumps(report, sort_keys=True)
