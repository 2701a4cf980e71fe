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


def unread_tells(actor: pykka.Actor) -> list:
    """In a stopping actor's on_stop (or on_failure): take the tells still in its mailbox, which
    pykka would drop unread. A tell told after the stop, or queued behind it, lands there, and
    one that carries a reply callback (a Forward) is owed its answer. Asks are left in place:
    pykka's teardown answers each with ActorDeadError."""
    inbox, taken, asks = actor.actor_inbox, [], []
    while not inbox.empty():
        envelope = inbox.get()
        (asks if envelope.reply_to is not None else taken).append(envelope)
    for envelope in asks:
        inbox.put(envelope)
    return [envelope.message for envelope in taken]
