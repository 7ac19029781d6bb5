"""A model field for a digest: stored as its raw bytes, read and written as lowercase hex.

The chain's hashes, a run's head hash and its salt are hex text everywhere in Python (the
hashes hash each other's hex, ``verify`` and the ledger compare it, results and exports
show it); only the column holds half the bytes (ADR 0095).

>>> field = HexDigestField()
>>> field.get_prep_value("00ff")
b'\\x00\\xff'
>>> field.from_db_value(b"\\x00\\xff", None, None)
'00ff'
>>> field.get_prep_value(""), field.from_db_value(b"", None, None)
(b'', '')
"""

from __future__ import annotations

from typing import Any

from django.db import models


class HexDigestField(models.BinaryField[str, str]):
    """A hex digest ("" for none) kept in a binary column as the bytes it spells. Like any
    BinaryField it is left out of forms unless declared ``editable=True``."""

    def _check_str_default_value(self) -> list[Any]:
        return []  # a BinaryField's default is bytes; this one's is hex text

    def from_db_value(self, value: Any, expression: Any, connection: Any) -> str | None:
        return None if value is None else bytes(value).hex()

    def to_python(self, value: Any) -> str | None:
        if value is None or isinstance(value, str):
            return value
        return bytes(value).hex()

    def get_prep_value(self, value: Any) -> Any:
        value = super().get_prep_value(value)
        return bytes.fromhex(value) if isinstance(value, str) else value

    def value_to_string(self, obj: models.Model) -> str:
        return str(self.value_from_object(obj))
