"""Where guidepost finds what it ships and keeps what it writes, run from a checkout or
installed from its wheel (ADR 0115). Django-free: the settings read it before Django runs.

A checkout holds the templates and the flows in its top folders and writes under its
``var/``. The wheel carries both folders inside this package (``guidepost/bundled/``,
pyproject.toml's wheel sources), and an installed server never writes there: its database,
its collected static files and its flows directory (a copy of the bundled flows, which
the catalog copier writes into) live in the data directory, ``GUIDEPOST_DATA_DIR``.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Mapping
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent
BUNDLED = PACKAGE / "bundled"
# Only a wheel has the bundled folder: an editable install runs the checkout.
INSTALLED = BUNDLED.is_dir()
# Where the templates/ and flows/ folders are.
SHIPPED = BUNDLED if INSTALLED else PACKAGE.parent
DISTRIBUTION = "guidepost-mcp"


def default_data_dir(environ: Mapping[str, str], *, installed: bool = INSTALLED) -> Path:
    """The data directory when GUIDEPOST_DATA_DIR is not set: a checkout's ``var/``;
    installed, the user's data directory of the XDG base directory rules, so that every
    command finds the database ``serve`` made, from whatever directory it is run.

    >>> default_data_dir({"XDG_DATA_HOME": "/srv/data"}, installed=True)
    PosixPath('/srv/data/guidepost-mcp')
    >>> default_data_dir({"XDG_DATA_HOME": "relative", "HOME": "/home/ana"}, installed=True)
    PosixPath('/home/ana/.local/share/guidepost-mcp')
    >>> default_data_dir({}, installed=False) == PACKAGE.parent / "var"
    True
    """
    if not installed:
        return PACKAGE.parent / "var"
    xdg = environ.get("XDG_DATA_HOME", "")
    if os.path.isabs(xdg):  # a relative one is to be ignored, the rules say
        return Path(xdg) / DISTRIBUTION
    home = environ.get("HOME") or str(Path.home())
    return Path(home) / ".local" / "share" / DISTRIBUTION


def flows_copy(data_dir: Path, bundled: Path = BUNDLED / "flows") -> Path:
    """``DATA_DIR/flows``, the flows directory of an installed server, made from the
    bundled flows when it does not exist yet. Raises OSError when it cannot be made.

    Copied whole into a temporary folder beside it, then renamed: two first starts at
    once each copy, and one copy is kept.
    """
    target = data_dir / "flows"
    if target.is_dir():
        return target
    data_dir.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".flows-", dir=data_dir))
    try:
        # File by file, contents only: the copy is this user's to write, whatever modes the
        # install gave the package's files.
        for source in bundled.rglob("*"):
            if source.is_file():
                copied = staging / source.relative_to(bundled)
                copied.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(source, copied)
        staging.rename(target)
    except OSError:
        if not target.is_dir():
            raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return target
