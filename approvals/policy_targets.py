"""What a policy may name: a registered agent, and a tool that agent gates. A policy is tried
only at a gate of its tool, so one naming a tool no agent gates (a typo, `lookup_order`) would
be saved and silently never apply: it is refused, naming the tools that are gated."""

from agents.registry import registry


def target_errors(*, agent: str, tool: str, was: tuple[str, str] | None = None) -> dict[str, str]:
    """Why a policy for `tool` of `agent` (blank: every agent) could never apply, by field ({}:
    it can). `was`: the policy's (agent, tool) as saved; unchanged, they stand (an agent retired
    since keeps policies an admin may still switch off or delete)."""
    if was == (agent, tool):
        return {}
    if agent:
        if agent not in registry.names():
            return {"agent": f"No agent is named {agent!r}. The agents: {', '.join(registry.names())}."}
        gated = registry.get(agent).gated_actions()
        if gated is None or tool in gated:  # None: any action may reach its gates (LangGraph)
            return {}
        return {"tool": f"{agent} gates no tool {tool!r}. Its gated tools: {_listed(gated)}."}
    listed: set[str] = set()
    open_ended = []
    for known in registry.all():
        gated = known.gated_actions()
        if gated is None:
            open_ended.append(known.name)
        else:
            listed |= gated
    if tool in listed:
        return {}
    error = f"No agent gates a tool {tool!r}. The gated tools: {_listed(listed)}."
    if open_ended:
        error += (
            f" The interrupts of {', '.join(open_ended)} may ask about other actions: name the agent "
            "for a policy on one of those."
        )
    return {"tool": error}


def _listed(names: set[str] | frozenset[str]) -> str:
    return ", ".join(sorted(names)) or "none"
