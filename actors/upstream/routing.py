"""Where an upstream's request to a client (sampling, elicitation, roots) goes by default: to the
origin of the call that triggered it, or nowhere (the Supervisor hands this router to each
Connection; a client's own upstream wraps it in OwnedRoute)."""
from __future__ import annotations

from actors.messages import UpstreamError
from actors.protocol import jsonrpc
from actors.tells import tell


def route_server_request(request, origin):
    """Hand an upstream's request to whoever made the call that triggered it (`origin`: a
    session's ref, or a relayed call at its owner); a request no client's call triggered is
    refused with an error."""
    if not hasattr(origin, "tell"):  # troupe's own request (or a listen's), not a client's call
        request.on_reply(UpstreamError(jsonrpc.INVALID_REQUEST, f"troupe refuses {request.method}: it was not "
                                       f"sent while a client's request to this server was in progress"))
        return None
    if not tell(origin, request):
        request.on_reply(UpstreamError(jsonrpc.INVALID_REQUEST, f"troupe refuses {request.method}: the client "
                                       f"whose call triggered it has gone"))
        return None
    return origin
