"""Closest names: the candidates of every "not found" error and "did you mean".

One helper and one cutoff, so an agent gets the same kind of suggestion from
every tool, and an author from every lint message.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable, Mapping, Sequence

from flowcore.common.limits import (
    MAX_CANDIDATES,
    MAX_COMPARED_LENGTH,
    MAX_ID_LENGTH,
    MAX_LISTED,
)

# What a flow's id and a lookup endpoint's name may be: both are written in flow files and
# name files and rows, so they follow one rule.
ID_RE = re.compile(rf"[a-z0-9_]{{1,{MAX_ID_LENGTH}}}")
ID_HELP = f"1 to {MAX_ID_LENGTH} characters: lower-case letters, digits and '_'"

# How similar a name must be to be offered (difflib's ratio, 0..1). 0.6 is
# difflib's own default: close spellings ("paymnts" -> "payments") pass, while
# unrelated names of the same length do not.
CUTOFF = 0.6
# A word found inside an id's other names (a flow's title, say) counts as this close.
CONTAINED = 0.9


def closest(
    word: str,
    options: Iterable[str],
    *,
    n: int = MAX_CANDIDATES,
    aliases: Mapping[str, Sequence[str]] | None = None,
) -> list[str]:
    """The options most similar to ``word``, best first, at most ``n``.

    With ``aliases`` (option -> other names, such as a flow's title), an option
    also matches through them, case-insensitively, and a word contained in one
    of them (or containing it) counts as very close.

    >>> closest("paymnts", ["payments", "account", "it"])
    ['payments']
    >>> closest("返金", ["refund"], aliases={"refund": ["返金したい"]})
    ['refund']
    """
    if len(word) > MAX_COMPARED_LENGTH:
        return []  # nothing we name is this long; comparing would only cost time
    names = list(options)
    if aliases is None:
        return difflib.get_close_matches(word, names, n=n, cutoff=CUTOFF)
    needle = word.strip().casefold()
    if not needle:
        return []
    scores: dict[str, float] = {}
    for name in names:
        best = difflib.SequenceMatcher(None, needle, name.casefold()).ratio()
        for alias in aliases.get(name, ()):
            text = alias.casefold()
            if text and (needle in text or text in needle):
                best = max(best, CONTAINED)
            best = max(best, difflib.SequenceMatcher(None, needle, text).ratio())
        if best >= CUTOFF:
            scores[name] = best
    return sorted(scores, key=lambda name: -scores[name])[:n]


def missing_hint(word: str, known: Sequence[str], plural: str) -> str:
    """What to say after "FLOW has no <thing> WORD": the closest name, else which exist.

    >>> missing_hint("refundd", ["refunded", "escalated"], "outcomes")
    ": did you mean 'refunded'?"
    >>> missing_hint("resolved", ["fixed_remotely", "ticket"], "outcomes")
    ' (outcomes: fixed_remotely, ticket)'
    >>> missing_hint("x", [], "outcomes")
    ' (it has no outcomes)'
    """
    near = closest(word, known, n=1)
    if near:
        return f": did you mean {near[0]!r}?"
    if not known:
        return f" (it has no {plural})"
    listed = ", ".join(known[:MAX_LISTED])
    more = f" and {len(known) - MAX_LISTED} more" if len(known) > MAX_LISTED else ""
    return f" ({plural}: {listed}{more})"
