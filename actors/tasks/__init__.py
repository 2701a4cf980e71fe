"""Tasks (SEP-2663, `io.modelcontextprotocol/tasks`, and the 2025-11-25 revision's `tasks` utility):
a long tools/call answered with a handle the client polls.

troupe hands its clients task ids of its own (sealed: they name the server, the upstream's task id
and the owner, ids.py), for tasks its servers create (relayed) and for tasks it creates itself
around a call to a server that has none (minted). The TaskKeeper actor (keeper.py) owns every
task record; a Session's TaskRequests (session_side.py) is how a client reaches them; wire.py
holds the two eras' shapes and the conversions between them.
"""
