"""How a step's result and a run's engine state are stored (ADR 0095): their
exact JSON text, deflated against a fixed dictionary of what every result repeats (the
keys, the statuses, the server's own `next` phrases), behind one byte that names how it
was packed.

Unpacking gives back the very text that was packed, byte for byte, so the chain hashes,
replay compares and a retry returns what they did before packing existed; nothing is
rendered again. The first byte says how to read the rest:

- ``{``: the JSON text itself, in UTF-8 (what was stored before packing, and any text
  that deflating would not make smaller);
- ``\\x01``: raw deflate against ``DICTIONARY_1``.

A dictionary, once used, never changes: a better one is a new scheme byte beside it, and
every stored scheme stays readable. Changing the wording of `next` costs a little
compression, nothing else.
"""

from __future__ import annotations

import zlib

JSON_TEXT = ord("{")
DEFLATE_1 = 1

# Keys and phrases every result repeats, the most frequent last (deflate reaches the end
# of a dictionary most cheaply). Frozen: tests pin its digest.
DICTIONARY_1 = (
    b'"handoff":{"reason":"","summary":"","values":{},"path":[]},"candidates":[],'
    b'"rejected":"","rejected_slots":{},"repeated":true,"moved":{"from":,"to":},'
    b'"error":"","retryable":false,"missing":[],"ignored":[],"conflicts":{},"index":{'
    b'"branches":[{"label":"","when":"","steps":[{"id":"","kind":"tell","say":""}]}],'
    b'"common":{"id":"","kind":"ask","say":""},"skipped":[],'
    b'"Nobody could settle . Give, in this order: 1) the `tell` items ; 2) the guidance of '
    b"every branch side by side (each `when` with its steps). Then: "
    b" | labels: yes = ; no = "
    b'"status":"stalled","next":"Hand the conversation to a human now: tell the person a '
    b"colleague will take over, The run is waiting for a human: hand the conversation over "
    b'with the handoff note. "status":"rejected","next":"Ask node.say again and send one '
    b"label of node.accepts Check with the person: send the label of candidates they meant, "
    b"or, if their Ask for those slots again and send Collect what node.say describes: ask "
    b'for the slots in node.slots and call guide_answer with values={slot: value}. "slots":'
    b'[{"name":"","say":"","pattern":""}],"kind":"collect",'
    b'"status":"completed","next":"First deliver each `tell` item in order. Close the '
    b'conversation as node.say says. The procedure is finished (outcome: resolved).",'
    b'"node":{"id":"done","kind":"end","say":"","outcome":"resolved"},"outcome":"resolved"}'
    b'{"run_id":"r_","flow":{"id":"","title":"","version":1},"status":"branched",'
    b'{"run_id":"r_","status":"advanced","next":"First deliver each `tell` item in order. '
    b"Ask what node.say asks, in your own words. Map the reply to one label of node.accepts "
    b'and call guide_answer with choice=<label> (choice=\\"__unknown__\\" if they do not '
    b'know).","tell":[{"id":"","say":""}],"node":{"id":"","kind":"ask","say":"","accepts":'
    b'{"yes":"","no":""}}}'
)

# Raw deflate (no header or checksum: the chain checks the content), an 8 KiB window and
# a small hash table: as small as the full window on results of a few KB, in a tenth of the
# time (setting up the full one's tables cost more than the deflating, ADR 0095).
_LEVEL, _WINDOW, _MEMORY = 6, -13, 5


def pack_json(text: str) -> bytes:
    """The stored form of the JSON ``text``: deflated when that is smaller."""
    raw = text.encode()
    compressor = zlib.compressobj(_LEVEL, zlib.DEFLATED, _WINDOW, _MEMORY, 0, DICTIONARY_1)
    packed = compressor.compress(raw) + compressor.flush()
    if len(packed) + 1 < len(raw):
        return bytes((DEFLATE_1,)) + packed
    return raw


def unpack_json(stored: bytes | memoryview) -> str:
    """The JSON text ``stored`` holds (``pack_json``'s, or a text stored before)."""
    data = bytes(stored)
    if not data or data[0] == JSON_TEXT:
        return data.decode()
    if data[0] == DEFLATE_1:
        restorer = zlib.decompressobj(-15, DICTIONARY_1)  # any window up to the largest
        return (restorer.decompress(data[1:]) + restorer.flush()).decode()
    raise ValueError(f"a stored text packed by an unknown scheme ({data[0]})")
