"""LangGraph on Gatehouse's store: `GatehouseSaver`, a BaseCheckpointSaver (docs/storage.md)."""

from checkpoints.langgraph.saver import GatehouseSaver

__all__ = ["GatehouseSaver"]
