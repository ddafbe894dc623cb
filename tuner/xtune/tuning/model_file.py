"""The tree model's file, watched during a run for a live upgrade.

To upgrade a running policy, write the new model beside the file and rename it over the file (an
atomic replace); the run loads, checks and compiles it off the frame path and hands it to the
frame path, which swaps at the next frame (`FramePump.swap`). A file that does not load is
refused with the reason and the running model stays.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from xtune.policies.tree import TreeModel


def _identity(path: Path) -> tuple[int, int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None  # between an unlink and a rename, or removed: nothing to load
    return st.st_ino, st.st_mtime_ns, st.st_size


class ModelFile:
    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._seen = _identity(self.path)
        try:
            self.digest = _digest(self.path.read_bytes())
        except OSError:
            self.digest = "unreadable"

    def replaced(self) -> bool:
        """Whether the file changed since it was last loaded (or refused)."""
        now = _identity(self.path)
        return now is not None and now != self._seen

    def load(self) -> TreeModel:
        """The model now in the file; ValueError (with the reason) when it does not load. Either way
        this version of the file counts as seen: a refused file is not tried again until replaced."""
        self._seen = _identity(self.path)
        try:
            data = self.path.read_bytes()
            doc = json.loads(data)
        except (OSError, ValueError) as e:
            raise ValueError(f"{self.path}: cannot read the tree model: {e}") from e
        model = TreeModel.from_doc(doc, str(self.path))
        self.digest = _digest(data)
        return model


def _digest(data: bytes) -> str:
    """A short content hash that tells model versions apart in reasons."""
    return hashlib.sha256(data).hexdigest()[:12]
