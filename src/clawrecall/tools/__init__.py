"""The agent tools, defined once and served by every door (REST `/v1/tools/*`, MCP over HTTP and stdio).

Names, arguments and result shapes follow the seeds: 000's memory_recall, memory_store,
memory_forget and search_context; 001's memory_search, memory_get and the gated writes; 002's
memory_list and memory_stats. Tools that write are offered only when `writes.enabled`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Mapping

from . import browse, recall, records
from ..errors import UnknownToolError
from .base import Tool, ToolResult

if TYPE_CHECKING:
    from ..engine import Memory
    from ..scopes import Caller

ALL_TOOLS: tuple[Tool, ...] = (*recall.TOOLS, *records.TOOLS, *browse.TOOLS)


def tools_for(mem: Memory) -> list[Tool]:
    """The tools this store offers: all of them, or the read-only ones when writes are disabled."""
    return [t for t in ALL_TOOLS if mem.config.writes.enabled or not t.writes]


def find_tool(mem: Memory, name: str) -> Tool:
    for t in tools_for(mem):
        if t.name == name:
            return t
    raise UnknownToolError(f"no tool named {name!r}: use one of {', '.join(t.name for t in tools_for(mem))}")


def run_tool(mem: Memory, caller: Caller, name: str, arguments: Mapping[str, Any] | None) -> ToolResult:
    """Call a tool by name; every deliberate failure, an unknown name included, is an error result."""
    try:
        found = find_tool(mem, name)
    except UnknownToolError as exc:
        return ToolResult.error(exc)
    return found.run(mem, caller, arguments)


__all__ = ["ALL_TOOLS", "Tool", "ToolResult", "UnknownToolError", "find_tool", "run_tool", "tools_for"]
