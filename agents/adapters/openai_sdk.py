"""The OpenAI Agents SDK (`openai-agents`), loaded as `openai_agents`.

The SDK's top-level package is named `agents`, like this project's Django app, which wins on the
import path. So this module loads the installed package under another name: `openai_agents`,
registered in `sys.modules`, from the files of the `openai-agents` distribution. Import the SDK
from here (`from agents.adapters.openai_sdk import sdk`, or the names re-exported below), never as
`agents`.

The SDK's modules import each other relatively, except a few that write `from agents.x import y`
(0.24.0: `prompts`, `models.default_models`, `memory.openai_conversations_session`, and the
extensions): those are compiled from their source with `agents` read as `openai_agents`, so they
never reach this project's app. Every other module loads (and caches its bytecode) unchanged.
"""

import importlib
import importlib.abc
import importlib.machinery
import importlib.metadata
import importlib.util
import re
import sys
import types
from collections.abc import Sequence
from pathlib import Path
from typing import Any

NAME = "openai_agents"
_ABSOLUTE = re.compile(rb"^(\s*)(from|import) agents(?=[.\s])", re.MULTILINE)


class _RenamingLoader(importlib.machinery.SourceFileLoader):
    """Loads an SDK module; one that imports `agents` absolutely is compiled with `openai_agents`
    in its place (uncached: its bytecode must not stand in for the file's own)."""

    def get_code(self, fullname: str) -> types.CodeType:
        source = self.get_data(self.path)
        if not _ABSOLUTE.search(source):
            return super().get_code(fullname)  # type: ignore[return-value]
        renamed = _ABSOLUTE.sub(rb"\1\2 " + NAME.encode(), source)
        return compile(renamed, self.path, "exec", dont_inherit=True)


class _Finder(importlib.abc.MetaPathFinder):
    """Finds `openai_agents.*` in the SDK's directory, loaded with `_RenamingLoader`."""

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: types.ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if not fullname.startswith(NAME + "."):
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is None or not isinstance(spec.loader, importlib.machinery.SourceFileLoader):
            return spec
        spec.loader = _RenamingLoader(fullname, spec.loader.path)
        return spec


def _load() -> types.ModuleType:
    if NAME in sys.modules:
        return sys.modules[NAME]
    init = Path(str(importlib.metadata.distribution("openai-agents").locate_file("agents/__init__.py")))
    sys.meta_path.insert(0, _Finder())
    spec = importlib.util.spec_from_file_location(
        NAME, init, loader=_RenamingLoader(NAME, str(init)), submodule_search_locations=[str(init.parent)]
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[NAME] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[NAME]
        raise
    # Tracing exports to OpenAI's servers by default: Gatehouse keeps its own record of runs.
    module.set_tracing_disabled(True)
    return module


sdk = _load()
"""The SDK's top-level package (what `import agents` gives elsewhere)."""

Agent: Any = sdk.Agent
Runner: Any = sdk.Runner
RunState: Any = sdk.RunState
RunContextWrapper: Any = sdk.RunContextWrapper
function_tool: Any = sdk.function_tool
OpenAIChatCompletionsModel: Any = sdk.OpenAIChatCompletionsModel
ModelProvider: Any = sdk.ModelProvider
ToolContext: Any = importlib.import_module(f"{NAME}.tool_context").ToolContext
function_schema: Any = importlib.import_module(f"{NAME}.function_schema").function_schema
