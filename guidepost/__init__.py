"""guidepost: fixed procedures for LLM agents over MCP."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("guidepost-mcp")
except PackageNotFoundError:  # running from a checkout that was never installed
    __version__ = "0+unknown"
