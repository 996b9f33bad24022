"""The network doors: REST, MCP (streamable HTTP and stdio), hook endpoints and E5-compatible embeddings."""

from .app import create_app, serve

__all__ = ["create_app", "serve"]
