"""A batch's answers go out as one array once every entry still owed one is answered: a
cancelled entry is owed nothing, so cancelling one never holds back the others' answers."""
from actors.downstream.batches import serve_batch


class _Sink(list):
    """A front's sink that can hear that no answer will come (as a legacy-era POST's does)."""

    def __init__(self) -> None:
        super().__init__()
        self.ended = 0

    def __call__(self, message) -> None:
        self.append(message)

    def withdrawn(self, rid) -> None:
        self.ended += 1


def _batch(*ids):
    return [{"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": {}} for rid in ids]


def test_a_cancelled_entry_lets_the_array_go_out_without_it():
    out, held = _Sink(), {}
    serve_batch(_batch(1, 2, 3), out, lambda m, s: held.setdefault(m["id"], s))
    held[1]({"jsonrpc": "2.0", "id": 1, "result": {}})
    held[2].withdrawn(2)  # the client cancelled entry 2
    assert out == []  # entry 3 is still owed
    held[3]({"jsonrpc": "2.0", "id": 3, "result": {}})
    assert out == [[{"jsonrpc": "2.0", "id": 1, "result": {}}, {"jsonrpc": "2.0", "id": 3, "result": {}}]]
    held[3]({"jsonrpc": "2.0", "id": 3, "result": {}})  # nothing twice
    assert len(out) == 1 and out.ended == 0


def test_a_batch_whose_every_entry_was_cancelled_ends_with_no_answer():
    out, held = _Sink(), {}
    serve_batch(_batch("a", "b"), out, lambda m, s: held.setdefault(m["id"], s))
    held["a"].withdrawn("a")
    held["b"].withdrawn("b")
    assert out == [] and out.ended == 1
