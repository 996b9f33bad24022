"""What every tool shares: what a tool is, its arguments, and what it returns.

A door (REST, MCP over HTTP or stdio) builds a `Caller` from its authentication and hands it to
`Tool.run`; the handler passes it on to the engine, whose one scope check applies it. Tool
arguments never carry identity, so an agent cannot widen its own scope by naming another user:
an argument such as `user_id` is rejected like any unknown argument.
"""

from __future__ import annotations

import logging
import time
import typing
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any, Callable, Mapping, Sequence

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, WithJsonSchema
from pydantic import ValidationError as PydanticValidationError

from ..errors import ClawrecallError, ErrorBody, ValidationError, pydantic_message
from ..scopes import Caller

if TYPE_CHECKING:
    from ..config import Config
    from ..engine import Memory

log = logging.getLogger("clawrecall.tools")

# Arguments a model might use to pass an identity; the error names the rule instead of "extra input".
_IDENTITY_ARGS = {"user_id", "userId", "user", "agent_id", "agentId", "agent", "session_id", "sessionId"}

# Optional arguments accept null but advertise only their real type, which is what a model should send.
OptionalStr = Annotated[str | None, WithJsonSchema({"type": "string"})]
OptionalFloat01 = Annotated[
    Annotated[float, Field(ge=0, le=1)] | None,  # NaN fails the bounds too
    WithJsonSchema({"type": "number", "minimum": 0, "maximum": 1}),
]
OptionalStrList = Annotated[list[str] | None, WithJsonSchema({"type": "array", "items": {"type": "string"}})]

# Arguments naming a memory category; their schema lists the configured categories.
CATEGORY_ARGS = ("type", "category")


@dataclass(frozen=True)
class ToolResult:
    """The OpenClaw/MCP tool result: text for the model, `details` for programs."""

    text: str
    details: Mapping[str, Any]
    is_error: bool = False

    @classmethod
    def error(cls, exc: ClawrecallError) -> "ToolResult":
        details = ErrorBody.of(exc.code, str(exc))
        return cls(f"Error: {details['error']['message']}", details, is_error=True)

    def to_json(self) -> dict[str, Any]:
        return {"content": [{"type": "text", "text": self.text}], "details": self.details, "isError": self.is_error}


class ToolArgs(BaseModel):
    """Base of every tool's arguments: unknown arguments (an identity among them) are errors, and a value of the
    wrong JSON type is one too, never converted (`true` or `"0.5"` is no importance; `1` is a number)."""

    model_config = ConfigDict(extra="forbid", strict=True)


Handler = Callable[["Memory", Caller, Any], ToolResult]


@dataclass(frozen=True)
class Effects:
    """What calling a tool does to the store, as MCP's tool annotations say it. A tool that writes may be
    `destructive` (it changes or removes what exists; else it only adds) and `idempotent` (calling it again
    with the same arguments changes nothing more). No tool reaches past the store: none is open-world."""

    writes: bool = False
    destructive: bool = False
    idempotent: bool | Callable[[Config], bool] = True  # or: whether it is, under this configuration


@dataclass(frozen=True)
class Tool:
    """One agent tool: what a model is told about it, its arguments' model, the shape of its result's
    `details`, and the handler that runs it."""

    name: str
    label: str
    description: str
    args: type[ToolArgs]
    details: Any  # a TypedDict (or a union of them): the `details` of a successful call
    handler: Handler
    effects: Effects = Effects()

    @property
    def writes(self) -> bool:
        return self.effects.writes

    def hints(self, config: Config) -> dict[str, bool]:
        """MCP's four tool annotations, as they are for this store."""
        idempotent = self.effects.idempotent
        return {
            "readOnlyHint": not self.writes, "destructiveHint": self.effects.destructive,
            "idempotentHint": idempotent(config) if callable(idempotent) else idempotent, "openWorldHint": False,
        }

    def listing(self, config: Config) -> dict[str, Any]:
        """The tool as MCP's `tools/list` names it (REST `/v1/tools` lists the same)."""
        return {
            "name": self.name, "title": self.label, "description": self.description,
            "inputSchema": self.input_schema(config.categories), "outputSchema": self.output_schema(),
            "annotations": {"title": self.label, **self.hints(config)},
        }

    def output_schema(self) -> dict[str, Any]:
        """The JSON schema of `details` (MCP's `outputSchema`: an object at the root, its `$defs` inside)."""
        schema = TypeAdapter(self.details).json_schema(mode="serialization")
        return {"type": "object", **schema} if "type" not in schema else schema

    def input_schema(self, categories: Sequence[str]) -> dict[str, Any]:
        """The arguments' JSON schema as a model reads it: no titles, no null defaults, categories listed."""
        schema = self.args.model_json_schema()
        schema.pop("title", None)
        properties = schema.setdefault("properties", {})
        for name, prop in properties.items():
            prop.pop("title", None)
            if "default" in prop and prop["default"] is None:
                del prop["default"]
            if name in CATEGORY_ARGS:
                prop["enum"] = list(categories)
        return schema

    def parse(self, arguments: Mapping[str, Any] | None) -> ToolArgs:
        if arguments is not None and not isinstance(arguments, Mapping):
            raise ValidationError(f"{self.name}: arguments must be a JSON object")
        arguments = dict(arguments or {})
        named = sorted(_IDENTITY_ARGS & arguments.keys())
        if named:
            raise ValidationError(
                f"{self.name} takes no {', '.join(named)}: who is calling comes from the connection, not from arguments"
            )
        try:
            return self.args.model_validate(arguments)
        except PydanticValidationError as exc:
            raise ValidationError(f"{self.name}: {pydantic_message(exc)}") from None

    def invoke(self, mem: Memory, caller: Caller, arguments: Mapping[str, Any] | None) -> ToolResult:
        """Parse and run; deliberate failures raise `ClawrecallError` (for doors that map them to statuses)."""
        return self.handler(mem, caller, self.parse(arguments))

    def run(self, mem: Memory, caller: Caller, arguments: Mapping[str, Any] | None) -> ToolResult:
        """Parse and run; a deliberate failure becomes an error result the model can read and correct."""
        started = time.perf_counter()
        try:
            result = self.invoke(mem, caller, arguments)
        except ClawrecallError as exc:
            result = ToolResult.error(exc)
        log.info(
            "tool call",
            extra={
                "tool": self.name, "user": caller.user_id, "agent": caller.agent_id,
                "ms": round((time.perf_counter() - started) * 1000, 2),
                "error": result.details["error"]["code"] if result.is_error else None,
            },
        )
        return result


def tool(*, label: str, description: str, details: Any, effects: Effects = Effects()) -> Callable[[Handler], Tool]:
    """Declare a handler `(mem, caller, args: SomeArgs) -> ToolResult` as the tool named after it; `details`
    is the shape of its successful results' details."""

    def declare(handler: Handler) -> Tool:
        args = typing.get_type_hints(handler)["args"]
        return Tool(handler.__name__, label, " ".join(description.split()), args, details, handler, effects)

    return declare
