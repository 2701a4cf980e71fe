"""What one legacy-era POST /mcp waits for: the messages of its call until its answer, a cancel of
the call (no answer is owed: the POST ends at once) or its client hanging up (the call is
cancelled as if the client had said so), so neither a connection nor upstream work is held for a
call nobody awaits."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Iterator

from actors.protocol import jsonrpc
from actors.serve import sse_framing as sse
from actors.serve.listener import watch_hangup
from actors.serve.stream_buffer import EMPTY, StreamBuffer, droppable, shut_down_later

if TYPE_CHECKING:
    from actors.serve.sessions import HttpSession

REPLY_TIMEOUT = 900.0  # a safety net only: every forwarded call already has its server's timeout


def _answers(message, rid) -> bool:
    return type(message) is dict and "method" not in message and message.get("id") == rid


ENDED = object()  # a POST's wait: its call was cancelled, or its client hung up; no answer goes out
_HUNG_UP = object()
QUICK_S = 0.05  # a POST answered sooner is never watched for a hang-up (a greenlet each)


class PostSink:
    """The sink of one legacy-era POST: the Session's messages for it go on its reply buffer, and a
    cancel of its call (`withdrawn`) ends it at once, with no answer, instead of at REPLY_TIMEOUT.

    Answers go on as they are (one per request, never dropped); what travels ahead of them
    (progress, logs, server→client requests) is encoded here and counted against
    serve.stream_buffer_bytes when the reply is an SSE stream (`stream`), and dropped here
    otherwise: a JSON reply has no room for it."""

    __slots__ = ("replies", "stream")

    def __init__(self, replies: StreamBuffer, stream: bool = False) -> None:
        self.replies, self.stream = replies, stream

    def __call__(self, message) -> None:
        if type(message) is dict and "method" in message:
            if self.stream:
                self.replies.offer(sse.event(message, name="message"), droppable(message))
            return
        self.replies.put(message)

    def withdrawn(self, rid) -> None:
        self.replies.put(ENDED)


class PostWait:
    """What one legacy-era POST waits for: the messages of its call, until its answer, a cancel,
    or its client hanging up (watched for once the call has taken longer than QUICK_S: then the
    call is cancelled in the Session, so neither a connection nor upstream work is held for it)."""

    def __init__(self, environ, hs: HttpSession, replies: StreamBuffer, rid, stream: bool = False) -> None:
        self.environ, self.hs, self.replies, self.rid = environ, hs, replies, rid
        self.sink = PostSink(replies, stream)
        self._watcher = None
        self._waited = False
        self._closer = None  # the socket's delayed shut-down, once its stream fell behind
        replies.on_overflow = self._overflowed

    def _overflowed(self) -> None:
        """A message that cannot be dropped did not fit: the call is cancelled as on a hang-up, and
        the socket shut down after a grace (a write may be blocked on a client that reads nothing)."""
        self.replies.put(_HUNG_UP)
        self._closer = shut_down_later(self.environ)

    def next(self) -> Any:
        """The next message, or ENDED (cancelled, hung up); an error answer after REPLY_TIMEOUT."""
        item = self.replies.get(timeout=QUICK_S if not self._waited else REPLY_TIMEOUT)
        if item is EMPTY:
            if self._waited:
                return jsonrpc.error(self.rid, jsonrpc.INTERNAL_ERROR, "troupe: no answer in time")
            self._waited = True
            self._watcher = watch_hangup(self.environ, lambda: self.replies.put(_HUNG_UP))
            return self.next()
        if item is _HUNG_UP:  # the client left: its call is cancelled, as if it had said so
            self.hs.send(jsonrpc.notification("notifications/cancelled", {
                "requestId": self.rid, "reason": "the client hung up"}), _ignore)
            return ENDED
        return item

    def done(self, release) -> None:
        if self._watcher is not None:
            self._watcher.kill(block=False)
            self._watcher = None
        if self._closer is not None:
            self._closer.kill(block=False)
            self._closer = None
        self.replies.close()  # what still waits goes now
        release()


def _ignore(message) -> None:
    pass


def until_answer(first: Any, wait: PostWait, done) -> Iterator[bytes]:
    message = first
    try:
        while True:
            if type(message) is bytes:  # encoded by the sink, ahead of the answer
                yield message
            elif message is not None:
                yield sse.event(message, name="message")
                if _answers(message, wait.rid):
                    return
            message = wait.next()
            if message is ENDED:
                return  # cancelled: the stream closes without an answer
    finally:
        wait.done(done)


