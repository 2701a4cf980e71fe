"""The guarded tell: a message to an actor that may have stopped is an outcome, never a crash."""
from __future__ import annotations

import pykka


def tell(ref, message) -> bool:
    """Tell `ref`; False when it has stopped (pykka's ActorDeadError would stop the teller)."""
    try:
        ref.tell(message)
        return True
    except pykka.ActorDeadError:
        return False


def fail(reply: pykka.ThreadingFuture, exc: Exception) -> None:
    """Answer an ask with an error: pykka futures take exc_info, and a bare exception would kill
    the actor that sets it."""
    reply.set_exception((type(exc), exc, None))
