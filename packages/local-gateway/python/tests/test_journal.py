from kernelwarden_gateway.journal import Journal


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


def message(i, parent="cell", msg_type="stream", **content):
    return {
        "header": {"msg_id": "m%d" % i, "msg_type": msg_type},
        "parent_header": {"msg_id": parent} if parent else {},
        "content": content or {"name": "stdout", "text": "%d\n" % i},
    }


def texts(entries):
    return [e.message["content"].get("text") for e in entries]


def test_numbers_messages_within_a_generation_from_one():
    journal = Journal()
    assert [journal.append(message(i), 10, session="s1") for i in range(3)] == [(1, 1), (1, 2), (1, 3)]
    assert journal.last == (1, 3)


def test_a_new_kernel_session_starts_a_new_generation():
    journal = Journal()
    journal.append(message(0), 10, session="s1")
    journal.append(message(1), 10, session="s1")
    assert journal.append(message(2), 10, session="s2") == (2, 1)
    entries, lost = journal.after((1, 2))
    assert [e.number for e in entries] == [(2, 1)]
    assert lost is None


def test_after_gives_everything_past_the_number_in_order():
    journal = Journal()
    for i in range(1000):
        journal.append(message(i), 10, session="s")
    entries, lost = journal.after((1, 400))
    assert texts(entries) == ["%d\n" % i for i in range(400, 1000)]
    assert lost is None
    assert journal.after((1, 1000)) == ([], None)


def test_the_byte_bound_drops_the_oldest_and_says_which_numbers_are_lost():
    journal = Journal(max_bytes=100)
    for i in range(30):
        journal.append(message(i), 10, session="s")
    assert journal.bytes <= 100
    entries, lost = journal.after((1, 5))
    assert [e.number for e in entries] == [(1, s) for s in range(21, 31)]
    assert lost == ((1, 6), (1, 20))
    assert journal.after((1, 25))[1] is None


def test_the_age_bound_drops_old_messages_and_says_so():
    clock = Clock()
    journal = Journal(max_age_s=60, clock=clock)
    journal.append(message(0), 10, session="s")
    clock.now = 30
    journal.append(message(1), 10, session="s")
    clock.now = 61
    entries, lost = journal.after((0, 0))
    assert [e.number for e in entries] == [(1, 2)]
    assert lost == ((1, 1), (1, 1))


def test_a_loss_across_a_restart_starts_in_the_next_generation_when_the_reader_saw_its_end():
    journal = Journal(max_bytes=20)
    journal.append(message(0), 10, session="a")
    journal.append(message(1), 10, session="a")
    for i in range(2, 6):
        journal.append(message(i), 10, session="b")
    entries, lost = journal.after((1, 2))
    assert [e.number for e in entries] == [(2, 3), (2, 4)]
    assert lost == ((2, 1), (2, 2))


def test_a_cell_is_collected_by_its_request_id_and_known_complete_at_its_idle():
    journal = Journal()
    journal.append(message(0, parent="a", msg_type="status", execution_state="busy"), 10, session="s")
    journal.append(message(1, parent="a"), 10, session="s")
    journal.append(message(2, parent="b"), 10, session="s")
    entries, lost, complete = journal.cell("a")
    assert [e.msg_id for e in entries] == ["m0", "m1"]
    assert (lost, complete) == (None, False)
    journal.append(message(3, parent="a", msg_type="status", execution_state="idle"), 10, session="s")
    assert journal.cell("a")[2] is True
    assert journal.known_cell("a") and not journal.known_cell("zzz")


def test_a_cell_whose_first_messages_fell_out_says_so():
    journal = Journal(max_bytes=30)
    for i in range(6):
        journal.append(message(i, parent="a"), 10, session="s")
    entries, lost, _ = journal.cell("a")
    assert [e.msg_id for e in entries] == ["m3", "m4", "m5"]
    assert lost == ((1, 1), (1, 3))


def test_message_ids_map_to_numbers_after_they_fell_out():
    journal = Journal(max_bytes=10)
    journal.append(message(0), 10, session="s")
    journal.append(message(1), 10, session="s")
    assert journal.number_of("m0") == (1, 1)
    assert journal.number_of("nope") is None
