from gevent import monkey
monkey.patch_all()
import sys, time
from actors.transports import stdio
from actors.upstream import connection
from actors.supervision import supervisor
from actors.downstream import forwarder
def stamp(what):
    sys.stderr.write(f"TRACE {time.time():.4f} {what}\n")
orig_send = stdio.StdioTransport.send
def send(self, message):
    stamp(f"send {message.get('method') or 'reply'} {message.get('id')}")
    return orig_send(self, message)
stdio.StdioTransport.send = send
orig_open = stdio.StdioTransport.open
def open_(self):
    stamp("popen"); r = orig_open(self); stamp("popen done"); return r
stdio.StdioTransport.open = open_
orig_in = connection.Connection._inbound
def inbound(self, msg):
    stamp(f"in {msg.get('id') if isinstance(msg, dict) else type(msg).__name__} {msg.get('method') if isinstance(msg, dict) else ''}")
    return orig_in(self, msg)
connection.Connection._inbound = inbound
orig_ready = supervisor.Supervisor._on_ready
def on_ready(self, msg):
    stamp("supervisor ready"); return orig_ready(self, msg)
supervisor.Supervisor._on_ready = on_ready
orig_wake = forwarder.Forwarder._wake
def wake(self, call, dead):
    stamp("session wake"); return orig_wake(self, call, dead)
forwarder.Forwarder._wake = wake
orig_back = forwarder.Forwarder.server_back
def back(self, token):
    stamp("session back"); return orig_back(self, token)
forwarder.Forwarder.server_back = back
from actors.main import main
main()
