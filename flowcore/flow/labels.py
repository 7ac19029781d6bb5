"""How a value sent for an ask node matches its labels: exactly, else by normal form
(``"Wrong-Item"`` is ``wrong_item``), else not at all. A value that is a near miss of
labels (a slip such as ``E1`` for ``E01``, never another word) is unmatched with them as
candidates, and never goes down ``__other__``; nor does any value that is not shaped
like a label, or is a reserved word, a list of labels or a label's condition
(``outside_labels``). The full rule, with its examples, is spec §3.1.
"""

from __future__ import annotations

import functools
import re
import unicodedata
from collections.abc import Iterable

from flowcore.common.limits import MAX_CANDIDATES
from flowcore.flow.model import UNKNOWN, AskNode

# What a label may be (lint refuses any other): one short code, no prose.
LABEL_RE = re.compile(r"[A-Za-z0-9_.-]{1,64}")
# Words that say the person does not know, or that the answer is something else: never
# themselves an answer outside the labels, however spelled (compared forms). Those of
# the first group point to __unknown__.
DONT_KNOW_WORDS = frozenset(
    {"unknown", "dont know", "do not know", "not known", "not sure", "unsure", "idk", "no idea"}
)
OTHER_WORDS = frozenset(
    {"other", "others", "something else", "none", "none of these", "not listed"}
)
# A reserved word this long may hold a slip ("unknwon"); a shorter one ("none", "idk")
# must be exact, as one slip on it makes another word ("nine").
RESERVED_SLIP_FROM = 5
_LIST = re.compile(r"\s*(?:[,;/&+|]|\band\b|\bor\b)\s*", re.IGNORECASE)
_WORD = re.compile(r"[^\W_]+")

_SEPARATORS = re.compile(r"[\s_-]+")
_NUMBER = re.compile(r"\d+")
# A word this long (or longer) may hold one slip, and from LONG_WORD on two; a shorter
# word none (one character changed in "a" or "no" leaves nothing of it).
SHORT_WORD = 3
LONG_WORD = 8


def normal_form(text: str) -> str:
    """``text`` as the matching rule compares it.

    Separators at either end are trimmed like surrounding whitespace: ``"no_"`` and
    ``" no "`` are both ``no``.

    >>> normal_form("  Wrong-Item "), normal_form("wrong__item"), normal_form("ſIZE")
    ('wrong item', 'wrong item', 'size')
    >>> normal_form("00_"), normal_form("-00 ")
    ('00', '00')
    """
    return _SEPARATORS.sub(" ", text.casefold()).strip()


def label_of(node: AskNode, value: str) -> str | None:
    """The label ``value`` stands for at ``node``, or None.

    >>> node = AskNode(id="n", say="", accepts={"wrong_item": "", "E01": "", "e01": ""}, next={})
    >>> [label_of(node, v) for v in ("Wrong item", "E01", "E01 ", "wrong")]
    ['wrong_item', 'E01', None, None]
    """
    if value in node.accepts:
        return value
    form = normal_form(value)
    matches = [label for label in node.accepts if normal_form(label) == form]
    return matches[0] if len(matches) == 1 else None


def near_labels(node: AskNode, value: str) -> list[str]:
    """The labels of ``node`` that ``value`` is a near miss of, nearest first (author
    order among equals), at most MAX_CANDIDATES: the candidates of an unmatched answer.
    A value equal in normal form to several labels is a near miss of each.

    >>> node = AskNode(id="n", say="", accepts={"E01": "", "E02": "", "wrong_item": ""}, next={})
    >>> near_labels(node, "E1"), near_labels(node, "E07"), near_labels(node, "itme wrong")
    (['E01'], [], ['wrong_item'])
    """
    form = _compared(value)
    slips = {label: slips_between(form, _compared(label)) for label in node.accepts}
    near = [label for label, count in slips.items() if count is not None]
    near.sort(key=lambda label: slips[label] or 0)
    return near[:MAX_CANDIDATES]


def outside_labels(node: AskNode, value: str) -> tuple[str, list[str]] | None:
    """Why ``value`` (matching no label of ``node``, and no near miss of one) cannot be
    an answer outside its labels, with the candidates to offer instead; None when it
    can be (it may go down ``__other__``). Such an answer is shaped like a label, is no
    reserved word, lists no label and is no label's condition.

    >>> node = AskNode(id="n", say="", accepts={"damaged": "It arrived broken", "wrong_item": ""},
    ...                next={})
    >>> outside_labels(node, "price_drop") is None
    True
    >>> [outside_labels(node, v) for v in ("unknwon", "damaged, wrong_item", "it arrived broken")]
    ... # doctest: +NORMALIZE_WHITESPACE
    [('means the person does not know', ['__unknown__']),
     ('lists labels of n', ['damaged', 'wrong_item']),
     ('is the condition of the label damaged', ['damaged'])]
    >>> outside_labels(node, "Damaged item"), outside_labels(node, "Other")
    (('is not one short code', ['damaged']), ('says other without saying what', []))
    """
    words = _words(value)
    said = " ".join(words)
    for label, condition in node.accepts.items():
        if words and words == _words(condition):
            return f"is the condition of the label {label}", [label]
    if _is_one_of(said, DONT_KNOW_WORDS):
        return "means the person does not know", [UNKNOWN]
    if _is_one_of(said, OTHER_WORDS):
        return "says other without saying what", []
    parts = [part for part in _LIST.split(value) if part.strip()]
    named = _labels_in(node, [_words(part) for part in parts])
    if len(parts) > 1 and named:
        return f"lists labels of {node.id}", named
    if not LABEL_RE.fullmatch(value.strip()):
        return "is not one short code", _labels_in(node, [words])
    return None


def _is_one_of(said: str, reserved: frozenset[str]) -> bool:
    return any(
        said == word or (len(word) >= RESERVED_SLIP_FROM and slips_between(said, word) is not None)
        for word in reserved
    )


def _labels_in(node: AskNode, phrases: list[list[str]]) -> list[str]:
    """The labels of ``node`` whose words stand together in one of ``phrases``."""
    found = []
    for label in node.accepts:
        mine = _words(label)
        if any(_holds(phrase, mine) for phrase in phrases):
            found.append(label)
    return found[:MAX_CANDIDATES]


def _holds(phrase: list[str], words: list[str]) -> bool:
    n = len(words)
    return n > 0 and any(phrase[i : i + n] == words for i in range(len(phrase) - n + 1))


def _words(text: str) -> list[str]:
    """The words of ``text`` as compared, without punctuation (an apostrophe joins:
    ``don't`` is ``dont``)."""
    return _WORD.findall(_compared(text.replace("'", "").replace("\u2019", "")))


def similar_pairs(labels: Iterable[str]) -> list[tuple[str, str]]:
    """Pairs of ``labels`` (in author order) that the rule cannot tell apart: equal in
    normal form, or one a near miss of the other (lint's ``similar_labels``).

    >>> similar_pairs(["E01", "e01", "E02", "form", "from", "valid", "invalid"])
    [('E01', 'e01'), ('form', 'from')]
    """
    forms = [(label, _compared(label)) for label in labels]
    return [
        (a, b)
        for i, (a, form_a) in enumerate(forms)
        for b, form_b in forms[i + 1 :]
        if slips_between(form_a, form_b) is not None or slips_between(form_b, form_a) is not None
    ]


# Pure and asked again and again with the same few texts (a node's labels, the reserved
# words, the slips agents repeat): remembered, within a bound.
@functools.lru_cache(maxsize=4096)
def slips_between(value: str, label: str) -> int | None:
    """How many slips turn ``label`` into ``value`` (both compared forms), or None when
    ``value`` is no near miss of it.

    >>> slips_between("e1", "e01"), slips_between("e07", "e01"), slips_between("valid", "invalid")
    (1, None, None)
    """
    if _numbers(value) != _numbers(label):
        return None
    found = _within(value.replace(" ", ""), label.replace(" ", ""))
    words, label_words = value.split(), label.split()
    if len(words) == len(label_words) and len(words) > 1:
        for ours, theirs in ((words, label_words), (sorted(words), sorted(label_words))):
            total = 0
            for word, label_word in zip(ours, theirs, strict=True):
                count = _within(word, label_word)
                if count is None:
                    break
                total += count
            else:
                found = total if found is None else min(found, total)
    return found


@functools.lru_cache(maxsize=4096)
def _compared(text: str) -> str:
    return " ".join(normal_form(unicodedata.normalize("NFKC", text)).split())


def _numbers(text: str) -> tuple[int, ...]:
    return tuple(int(digits) for digits in _NUMBER.findall(text))


def _within(a: str, b: str) -> int | None:
    """The optimal string alignment distance of ``a`` and ``b`` (insertions, deletions,
    substitutions, swaps of neighbours) when it is within the slips ``b``'s length
    allows, else None. Only cells near the diagonal are computed: the band is the bound."""
    bound = 2 if len(b) >= LONG_WORD else 1 if len(b) >= SHORT_WORD else 0
    if abs(len(a) - len(b)) > bound:
        return None
    if a == b:
        return 0
    if bound == 0:
        return None
    # A common start and end cost no slip, and no swap reaches across their edge (it
    # would need the first differing characters equal): only the middle is aligned.
    shorter = min(len(a), len(b))
    start = 0
    while start < shorter and a[start] == b[start]:
        start += 1
    end = 0
    while end < shorter - start and a[-1 - end] == b[-1 - end]:
        end += 1
    a, b = a[start : len(a) - end], b[start : len(b) - end]
    far = bound + 1
    previous: list[int] = []
    row = [j if j <= bound else far for j in range(len(b) + 1)]
    for i in range(1, len(a) + 1):
        before, previous = previous, row
        row = [i if i <= bound else far] + [far] * len(b)
        for j in range(max(1, i - bound), min(len(b), i + bound) + 1):
            cost = 0 if a[i - 1] == b[j - 1] else 1
            best = min(previous[j] + 1, row[j - 1] + 1, previous[j - 1] + cost)
            if i > 1 and j > 1 and a[i - 1] == b[j - 2] and a[i - 2] == b[j - 1]:
                best = min(best, before[j - 2] + 1)
            row[j] = min(best, far)
        if min(row) > bound:
            # Every alignment already costs more: a swap from the row before costs no
            # less than the substitution this row holds.
            return None
    return row[len(b)] if row[len(b)] <= bound else None
