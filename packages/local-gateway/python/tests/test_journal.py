import json

from kernelwarden_gateway.journal import ENTRY_OVERHEAD, Journal

FRAMES = 200
UNIT = ENTRY_OVERHEAD + FRAMES


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


def message(i, parent="cell", msg_type="stream", **content):
    header = {"msg_id": "m%d" % i, "msg_type": msg_type}
    body = content or {"name": "stdout", "text": "%d\n" % i}
    parts = [json.dumps(part).encode() for part in (header, {"msg_id": parent} if parent else {}, {}, body)]
    # Every message's frames are FRAMES bytes long: an entry counts UNIT against the byte bound.
    others = len(parts[0]) + len(parts[1]) + len(parts[3])
    parts[2] = json.dumps({"pad": "x" * (FRAMES - 11 - others)}).encode()
    frames = tuple(parts)
    assert sum(len(f) for f in frames) == FRAMES
    return {
        "msg_id": header["msg_id"],
        "msg_type": msg_type,
        "parent_id": parent,
        "frames": frames,
        "idle": content.get("execution_state") == "idle",
    }


def add(journal, msg, session="s"):
    return journal.append(msg["msg_id"], msg["msg_type"], msg["parent_id"], session, msg["frames"], msg["idle"])


def texts(entries):
    return [json.loads(e.frames[3]).get("text") for e in entries]


def test_numbers_messages_within_a_generation_from_one():
    journal = Journal()
    assert [add(journal, message(i), "s1") for i in range(3)] == [(1, 1), (1, 2), (1, 3)]
    assert journal.last == (1, 3)


def test_a_new_kernel_session_starts_a_new_generation():
    journal = Journal()
    add(journal, message(0), "s1")
    add(journal, message(1), "s1")
    assert add(journal, message(2), "s2") == (2, 1)
    entries, lost = journal.after((1, 2))
    assert [e.number for e in entries] == [(2, 1)]
    assert lost is None


def test_after_gives_everything_past_the_number_in_order():
    journal = Journal()
    for i in range(1000):
        add(journal, message(i), "s")
    entries, lost = journal.after((1, 400))
    assert texts(entries) == ["%d\n" % i for i in range(400, 1000)]
    assert lost is None
    assert journal.after((1, 1000)) == ([], None)


def test_the_byte_bound_drops_the_oldest_and_says_which_numbers_are_lost():
    journal = Journal(max_bytes=10 * UNIT)
    for i in range(30):
        add(journal, message(i), "s")
    assert journal.bytes <= 10 * UNIT
    entries, lost = journal.after((1, 5))
    assert [e.number for e in entries] == [(1, s) for s in range(21, 31)]
    assert lost == ((1, 6), (1, 20))
    assert journal.after((1, 25))[1] is None


def test_the_age_bound_drops_old_messages_and_says_so():
    clock = Clock()
    journal = Journal(max_age_s=60, clock=clock)
    add(journal, message(0), "s")
    clock.now = 30
    add(journal, message(1), "s")
    clock.now = 61
    entries, lost = journal.after((0, 0))
    assert [e.number for e in entries] == [(1, 2)]
    assert lost == ((1, 1), (1, 1))


def test_a_loss_across_a_restart_starts_in_the_next_generation_when_the_reader_saw_its_end():
    journal = Journal(max_bytes=2 * UNIT)
    add(journal, message(0), "a")
    add(journal, message(1), "a")
    for i in range(2, 6):
        add(journal, message(i), "b")
    entries, lost = journal.after((1, 2))
    assert [e.number for e in entries] == [(2, 3), (2, 4)]
    assert lost == ((2, 1), (2, 2))


def test_a_cell_is_collected_by_its_request_id_and_known_complete_at_its_idle():
    journal = Journal()
    add(journal, message(0, parent="a", msg_type="status", execution_state="busy"), "s")
    add(journal, message(1, parent="a"), "s")
    add(journal, message(2, parent="b"), "s")
    entries, lost, complete = journal.cell("a")
    assert [e.msg_id for e in entries] == ["m0", "m1"]
    assert (lost, complete) == (None, False)
    add(journal, message(3, parent="a", msg_type="status", execution_state="idle"), "s")
    assert journal.cell("a")[2] is True
    assert journal.known_cell("a") and not journal.known_cell("zzz")


def test_a_cell_whose_first_messages_fell_out_says_so():
    journal = Journal(max_bytes=3 * UNIT)
    for i in range(6):
        add(journal, message(i, parent="a"), "s")
    entries, lost, _ = journal.cell("a")
    assert [e.msg_id for e in entries] == ["m3", "m4", "m5"]
    assert lost == ((1, 1), (1, 3))


def test_message_ids_map_to_numbers_after_they_fell_out():
    journal = Journal(max_bytes=UNIT)
    add(journal, message(0), "s")
    add(journal, message(1), "s")
    assert journal.number_of("m0") == (1, 1)
    assert journal.number_of("nope") is None


def test_held_counts_what_is_kept_and_stays_within_the_byte_bound():
    journal = Journal(max_bytes=50 * UNIT)
    for i in range(500):
        add(journal, message(i), "s")
        assert journal.held()["bytes"] <= 50 * UNIT
    assert journal.held() == {"entries": 50, "bytes": 50 * UNIT}


def test_an_entry_is_the_kernels_own_frames_as_json():
    journal = Journal()
    add(journal, message(7, parent="p"), "s")
    (entry,) = journal.after((0, 0))[0]
    text = json.loads(entry.json())
    assert text["n"] == [1, 1]
    assert text["msg"]["header"] == {"msg_id": "m7", "msg_type": "stream"}
    assert text["msg"]["parent_header"] == {"msg_id": "p"}
    assert text["msg"]["content"] == {"name": "stdout", "text": "7\n"}
    assert (text["msg"]["buffers"], text["msg"]["channel"]) == ([], "iopub")


def test_after_a_number_in_the_middle_of_a_long_journal_starts_right_after_it():
    journal = Journal()
    for i in range(5000):
        add(journal, message(i), "a" if i < 2500 else "b")
    assert [e.number for e in journal.after((1, 2499))[0][:3]] == [(1, 2500), (2, 1), (2, 2)]
    assert [e.number for e in journal.after((2, 2499))[0]] == [(2, 2500)]
    assert len(journal.after((0, 0))[0]) == 5000
