"""A connection's resource subscriptions: upstream hears subscribe on the first follower and
unsubscribe when the last one leaves (or its session goes away)."""
from actors.upstream.subscriptions import SUBSCRIBE, UNSUBSCRIBE, UpstreamSubscriptions


def test_upstream_sees_only_the_first_subscribe_and_the_last_unsubscribe():
    sent, answers = [], []

    def send(method, params, on_reply):
        sent.append((method, params["uri"]))
        on_reply({})
    subs = UpstreamSubscriptions(send)
    a, b = object(), object()
    subs.request(SUBSCRIBE, {"uri": "x://1"}, a, answers.append)
    subs.request(SUBSCRIBE, {"uri": "x://1"}, b, answers.append)
    assert sent == [(SUBSCRIBE, "x://1")] and answers == [{}, {}]
    subs.request(UNSUBSCRIBE, {"uri": "x://1"}, a, answers.append)
    assert sent == [(SUBSCRIBE, "x://1")]  # b still follows it
    subs.drop(b)  # b's session went away
    assert sent == [(SUBSCRIBE, "x://1"), (UNSUBSCRIBE, "x://1")]


def test_a_refused_subscribe_leaves_no_follower():
    sent = []

    def send(method, params, on_reply):
        sent.append(method)
        on_reply(ValueError("refused") if method == SUBSCRIBE else {})
    subs = UpstreamSubscriptions(send)
    origin, answers = object(), []
    subs.request(SUBSCRIBE, {"uri": "x://2"}, origin, answers.append)
    subs.drop(origin)
    assert sent == [SUBSCRIBE] and isinstance(answers[0], ValueError)
