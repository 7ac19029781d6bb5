"""MCP: the seven tools, their dispatcher, and the SDK server that serves them."""
