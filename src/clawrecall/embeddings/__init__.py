"""Embedding providers behind one interface (`Embedder.embed(texts, kind)`)."""

from __future__ import annotations

from importlib import import_module

from ..config import EmbeddingConfig
from ..errors import ConfigError
from .base import Embedder, Kind, known_dimensions

# provider name -> (module, class); modules are imported only when used, so commands that
# never embed never import an HTTP client or the ML stack.
_PROVIDERS: dict[str, tuple[str, str]] = {
    "local": (".local", "LocalEmbedder"),
    "openai": (".openai", "OpenAIEmbedder"),
    "openai-compatible": (".openai", "OpenAICompatibleEmbedder"),
    "ollama": (".ollama", "OllamaEmbedder"),
    "voyage": (".voyage", "VoyageEmbedder"),
    "gemini": (".gemini", "GeminiEmbedder"),
    "zai": (".zai", "ZAIEmbedder"),
    "e5": (".e5", "E5Embedder"),
    "command": (".command", "CommandEmbedder"),
    "hash": (".hashing", "HashEmbedder"),  # for tests only: spelling, not meaning
}


def configured_model(cfg: EmbeddingConfig) -> str:
    """The model name a config resolves to, without constructing the provider."""
    return provider_class(cfg.provider).default_model_for(cfg)


def provider_class(name: str) -> type[Embedder]:
    try:
        module_name, class_name = _PROVIDERS[name]
    except KeyError:
        raise ConfigError(f"Unknown embedding provider: {name}") from None
    return getattr(import_module(module_name, __name__), class_name)


def create_embedder(cfg: EmbeddingConfig) -> Embedder:
    """Build the configured provider. Loading a model or connecting happens on first use."""
    return provider_class(cfg.provider).from_config(cfg)


__all__ = ["Embedder", "Kind", "configured_model", "create_embedder", "known_dimensions"]
