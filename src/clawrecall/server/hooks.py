"""REST `/v1/hooks`: the lifecycle hooks (`clawrecall.hooks`) for an agent runtime's plugin.

The body is the runtime's hook event (OpenClaw's `before_prompt_build`/`agent_end` event, plus
`model` for startup); who the turn belongs to comes from authentication, as for every route.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping

from fastapi import APIRouter, Body, Depends

from .. import hooks
from ..engine import Memory
from ..scopes import Caller
from .deps import caller, memory

HookFn = Callable[[Memory, Mapping[str, Any], Caller], dict[str, Any]]
HOOKS: dict[str, tuple[HookFn, str]] = {
    "before_prompt_build": (hooks.before_prompt_build, "Recall: the `<relevant-memories>` block to prepend."),
    "startup": (hooks.startup_context, "Startup identity: the `init:` block on a session's first turn."),
    "agent_end": (hooks.agent_end, "Capture: queue what the finished turn said worth keeping; answers before writing."),
}

router = APIRouter(prefix="/v1/hooks", tags=["hooks"])


def _endpoint(hook: HookFn) -> Callable[..., dict[str, Any]]:
    def call(
        event: dict[str, Any] = Body(default_factory=dict), mem: Memory = Depends(memory),
        ctx: Caller = Depends(caller),
    ) -> dict[str, Any]:
        return hook(mem, event, ctx)

    return call


for _name, (_hook, _summary) in HOOKS.items():
    router.add_api_route(f"/{_name}", _endpoint(_hook), methods=["POST"], summary=_summary, name=_name)
