"""Anthropic's Messages API through the official `anthropic` SDK.

A schema becomes one tool whose `input_schema` it is, and `tool_choice` forces the model to call it:
the tool's input is the answer, returned as JSON text. System messages go in `system`, as the API wants.
`temperature` is not sent: the Messages API of SDK 2.x takes none (the model's own setting applies).
"""

from __future__ import annotations

import json
from types import ModuleType
from typing import Any

from ..config import LLMConfig
from .base import LLM, NO_KEY, Completion, schema_instruction

DEFAULT_BASE_URL = "https://api.anthropic.com"


class AnthropicLLM(LLM):
    provider = "anthropic"
    default_key_env = "ANTHROPIC_API_KEY"

    def __init__(self, config: LLMConfig, api_key: str | None):
        super().__init__(config, api_key)
        import anthropic

        self._anthropic = anthropic
        self._base_url = (config.base_url or DEFAULT_BASE_URL).strip().rstrip("/")
        self._client = anthropic.Anthropic(
            api_key=api_key or NO_KEY, base_url=self._base_url, timeout=config.timeout_s, max_retries=0
        )

    @property
    def base_url(self) -> str:
        return self._base_url

    @property
    def _sdk(self) -> ModuleType:
        return self._anthropic

    def close(self) -> None:
        self._client.close()

    def _call(self, messages, schema, schema_name, max_tokens, temperature) -> Completion:
        system = [m["content"] for m in messages if m["role"] == "system"]
        request: dict[str, Any] = {
            "model": self.model,
            "messages": [m for m in messages if m["role"] != "system"],
            "max_tokens": max_tokens,
        }
        if schema is not None and self.config.structured_output == "none":
            system.append(schema_instruction(schema))
        elif schema is not None:
            request["tools"] = [{"name": schema_name, "description": "Give the answer.", "input_schema": schema}]
            request["tool_choice"] = {"type": "tool", "name": schema_name}
        if system:
            request["system"] = "\n\n".join(system)
        response = self._client.messages.create(**request)
        blocks = getattr(response, "content", None)
        if not isinstance(blocks, list):
            raise self._bad_answer("no content")
        tool = next((b for b in blocks if b.type == "tool_use" and b.name == schema_name), None)
        said = "".join(b.text for b in blocks if b.type == "text")
        usage = response.usage
        return Completion(
            text=json.dumps(tool.input, ensure_ascii=False) if tool is not None else said,
            input_tokens=(usage.input_tokens or 0) if usage else 0,
            output_tokens=(usage.output_tokens or 0) if usage else 0,
            model=response.model or self.model,
            finish_reason=response.stop_reason,
            refusal=(said or "refused") if response.stop_reason == "refusal" else None,
        )
