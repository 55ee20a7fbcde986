"""iopub_welcome (JEP 65, protocol 5.5): iopub is an XPUB socket, and every new subscription gets a signed
iopub_welcome whose topic is the subscription's, with no parent and content {"subscription": topic}.

The first class is jupyter_kernel_test's IopubWelcomeTests check (its Debian version, 0.4.5, predates the
class), through jupyter_client; the rest use raw SUB sockets, as a client that subscribes to one topic
would.  ipykernel 6.17 (Debian 12's reference) has a PUB socket and sends no welcome: those tests are marked
ipykernel_falls_short.  ipykernel 7.2 has an XPUB socket but without XPUB_VERBOSE: a subscription to a topic
that another client has already subscribed to (the empty one: every client's) is never passed up to it, so only
the first client ever gets a welcome.
"""

import zmq
from jupyter_client.session import Session

from pyctest import (IS_PYC, TIMEOUT, assert_alive, execute, get_reply, ipykernel_falls_short,
                     ipykernel_falls_short_before)


def _url(info, channel):
    port = info["%s_port" % channel]
    if info["transport"] == "tcp":
        return "tcp://%s:%d" % (info["ip"], port)
    return "%s://%s-%d" % (info["transport"], info["ip"], port)


class Sub:
    """A SUB socket of our own on the kernel's iopub, subscribed to one topic."""

    def __init__(self, kernel, topic=b""):
        info = kernel.km.get_connection_info()
        key = info["key"]
        self.session = Session(key=key if isinstance(key, bytes) else key.encode(),
                               signature_scheme=info["signature_scheme"])
        self.ctx = zmq.Context()
        self.sock = self.ctx.socket(zmq.SUB)
        self.sock.linger = 0
        self.sock.connect(_url(info, "iopub"))
        self.sock.setsockopt(zmq.SUBSCRIBE, topic)

    def recv(self, timeout=TIMEOUT):
        """(topic frame, message) of the next message, or None after timeout seconds."""
        if not self.sock.poll(int(timeout * 1000)):
            return None
        frames = self.sock.recv_multipart()
        idents, parts = self.session.feed_identities(frames)
        return idents, self.session.deserialize(parts, content=True)  # checks the signature

    def close(self):
        self.sock.close(0)
        self.ctx.term()


@ipykernel_falls_short     # 7.2: no welcome, km's client has subscribed to "" already (no XPUB_VERBOSE)
def test_first_message_on_a_new_client_is_the_welcome(kernel):
    # IopubWelcomeTests.test_recv_iopub_welcome_msg: start a client's channels, the first iopub message.
    # A client of its own, with the zmq context it makes itself (stopping a client made by km.client() would
    # break the km's other client): zmq.asyncio under jupyter_client 7, plain zmq under 8, whose blocking
    # client gets futures instead of messages from an asyncio context.
    from jupyter_client import BlockingKernelClient

    kc = BlockingKernelClient()
    kc.load_connection_info(kernel.km.get_connection_info())
    kc.start_channels(hb=False)
    try:
        msg = kc.get_iopub_msg(timeout=TIMEOUT)
        assert msg["header"]["msg_type"] == "iopub_welcome"
        assert msg["msg_type"] == "iopub_welcome"
        assert msg["content"]["subscription"] == ""
    finally:
        kc.stop_channels()
        if not kc.context.closed:       # jupyter_client 8 ends the context it made; 7 leaves it
            kc.context.term()


@ipykernel_falls_short_before((7, 2))
def test_welcome_carries_the_topic_and_no_parent(kernel):
    sub = Sub(kernel, b"status")
    try:
        got = sub.recv()
        assert got is not None, "no iopub_welcome within %ss" % TIMEOUT
        idents, msg = got
        assert idents == [b"status"]
        assert msg["msg_type"] == "iopub_welcome"
        assert msg["content"] == {"subscription": "status"}
        assert msg["parent_header"] == {}
        if not IS_PYC:
            return      # ipykernel's topics are its own ("kernel.<id>.status", "stream.stdout")
        # the subscription works: a request's status messages follow, and only those (the topic filters)
        execute(kernel.kc, "print('hidden from a status-only subscriber')")
        seen = set()
        while True:
            got = sub.recv(timeout=0.5)
            if got is None:
                break
            seen.add(got[1]["msg_type"])
        assert seen == {"status"}
    finally:
        sub.close()


@ipykernel_falls_short     # 7.2: a welcome for the first subscriber of "" only (no XPUB_VERBOSE)
def test_every_subscriber_gets_its_own_welcome(kernel):
    # XPUB_VERBOSE: a second subscription to the same topic is passed up too
    subs = [Sub(kernel) for _ in range(3)]
    try:
        for sub in subs:
            got = sub.recv()
            assert got is not None and got[1]["msg_type"] == "iopub_welcome"
            assert got[1]["content"]["subscription"] == ""
    finally:
        for sub in subs:
            sub.close()
    assert_alive(kernel.kc)


@ipykernel_falls_short_before((7, 2))
def test_welcome_while_a_cell_runs(kernel):
    # The control thread answers subscriptions: a busy main thread does not delay the welcome.  (A topic of its
    # own: another client's subscription to the same topic is test_every_subscriber_gets_its_own_welcome's.)
    msg_id = kernel.kc.execute("import time; time.sleep(3)")
    sub = Sub(kernel, b"while-busy")
    try:
        got = sub.recv(timeout=2.0)
        assert got is not None, "no welcome while the main thread sleeps"
        assert got[1]["msg_type"] == "iopub_welcome"
    finally:
        sub.close()
    assert get_reply(kernel.kc, msg_id)["content"]["status"] == "ok"


def test_unsubscribe_and_bad_topics_leave_the_kernel_serving(kernel):
    # An unsubscription, and a topic that is not UTF-8 (no welcome for it: it cannot be JSON), are dropped.
    sub = Sub(kernel, b"\xff\xfe")
    try:
        sub.sock.setsockopt(zmq.UNSUBSCRIBE, b"\xff\xfe")
        sub.sock.setsockopt(zmq.SUBSCRIBE, b"stream")
        sub.sock.setsockopt(zmq.UNSUBSCRIBE, b"stream")
    finally:
        sub.close()
    assert_alive(kernel.kc)
