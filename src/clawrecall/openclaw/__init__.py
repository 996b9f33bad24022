"""OpenClaw integration, Python side: importing an agent's Markdown memory, and writing the plugin's
entries into `openclaw.json` (`clawrecall openclaw install`). The plugin itself is
`integrations/openclaw/` (JavaScript); it calls the server, which calls `import_markdown`.
"""

from .markdown import MarkdownFile, import_markdown
from .sections import sections

__all__ = ["MarkdownFile", "import_markdown", "sections"]
