"""LLM clients for background work (fact extraction, summaries): OpenAI-compatible servers and
Anthropic, each through its official SDK (an optional extra, imported only when a client is made).

`create_llm(config.llm)` gives the configured client, or None when no LLM is configured (the default).
"""

from __future__ import annotations

import os

from ..config import LLMConfig
from ..errors import ConfigError
from .base import LLM, Completion

__all__ = ["LLM", "Completion", "create_llm"]


def create_llm(config: LLMConfig) -> LLM | None:
    """The client `config` describes; None when `provider` is `none`. The key is `llm.api_key`, else
    the variable `llm.api_key_env` names (default OPENAI_API_KEY / ANTHROPIC_API_KEY); a provider's
    own API needs one, a server at another `base_url` (Ollama, vLLM…) may not."""
    if config.provider == "none":
        return None
    cls: type[LLM]
    if config.provider == "openai":
        from .openai import OpenAILLM

        cls = OpenAILLM
    else:
        from .anthropic import AnthropicLLM

        cls = AnthropicLLM
    key_env = config.api_key_env or cls.default_key_env
    api_key = config.api_key or os.environ.get(key_env) or None
    if api_key is None and config.base_url is None:
        raise ConfigError(f"llm provider {config.provider!r} needs an API key: set {key_env} or llm.api_key")
    try:
        return cls(config, api_key)
    except ImportError as exc:  # the SDK, imported when the first client is made
        if (exc.name or "").split(".")[0] != config.provider:
            raise
        raise ConfigError(f"llm provider {config.provider!r} needs its SDK: pip install 'clawrecall[{config.provider}]' "
                          f"(from a checkout: ./scripts/install.sh --{config.provider})") from None
