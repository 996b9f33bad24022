"""OpenAI's chat completions through the official `openai` SDK, and the same API at any other address:
Ollama, vLLM, llama.cpp's server, LM Studio, OpenRouter (`llm.base_url`).

A schema goes as `response_format` json_schema (strict). In `auto` mode a server that answers 400 or
422 to json_schema is asked again with json_object (the schema then goes in words), and this client keeps
asking that way.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

from ..config import LLMConfig
from .base import LLM, NO_KEY, Completion, schema_instruction

DEFAULT_BASE_URL = "https://api.openai.com/v1"


class OpenAILLM(LLM):
    provider = "openai"
    default_key_env = "OPENAI_API_KEY"

    def __init__(self, config: LLMConfig, api_key: str | None):
        super().__init__(config, api_key)
        import openai

        self._openai = openai
        self._base_url = (config.base_url or DEFAULT_BASE_URL).strip().rstrip("/")
        self._client = openai.OpenAI(
            api_key=api_key or NO_KEY, base_url=self._base_url, timeout=config.timeout_s, max_retries=0
        )
        self._mode = config.structured_output
        # OpenAI's own newer models take only max_completion_tokens; other servers know max_tokens
        self._tokens_param = "max_tokens" if config.base_url else "max_completion_tokens"

    @property
    def base_url(self) -> str:
        return self._base_url

    @property
    def _sdk(self) -> ModuleType:
        return self._openai

    def close(self) -> None:
        self._client.close()

    def _call(self, messages, schema, schema_name, max_tokens, temperature) -> Completion:
        try:
            return self._send(messages, schema, schema_name, max_tokens, temperature)
        except (self._openai.BadRequestError, self._openai.UnprocessableEntityError) as exc:
            if not (schema is not None and self._mode == "auto" and _refuses_json_schema(exc)):
                raise
            self._mode = "json_object"
            return self._send(messages, schema, schema_name, max_tokens, temperature)

    def _send(self, messages, schema, schema_name, max_tokens, temperature) -> Completion:
        request: dict[str, Any] = {
            "model": self.model,
            "messages": list(messages),
            "temperature": temperature,
            self._tokens_param: max_tokens,
        }
        if schema is not None:
            if self._mode in ("auto", "json_schema"):
                request["response_format"] = {
                    "type": "json_schema",
                    "json_schema": {"name": schema_name, "schema": schema, "strict": True},
                }
            else:
                request["messages"] = [*messages, {"role": "system", "content": schema_instruction(schema)}]
                if self._mode == "json_object":
                    request["response_format"] = {"type": "json_object"}
        response = self._client.chat.completions.create(**request)
        choices = getattr(response, "choices", None)
        if not choices or getattr(choices[0], "message", None) is None:
            raise self._bad_answer("no choices[0].message")
        choice = choices[0]
        usage = response.usage
        return Completion(
            text=choice.message.content or "",
            input_tokens=(usage.prompt_tokens or 0) if usage else 0,
            output_tokens=(usage.completion_tokens or 0) if usage else 0,
            model=response.model or self.model,
            finish_reason=choice.finish_reason,
            refusal=getattr(choice.message, "refusal", None),
        )


def _refuses_json_schema(exc: Any) -> bool:
    """A 400 that is about the structured-output mode, not about the request's content."""
    text = str(exc).lower()
    return "json_schema" in text or "response_format" in text
