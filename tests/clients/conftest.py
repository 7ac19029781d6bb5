# The probes run in environments of their own (other client libraries, another mcp):
# never imported here, not even to look for doctests.
collect_ignore = ["probes", "ts"]
