"""Preview a new or changed policy: how the whole ordered policy set, with the candidate in
place, would have decided the last N requests of its tool, next to what happened. Reads only."""

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from functools import cache
from typing import Any

from django.utils import timezone

from approvals.actions.policies import EDITABLE, check_policy, groups_named, policy_facts
from approvals.models import RAN, ApprovalRequest, ApprovalStatus, Policy, PolicyAction
from approvals.policies import Rule, Unevaluated, effects_summary, first_match, gate_variables, load_rules
from approvals.presentation import LONG_TEXT, arg_rows
from checkpoints.models import Thread

DEFAULT_LIMIT = 200
MAX_LIMIT = 1000
NEW_ID = 2**62  # an unsaved policy gets the next id: among equal orders it comes last
TO_A_PERSON = "to a person"


@dataclass(frozen=True)
class PreviewRow:
    """One past request the candidate would have decided differently."""

    request_id: int
    thread_id: str
    created_at: datetime
    args: dict[str, Any]
    happened: str
    """What the policies did at the gate then: 'to a person', 'approved automatically by …'."""
    result: str
    """How the request ended: 'approved by rita', 'pending'."""
    would: str
    """What the policy set with the candidate would do: 'denied automatically by …'."""
    by_candidate: bool
    """Whether the candidate decides it (else another policy does, e.g. one saved since)."""

    @property
    def fields(self) -> list[tuple[str, str]]:
        """The arguments as the page shows them: one per line, text as written (a long one cut,
        as the ledger cuts it: the row links to the request)."""
        return [(k, v if len(v) <= LONG_TEXT else v[: LONG_TEXT - 1] + "…") for k, v in arg_rows(self.args)]

    @property
    def ended(self) -> str:
        """How the request ended, in the page's words: an undecided one has not ended."""
        return "still pending" if self.result == ApprovalStatus.PENDING else self.result


@dataclass(frozen=True)
class Preview:
    considered: int
    changed: list[PreviewRow]
    counts: dict[str, int]
    """How many of the considered requests each outcome (with the candidate) would cover."""

    @property
    def others_decide(self) -> bool:
        """Whether another policy than the candidate decides any changed request."""
        return any(not row.by_candidate for row in self.changed)


def candidate(*, policy_id: int | None, fields: dict[str, Any], groups: list[str] | None) -> Rule:
    """The rule the fields would make (of a new policy, or changes to policy `policy_id`),
    checked as a save would check it: InvalidInput (with the CEL error) when it could not be
    saved, Policy.DoesNotExist for an unknown id. Nothing is saved."""
    policy = Policy.objects.get(pk=policy_id) if policy_id is not None else Policy(name="new policy")
    for key, value in fields.items():
        if key in EDITABLE:
            setattr(policy, key, value)
    check_policy(policy)
    if groups is None:
        groups = [g.name for g in policy.groups.all()] if policy.pk else []
    groups_named(groups)
    return candidate_rule(policy, groups=groups)


def candidate_rule(policy: Policy, *, groups: list[str]) -> Rule:
    """The rule an unsaved (or changed) policy would be once saved: a save that changes nothing
    keeps its version, as the admin's and the API's saves do."""
    stored = Policy.objects.filter(pk=policy.pk).first() if policy.pk else None
    version = 1
    if stored is not None:
        changed = {**policy_facts(policy), "groups": sorted(groups)} != policy_facts(stored)
        version = stored.version + 1 if changed else stored.version
    return Rule(
        id=policy.pk or NEW_ID,
        name=policy.name,
        version=version,
        when=policy.when,
        action=policy.action,
        queue=policy.queue,
        approvers=policy.approvers,
        groups=tuple(sorted(groups)),
        message=policy.message,
        agent=policy.agent,
        thread_id=policy.thread_id,
        until=policy.until,
        order=policy.order,
        tool=policy.tool,
        enabled=policy.enabled,
        created_at=policy.created_at or timezone.now(),  # an unsaved one would be made now
    )


def outcome(rule: Rule | Unevaluated | None) -> str:
    """What a rule does at the gate, in words."""
    if isinstance(rule, Unevaluated):  # as the gate: no policy decides, a person does
        return f"{TO_A_PERSON}: {rule.reason.removeprefix('Left to a person: ')}"
    if rule is None:
        return TO_A_PERSON
    by = f"by {rule.label}"
    words: dict[str, str] = {
        PolicyAction.APPROVE: f"approved automatically {by}",
        PolicyAction.DENY: f"denied automatically {by}",
        PolicyAction.ROUTE: f"routed to {rule.queue} {by}",
        PolicyAction.REQUIRE: f"requires {rule.approvers} approvers {by}",
    }
    return words.get(rule.action, TO_A_PERSON)


def happened(request_: ApprovalRequest) -> str:
    """What the policies did at the request's gate, in the words of `outcome`."""
    if not request_.policy_name:
        return TO_A_PERSON
    by = f"by '{request_.policy_name}' v{request_.policy_version}"
    automatic = request_.decided_by_id is None and request_.decided_at is not None
    if request_.required_approvals > 1 or request_.required_groups:
        return f"requires {request_.required_approvals} approvers {by}"
    if automatic and request_.status == ApprovalStatus.APPROVED:
        return f"approved automatically {by}"
    if automatic and request_.status == ApprovalStatus.REJECTED:
        return f"denied automatically {by}"
    return f"routed to {request_.queue} {by}"


def result(request_: ApprovalRequest) -> str:
    if request_.decided_by is not None:
        return f"{request_.status} by {request_.decided_by.get_username()}"
    return str(request_.status)


def _kind(text: str) -> str:
    return TO_A_PERSON if text.startswith(TO_A_PERSON) else text.split(" by ", 1)[0]


def preview_policy(candidate: Rule, *, limit: int = DEFAULT_LIMIT) -> Preview:
    """Decide the tool's last `limit` requests (of the candidate's agent, if it names one) with
    the candidate in the ordered policy set, as the gate would have when each was raised."""
    tool = candidate.tool
    rules = [r for r in load_rules(tool) if r.id != candidate.id]
    if candidate.enabled:
        rules = sorted([*rules, candidate], key=lambda r: r.precedence)
    requests = ApprovalRequest.objects.filter(action=tool).select_related("decided_by")
    if candidate.agent:
        requests = requests.filter(agent=candidate.agent)
    recent = list(requests.order_by("-created_at", "-id")[: max(1, min(limit, MAX_LIMIT))])
    thread_ids = {r.thread_id for r in recent}
    # One query for every thread's metadata (and one for their effects, if a condition reads
    # them), not one per request: the last 1,000 requests span hundreds of threads.
    threads = Thread.objects.filter(pk__in=thread_ids).values_list("id", "metadata", "created_at")
    metadata = {thread_id: (data, created) for thread_id, data, created in threads}
    effects = _effects_reader(tool, thread_ids)
    changed: list[PreviewRow] = []
    counts: dict[str, int] = {}
    # The calls of one model message open at one gate, in id order: one the set would approve
    # counts in the effects its later siblings see, as at the gate.
    approved_at_gate: dict[Any, list[dict[str, Any]]] = {}
    decided: dict[int, Rule | Unevaluated | None] = {}
    for request_ in sorted(recent, key=lambda r: r.pk):
        data, created = metadata.get(request_.thread_id, ({}, request_.created_at))
        # As the gate: a policy scoped to a thread decides only on the thread it was made on.
        applying = [
            r
            for r in rules
            if r.applies(agent=request_.agent, thread_id=request_.thread_id, now=request_.created_at)
            and r.made_on(thread_created=created)
        ]
        siblings = approved_at_gate.setdefault(request_.checkpoint_id, [])
        variables = _variables(request_, data or {}, effects=effects, siblings=list(siblings))
        deciding = decided[request_.pk] = first_match(applying, variables=variables)
        if isinstance(deciding, Rule) and deciding.action == PolicyAction.APPROVE:
            siblings.insert(0, request_.args)
    for request_ in recent:
        deciding = decided[request_.pk]
        would = outcome(deciding)
        # The rule behind the outcome: the one that decides, or the one that failed to evaluate.
        behind = deciding.rule if isinstance(deciding, Unevaluated) else deciding
        counts[_kind(would)] = counts.get(_kind(would), 0) + 1
        then = happened(request_)
        if _kind(would) != _kind(then):  # the same decision by a new version is no change
            changed.append(
                PreviewRow(
                    request_id=request_.pk,
                    thread_id=request_.thread_id,
                    created_at=request_.created_at,
                    args=request_.args,
                    happened=then,
                    result=result(request_),
                    would=would,
                    by_candidate=behind is not None and behind.id == candidate.id,
                )
            )
    return Preview(considered=len(recent), changed=changed, counts=counts)


def _effects_reader(tool: str, thread_ids: set[str]) -> Callable[[str], list[ApprovalRequest]]:
    """Each thread's calls of the tool that ran or were approved to run, read for all the
    threads at once when first asked (as the gate reads them: every one, not the last of any
    tool)."""

    @cache
    def by_thread() -> dict[str, list[ApprovalRequest]]:
        done: dict[str, list[ApprovalRequest]] = {}
        rows = ApprovalRequest.objects.filter(thread_id__in=thread_ids, action=tool, status__in=RAN)
        for row in rows.only(*EFFECT_FIELDS).order_by("-decided_at", "-id"):
            done.setdefault(row.thread_id, []).append(row)
        return done

    return lambda thread_id: by_thread().get(thread_id, [])


EFFECT_FIELDS = ("thread_id", "checkpoint_id", "args", "decision_args", "decided_at", "decided_by")


def _done_before(effect: ApprovalRequest, request_: ApprovalRequest) -> bool:
    """Whether the gate of request_ counted the effect: approved before the request was raised,
    (a sibling at the same gate, decided after it was raised, counts as the previewed set
    decides it)."""
    decided = effect.decided_at
    return effect.pk != request_.pk and decided is not None and decided < request_.created_at


def _variables(
    request_: ApprovalRequest,
    metadata: dict[str, Any],
    *,
    effects: Callable[[str], list[ApprovalRequest]],
    siblings: list[dict[str, Any]],
) -> Any:
    def build(with_effects: bool) -> dict[str, Any]:
        # The effects done before the request was raised: what its gate would have seen.
        done = (
            [*siblings, *(e.effective_args for e in effects(request_.thread_id) if _done_before(e, request_))]
            if with_effects
            else []
        )
        variables = gate_variables(
            args=request_.args,
            agent=request_.agent,
            tool=request_.action,
            thread_id=request_.thread_id,
            metadata=metadata,
            effects=effects_summary(done, current=request_.args),
        )
        variables["now"] = request_.created_at
        return variables

    return build
