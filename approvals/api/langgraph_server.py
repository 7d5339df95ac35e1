"""The LangGraph server API, mounted at /langgraph: the subset LangGraph's own client
(`langgraph_sdk.get_client(url=".../langgraph", api_key=TOKEN)`) and Agent Inbox use, over
Gatehouse's LangGraph agents (one assistant per registered `LangGraphAgent`, graph_id = its name).

Assistants and /info (langgraph_assistants.py); threads: create, get, search, get_state,
update_state, history (langgraph_threads.py); runs on a thread: create, wait, stream, get, join,
join_stream, list, cancel, delete (langgraph_thread_runs.py, streamed by langgraph_stream.py);
stateless runs: /runs, /runs/wait, /runs/stream, each on a thread of its own, deleted once the
run ends unless on_completion is "keep" or it stopped at a gate for a reviewer
(langgraph_stateless.py). A run's options are served or refused as langgraph_options.py says;
any other filter, option or field a body names is a 422 naming it, and nothing was done; /info
answers what is served. Not served: other stream modes, crons, the store; an address not
served answers a JSON 404 or 405 (langgraph_api.py: the API object and its errors).

Importing this module registers every route on `api` (config/urls.py mounts it). Django tries
paths in the order they were registered: in each module a path with a fixed part
(/threads/search, /threads/{id}/runs/wait) comes before the {id} one that would match it too.
"""

from approvals.api import (  # noqa: F401  (each registers its routes)
    langgraph_assistants,
    langgraph_stateless,
    langgraph_thread_runs,
    langgraph_threads,
)
from approvals.api.langgraph_api import api

__all__ = ["api"]
