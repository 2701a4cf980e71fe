"""Trust: which servers may run (provenance, approvals) and which tool definitions clients see (pins).

troupe starts a server only if its owner configured or approved it; approval is an
operator act, never something a client of the MCP endpoint can do; and it covers the
exact launch line and the tool definitions seen when it was given.
"""
