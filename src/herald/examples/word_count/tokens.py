"""Words and bigrams of a document: the one definition the job, the query service
and the tests all use, so counts compare exactly.

A *word* is a run of letters and digits, with apostrophes allowed inside it
(``don't``, ``o'clock``); everything else separates words. Text is normalised
first — Unicode NFC (so a composed and a decomposed ``é`` are one letter), the
typographic apostrophe ``’`` read as ``'``, and case folded (``The`` and ``THE``
are ``the``). A *bigram* is two consecutive words of one document, written
``"w1 w2"`` (a word never holds a space, so the text form is unambiguous and its
string prefixes are what ``--prefix`` searches). Bigrams do not span documents.

    >>> bigrams("It was the best of times, it was the worst of times")[:3]
    ['it was', 'was the', 'the best']

Pure: no I/O.
"""

from __future__ import annotations

import re
import unicodedata

from herald.protocol.errors import ValidationError

__all__ = ["MAX_WORD_CHARS", "bigram_key", "bigrams", "normalise", "normalise_prefix", "split_bigram", "words"]

_WORD = re.compile(r"[^\W_]+(?:'[^\W_]+)*")
_SPACES = re.compile(r"\s+")
MAX_WORD_CHARS = 100
MAX_PREFIX_CHARS = 2 * MAX_WORD_CHARS + 1


def normalise(text: str) -> str:
    """NFC, ``’`` → ``'``, case folded: how every text is read before splitting."""
    folded = unicodedata.normalize("NFC", text).replace("\u2019", "'").casefold()
    return unicodedata.normalize("NFC", folded)  # Folding may decompose (rarely); recompose.


def words(text: str) -> list[str]:
    """The words of ``text``, in order (see the module docstring)."""
    return _WORD.findall(normalise(text))


def bigrams(text: str) -> list[str]:
    """Every pair of consecutive words of ``text`` as ``"w1 w2"``, in order, repeats kept."""
    found = words(text)
    return [f"{a} {b}" for a, b in zip(found, found[1:])]


def bigram_key(w1: str, w2: str, fields: tuple[str, str] = ("w1", "w2")) -> str:
    """``"w1 w2"`` from two query words, each normalised and checked to be one word
    (a ValidationError names the field otherwise)."""
    return f"{_one_word(w1, fields[0])} {_one_word(w2, fields[1])}"


def split_bigram(text: str, field: str = "bigram") -> tuple[str, str]:
    """``"the city"`` → ``("the", "city")``; a ValidationError unless exactly two words."""
    parts = _SPACES.split(text.strip())
    if len(parts) != 2 or not all(parts):
        raise ValidationError(field, f"want two words separated by a space, e.g. 'the city' (got {text[:80]!r})")
    return parts[0], parts[1]


def normalise_prefix(text: str, field: str = "prefix") -> str:
    """A prefix of bigram keys as a user typed it, in their normal form: runs of
    white space are one space and leading space is dropped (a trailing space is
    kept: ``"the "`` asks for bigrams whose first word is exactly ``the``)."""
    if len(text) > MAX_PREFIX_CHARS:
        raise ValidationError(field, f"longer than {MAX_PREFIX_CHARS} characters ({len(text)})")
    if any(unicodedata.category(c) == "Cc" and not c.isspace() for c in text):
        raise ValidationError(field, "holds a control character")
    return _SPACES.sub(" ", normalise(text)).lstrip()


def _one_word(text: str, field: str) -> str:
    if len(text) > MAX_WORD_CHARS:
        raise ValidationError(field, f"longer than {MAX_WORD_CHARS} characters ({len(text)})")
    found = words(text)
    if len(found) != 1 or found[0] != normalise(text).strip():
        raise ValidationError(field, f"want one word (letters, digits, inner apostrophes), got {text[:80]!r}")
    return found[0]
