"""Lifecycle hooks for agent runtimes (OpenClaw's plugin first), as plain functions over a `Memory`.

- `before_prompt_build(mem, request, ctx)`: recall — the `<relevant-memories>` block to prepend.
- `startup_context(mem, request, ctx)`: startup identity — the `init:` block on a session's first turn.
- `agent_end(mem, request, ctx)`: capture — queue what the finished turn said worth keeping.

`ctx` carries the caller's `user_id`, `agent_id` and `session_id` (any may be None). The REST
server mounts these under `/v1/hooks/…` and calls `drain()` on shutdown.
"""

from .capture import agent_end, detect_category, drain, should_capture
from .context import HookContext
from .recall import before_prompt_build
from .startup import startup_context
from .text import sanitize_for_context, should_skip_retrieval, skip_reason, strip_envelope

__all__ = [
    "HookContext", "agent_end", "before_prompt_build", "detect_category", "drain", "sanitize_for_context",
    "should_capture", "should_skip_retrieval", "skip_reason", "startup_context", "strip_envelope",
]
