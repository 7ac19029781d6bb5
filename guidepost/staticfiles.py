"""Static files: hashed, compressed copies collected by ``serve`` and served by ServeStatic.

``serve`` collects into STATIC_ROOT before it starts listening; the
admin's pages then link to hashed names, which ServeStatic serves with a
far-future, immutable cache header.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # ServeStatic ships no types; its storage is Django's manifest storage
    from django.contrib.staticfiles.storage import ManifestStaticFilesStorage as Compressed
else:
    from servestatic.storage import CompressedManifestStaticFilesStorage as Compressed


class StaticFilesStorage(Compressed):
    """The manifest storage, except that it links plain names before anything is collected.

    Under ``manage.py runserver`` or an in-process test, nothing has been collected:
    Django's manifest storage would then fail every page that links a static file.
    Plain names keep those pages working (unstyled, as Django serves no static files
    when DEBUG is off). A name missing from an older manifest (a file added since the
    last collection; ``serve`` collects again when the sources change) links its plain
    name too, instead of failing the page.
    """

    def stored_name(self, name: str) -> str:
        if not self.hashed_files:
            return name
        try:
            return super().stored_name(name)
        except ValueError:
            return name
