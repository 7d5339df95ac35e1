"""Preview a policy from its admin form before saving it (admins only)."""

from django.contrib import admin
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_http_methods

from agents.actions import InvalidInput
from approvals.access import Access
from approvals.http import AuthedRequest
from approvals.models import Policy
from approvals.policies import Rule
from approvals.policy_preview import DEFAULT_LIMIT, candidate, candidate_rule, preview_policy


@require_http_methods(["GET", "POST"])
def preview(request: AuthedRequest) -> HttpResponse:
    """POST: the policy admin form as it stands (its Preview button); GET ?policy=<id>: a saved policy."""
    if not Access.of(request.user).can_manage_policies:
        raise PermissionDenied("Only admins manage policies.")
    context: dict[str, object] = {"limit": DEFAULT_LIMIT}
    rule = _from_form(request, context) if request.method == "POST" else _saved(request)
    if rule is None:
        return render(request, "approvals/policy_preview.html", context, status=400)
    context.update(rule=rule, preview=preview_policy(rule, limit=DEFAULT_LIMIT))
    return render(request, "approvals/policy_preview.html", context)


def _policy_id(raw: str) -> int | None:
    # ASCII digits only: "²" passes isdigit() and int() refuses it (a 500).
    return int(raw) if raw.isascii() and raw.isdecimal() and len(raw) < 12 else None


def _saved(request: AuthedRequest) -> Rule:
    try:
        return candidate(policy_id=_policy_id(request.GET.get("policy", "")) or 0, fields={}, groups=None)
    except (Policy.DoesNotExist, InvalidInput) as exc:
        raise Http404("No such policy.") from exc


def _from_form(request: AuthedRequest, context: dict[str, object]) -> Rule | None:
    """The unsaved policy the admin's form describes, or None (errors in the context)."""
    policy_id = _policy_id(request.POST.get("_preview_of", ""))
    existing = Policy.objects.filter(pk=policy_id).first() if policy_id else None
    form_class = admin.site._registry[Policy].get_form(request, existing, change=existing is not None)
    form = form_class(request.POST, instance=existing or Policy())
    if not form.is_valid():
        context["errors"] = {field: " ".join(str(e) for e in errors) for field, errors in form.errors.items()}
        return None
    policy = form.save(commit=False)  # never saved: a preview changes nothing
    return candidate_rule(policy, groups=[g.name for g in form.cleaned_data.get("groups", [])])
