"""The near-miss rule's distance, against the textbook table it shortcuts."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from flowcore.flow.labels import LONG_WORD, SHORT_WORD, _within


def aligned(a: str, b: str) -> int:
    """The optimal string alignment distance, every cell of the table computed."""
    table = [
        [i + j if i == 0 or j == 0 else 0 for j in range(len(b) + 1)] for i in range(len(a) + 1)
    ]
    for i in range(1, len(a) + 1):
        for j in range(1, len(b) + 1):
            cost = 0 if a[i - 1] == b[j - 1] else 1
            best = min(table[i - 1][j] + 1, table[i][j - 1] + 1, table[i - 1][j - 1] + cost)
            if i > 1 and j > 1 and a[i - 1] == b[j - 2] and a[i - 2] == b[j - 1]:
                best = min(best, table[i - 2][j - 2] + 1)
            table[i][j] = best
    return table[len(a)][len(b)]


# Few letters, so that words share starts, ends and swapped neighbours.
words = st.text(alphabet="abcde", max_size=11)


@settings(max_examples=2000, deadline=None)
@given(words, words)
def test_the_slips_between_two_words_are_their_alignment_distance_within_the_bound(
    a: str, b: str
) -> None:
    bound = 2 if len(b) >= LONG_WORD else 1 if len(b) >= SHORT_WORD else 0
    distance = aligned(a, b)
    assert _within(a, b) == (distance if distance <= bound else None)


@settings(max_examples=500, deadline=None)
@given(words, st.data())
def test_a_word_with_a_slip_or_two_made_in_it_is_found_within_the_bound(
    word: str, data: st.DataObject
) -> None:
    """Words a slip apart are rare among random pairs: make them from one another."""
    changed = list(word)
    for _ in range(data.draw(st.integers(0, 2))):
        at = data.draw(st.integers(0, len(changed)))
        kind = data.draw(st.sampled_from(["insert", "delete", "replace", "swap"]))
        if kind == "insert":
            changed.insert(at, data.draw(st.sampled_from("abcde")))
        elif at < len(changed) and kind == "delete":
            del changed[at]
        elif at < len(changed) and kind == "replace":
            changed[at] = data.draw(st.sampled_from("abcde"))
        elif at + 1 < len(changed):
            changed[at], changed[at + 1] = changed[at + 1], changed[at]
    a = "".join(changed)
    bound = 2 if len(word) >= LONG_WORD else 1 if len(word) >= SHORT_WORD else 0
    distance = aligned(a, word)
    assert _within(a, word) == (distance if distance <= bound else None)
