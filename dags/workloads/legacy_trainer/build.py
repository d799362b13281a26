"""Build the legacy trainer package as ``gcloud ai-platform jobs submit training --package-path trainer`` did: a
source distribution, ``trainer-0.2.tar.gz`` (setup.py, the ``trainer`` package and the demo model beside it,
``trainer/train_digits.py``). Standard library only; used by the example DAG's ``package`` task and the tests."""

from __future__ import annotations

import io
import tarfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
FILES = {"setup.py": HERE / "setup.py", "trainer/__init__.py": HERE / "trainer" / "__init__.py",
         "trainer/task.py": HERE / "trainer" / "task.py", "trainer/train_digits.py": HERE.parent / "train_digits.py"}


def sdist() -> bytes:
    """The ``.tar.gz`` bytes: every file under ``trainer-0.2/``."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        for name, path in FILES.items():
            archive.add(path, arcname=f"trainer-0.2/{name}")
    return buffer.getvalue()
