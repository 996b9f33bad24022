"""Lifecycle hooks for agent runtimes (OpenClaw's plugin first), as plain functions over a `Memory`.

- `before_prompt_build(mem, request, caller)`: recall — the `<relevant-memories>` block to prepend.
- `startup_context(mem, request, caller)`: startup identity — the `init:` block on a session's first turn.
- `agent_end(mem, request, caller)`: capture — queue what the finished turn said worth keeping.

`caller` is a `clawrecall.Caller`: its `user_id`, `agent_id` and `session_id` (any may be None). Their
per-session state and background writes belong to the store's runtime (`mem.upkeep.runtime`), which
`Memory.close()` drains. The REST server mounts these under `/v1/hooks/…`.
"""

from ..conversations.text import detect_category, keepable, sanitize_for_context, should_capture, strip_envelope
from .capture import agent_end
from .recall import before_prompt_build
from .startup import startup_context
from .text import should_skip_retrieval, skip_reason

__all__ = [
    "agent_end", "before_prompt_build", "detect_category", "keepable", "sanitize_for_context",
    "should_capture", "should_skip_retrieval", "skip_reason", "startup_context", "strip_envelope",
]
