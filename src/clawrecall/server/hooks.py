"""REST `/v1/hooks`: the lifecycle hooks (`clawrecall.hooks`) for an agent runtime's plugin.

The body is the runtime's hook event: OpenClaw's `before_prompt_build` and `agent_end` events as
OpenClaw defines them (fields the hook does not read are accepted, so a plugin may pass the event
on whole), and `{model, messages}` for startup. Any other field is refused (422), as on every
route: a misspelt `promt` must not pass as an empty prompt. Who the turn belongs to comes from
authentication, as for every route.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping

from fastapi import APIRouter, Depends
from pydantic import BaseModel, ConfigDict, Field

from .. import hooks
from ..engine import Memory
from ..errors import ScopeError, ValidationError
from ..hooks.capture import CaptureAnswer
from ..hooks.recall import RecallAnswer
from ..hooks.startup import StartupAnswer
from ..scopes import Caller
from .deps import caller, memory
from .openapi import errors

router = APIRouter(prefix="/v1/hooks", tags=["hooks"])


class _Event(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


class Message(BaseModel):
    """A transcript message. A runtime's messages carry more (timestamps, usage, tool ids): kept, not read."""

    model_config = ConfigDict(extra="allow", strict=True)
    role: str = Field(description="`user` and `assistant` messages are read; others are skipped.")
    content: str | list[dict[str, Any]] | None = Field(
        None, description="The text, or content parts of which the `text` ones are read."
    )


Messages = list[Message] | None
MESSAGES = Field(None, description="The session's messages before this turn; an empty list starts a new session.")


class RecallEvent(_Event):
    """OpenClaw's `before_prompt_build` event."""

    prompt: str | None = Field(None, description="The turn's user input: what recall searches for.")
    messages: Messages = MESSAGES
    currentUserMessage: str | None = None
    currentUserMessageId: str | None = None


class StartupEvent(_Event):
    model: str | None = Field(None, description="The model of the turn, which picks the startup budget.")
    messages: Messages = MESSAGES


class CaptureEvent(_Event):
    """OpenClaw's `agent_end` event, and the channel it came on."""

    messages: Messages = Field(None, description="The finished turn's messages (a whole transcript: its last turn).")
    success: bool | None = Field(None, description="A failed turn (`false`) captures nothing.")
    channel: str | None = Field(None, description="The messaging channel, kept with the recorded messages.")
    runId: str | None = None
    error: str | None = None
    durationMs: float | None = None


def _route(hook: Callable[[Memory, Mapping[str, Any], Caller], Any], event: type[_Event], answer: Any) -> Callable:
    def call(body: Any = None, mem: Memory = Depends(memory), ctx: Caller = Depends(caller)) -> Any:
        # unset fields stay absent: `messages: []` (a new session) differs from no messages at all
        return hook(mem, body.model_dump(exclude_unset=True) if body is not None else {}, ctx)

    # the types FastAPI reads the body and the answer with (annotations here are text, which it would
    # resolve in this module, where `event` and `answer` are not names)
    call.__annotations__ = {"body": event | None, "mem": Memory, "ctx": Caller, "return": answer}
    return call


HOOKS = {
    "before_prompt_build": (
        _route(hooks.before_prompt_build, RecallEvent, RecallAnswer), "Recall: the `<relevant-memories>` block to prepend."
    ),
    "startup": (
        _route(hooks.startup_context, StartupEvent, StartupAnswer),
        "Startup identity: the `init:` block on a session's first turn.",
    ),
    "agent_end": (
        _route(hooks.agent_end, CaptureEvent, CaptureAnswer),
        "Capture: queue what the finished turn said worth keeping; answers before writing.",
    ),
}

for _name, (_endpoint, _summary) in HOOKS.items():
    router.add_api_route(
        f"/{_name}", _endpoint, methods=["POST"], summary=_summary, name=_name,
        responses=errors(ValidationError, ScopeError),
    )
