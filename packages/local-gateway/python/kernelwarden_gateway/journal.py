"""A kernel's journal: every iopub message the kernel sends, numbered, kept within bounds, readable again.

Each message gets a number (generation, seq): the generation counts the kernel's processes (it changes when the
kernel restarts, seen as a new `header.session` on its iopub), seq counts messages within the generation from 1.
Retention is bounded by bytes and by age; what falls out is remembered as a range, so a reader asking for messages
that are gone is told exactly which numbers were lost, never nothing.

A message is kept as the kernel's own frames (header, parent header, metadata, content, buffers), untouched: nothing
is decoded beyond the few header fields the journal indexes, and nothing is encoded again until a reader asks.
"""

import base64
import time
from collections import OrderedDict, deque

DEFAULT_MAX_BYTES = 32 * 1024 * 1024
DEFAULT_MAX_AGE_S = 600.0
# How many message ids (and cells) of evicted messages are still mapped to their numbers.
REMEMBERED_IDS = 65536
# What one kept message costs beside its frames (the entry, its index slots), counted against the byte bound.
ENTRY_OVERHEAD = 256


class Entry:
    __slots__ = ("at", "frames", "generation", "msg_id", "msg_type", "parent_id", "seq", "size")

    def __init__(self, generation, seq, at, size, msg_id, parent_id, msg_type, frames):
        self.generation = generation
        self.seq = seq
        self.at = at
        self.size = size
        self.msg_id = msg_id
        self.parent_id = parent_id
        self.msg_type = msg_type
        self.frames = frames

    @property
    def number(self):
        return (self.generation, self.seq)

    def json(self):
        """The entry as JSON bytes: {"n": [generation, seq], "msg": {header, parent_header, metadata, content,
        buffers (base64), channel}}, made of the kernel's own JSON frames."""
        header, parent, metadata, content = self.frames[:4]
        buffers = b",".join(b'"%s"' % base64.b64encode(bytes(b)) for b in self.frames[4:])
        return (
            b'{"n":[%d,%d],"msg":{"header":%s,"parent_header":%s,"metadata":%s,"content":%s,"buffers":[%s],'
            % (
                self.generation,
                self.seq,
                header,
                parent,
                metadata,
                content,
                buffers,
            )
            + b'"channel":"iopub"}}'
        )


class _Bounded(OrderedDict):
    def __init__(self, limit):
        super().__init__()
        self.limit = limit

    def remember(self, key, value):
        self[key] = value
        if len(self) > self.limit:
            self.popitem(last=False)


class Journal:
    """The numbered, bounded record of one kernel's iopub."""

    def __init__(self, max_bytes=DEFAULT_MAX_BYTES, max_age_s=DEFAULT_MAX_AGE_S, clock=time.monotonic):
        self.max_bytes = max(0, int(max_bytes))
        self.max_age_s = float(max_age_s)
        self.clock = clock
        self.generation = 0
        self.seq = 0
        self.session = None
        self.entries = deque()
        self.bytes = 0
        # The last number of every generation (a reader behind a restart learns where its generation ended).
        self.generation_ends = {0: 0}
        # The last number that fell out of retention, or None.
        self.evicted_through = None
        self._ids = _Bounded(REMEMBERED_IDS)
        self._cells = _Bounded(REMEMBERED_IDS)
        self._done = _Bounded(REMEMBERED_IDS)

    @property
    def last(self):
        return (self.generation, self.seq)

    def append(self, msg_id, msg_type, parent_id, session, frames, idle=False):
        """Records one message: its header's `msg_id`, `msg_type` and `session`, its parent's `msg_id`, and its frames
        (header, parent header, metadata, content, buffers; bytes). `idle` says it is a `status: idle`. Returns its
        number."""
        if session is not None and session != self.session:
            if self.session is not None or self.generation == 0:
                if self.generation:
                    self.generation_ends[self.generation] = self.seq
                self.generation += 1
                self.seq = 0
            self.session = session
        elif self.generation == 0:
            self.generation = 1
        self.seq += 1
        size = ENTRY_OVERHEAD
        for frame in frames:
            size += len(frame)
        now = self.clock()
        entry = Entry(self.generation, self.seq, now, size, msg_id, parent_id, msg_type, frames)
        self.entries.append(entry)
        self.bytes += size
        number = (self.generation, self.seq)
        if msg_id:
            self._ids.remember(msg_id, number)
        if parent_id:
            if parent_id not in self._cells:
                self._cells.remember(parent_id, number)
            if idle:
                self._done.remember(parent_id, number)
        self.trim(now)
        return number

    def trim(self, now=None):
        """Drops the oldest messages past the byte bound or the age bound (the newest is always kept)."""
        if now is None:
            now = self.clock()
        entries = self.entries
        while len(entries) > 1 and (self.bytes > self.max_bytes or now - entries[0].at > self.max_age_s):
            gone = entries.popleft()
            self.bytes -= gone.size
            self.evicted_through = gone.number

    def number_of(self, msg_id):
        """The number of the message with this id, if it is remembered."""
        return self._ids.get(msg_id)

    def _lost(self, after):
        """The range of numbers after `after` that fell out of retention, as ((g, s), (g, s)), or None."""
        if self.evicted_through is None or self.evicted_through <= after:
            return None
        first = self._next_number(after)
        return (first, self.evicted_through)

    def _next_number(self, number):
        generation, seq = number
        end = self.generation_ends.get(generation)
        if end is not None and seq >= end:
            return (generation + 1, 1)
        return (generation, seq + 1)

    def after(self, number):
        """What a reader that saw everything up to `number` is missing: (entries, lost range or None)."""
        self.trim()
        number = tuple(number)
        entries = self.entries
        # The entries are in number order: skip the ones already seen from the end that is closer.
        if not entries or entries[-1].number <= number:
            return [], self._lost(number)
        start = 0
        if entries[0].number <= number:
            low, high = 0, len(entries)
            while low < high:
                middle = (low + high) // 2
                if entries[middle].number <= number:
                    low = middle + 1
                else:
                    high = middle
            start = low
        return [entries[i] for i in range(start, len(entries))], self._lost(number)

    def cell(self, parent_id):
        """Every kept message of the cell whose request had this id: (entries, lost range or None, complete)."""
        self.trim()
        entries = [e for e in self.entries if e.parent_id == parent_id]
        first = self._cells.get(parent_id)
        lost = None
        if first is not None and self.evicted_through is not None and self.evicted_through >= first:
            lost = (first, self.evicted_through)
        return entries, lost, parent_id in self._done

    def known_cell(self, parent_id):
        return parent_id in self._cells

    def held(self):
        """What the journal holds now: {"entries": count, "bytes": counted bytes}."""
        return {"entries": len(self.entries), "bytes": self.bytes}
