"""coretools: Gemini CLI's core tool set as an MCP server, and a Gemini <-> MCP client bridge."""

__version__ = "0.1.0"
