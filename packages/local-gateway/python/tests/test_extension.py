import json

import pytest

from kernelwarden_gateway import extension
from kernelwarden_gateway.journal import Journal


def fill(journal, count):
    for i in range(count):
        header = json.dumps({"msg_id": "m%d" % i, "msg_type": "stream"}).encode()
        frames = (header, b"{}", b"{}", json.dumps({"text": "x" * 50}).encode(), b"\x00\x01")
        journal.append("m%d" % i, "stream", None, "s", frames)


def test_a_page_is_valid_json_holding_the_numbers_and_the_kernels_own_message_text():
    journal = Journal()
    fill(journal, 3)
    texts, more = extension.page(journal.after((0, 0))[0], 1 << 20)
    assert not more
    entries = json.loads(b"[" + b",".join(texts) + b"]")
    assert [e["n"] for e in entries] == [[1, 1], [1, 2], [1, 3]]
    assert entries[2]["msg"]["header"]["msg_id"] == "m2"
    assert entries[2]["msg"]["buffers"] == ["AAE="]


def test_pages_stop_at_their_byte_bound_but_always_hold_one_entry():
    journal = Journal()
    fill(journal, 10)
    entries = journal.after((0, 0))[0]
    texts, more = extension.page(entries, 450)
    assert more
    assert 1 <= len(texts) < 10
    assert sum(len(t) + 1 for t in texts) <= 450 + 1
    texts, more = extension.page(entries, 1)
    assert (len(texts), more) == (1, True)


@pytest.mark.parametrize(("text", "number"), [("0.0", (0, 0)), ("2.15", (2, 15))])
def test_numbers_are_generation_dot_seq(text, number):
    assert extension._number(text) == number


@pytest.mark.parametrize("text", ["", "1", "a.b", "1.-2", "-1.0"])
def test_anything_else_is_not_a_number(text):
    with pytest.raises(ValueError):
        extension._number(text)
