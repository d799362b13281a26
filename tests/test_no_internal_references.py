"""What a user reads -- the README, the documentation and the package's docstrings and comments -- cites public
pages only: no internal source notes by number, no design or reference files that are not in the repository,
nothing under a sibling ``shared`` directory, and no phrases quoted in another language from those notes."""

from __future__ import annotations

import re
import unicodedata
from pathlib import Path

ROOT = Path(__file__).parents[1]
#: What users read: the README, the documentation site's sources, the package, and what ships beside it in the
#: repository: the benchmarks and their results, the example DAGs and workloads, the scripts.
READ_BY_USERS = [ROOT / "README.md", ROOT / "docs", ROOT / "airflow_provider_resilient", ROOT / "benchmarks",
                 ROOT / "dags", ROOT / "scripts"]
TEXT_SUFFIXES = {".py", ".md", ".yaml", ".yml", ".txt", ".json", ".toml", ".cfg", ".ini", ".sh"}

#: Internal references, matched case-insensitively ("seed 002", "Seed-004", "seeds 000", DESIGN.md ...). Code
#: identifiers such as ``SEED_000_INTERVAL`` are names, not citations, and are not matched.
INTERNAL = re.compile(r"seeds?[ -]?00\d|DESIGN\.md|REFERENCE\.md|STYLE\.md|\.\./shared|shared/(?:seeds|DESIGN)",
                      re.IGNORECASE)


def _text_files() -> list[Path]:
    files: list[Path] = []
    for place in READ_BY_USERS:
        candidates = [place] if place.is_file() else sorted(p for p in place.rglob("*") if p.is_file())
        files += [p for p in candidates if p.suffix in TEXT_SUFFIXES and "__pycache__" not in p.parts]
    return files


def _lines(pattern_hit) -> list[str]:  # type: ignore[no-untyped-def]
    hits = []
    for path in _text_files():
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
            if pattern_hit(line):
                hits.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()[:120]}")
    return hits


def test_the_files_users_read_exist():
    assert (ROOT / "README.md").is_file() and (ROOT / "docs").is_dir()
    assert len(_text_files()) > 50  # the package's modules and the documentation's pages are scanned


def test_no_internal_references():
    """A rule's source is the public page it comes from (title and address), never an internal note."""
    hits = _lines(INTERNAL.search)
    assert not hits, "internal references where users read them:\n" + "\n".join(hits)


def test_no_letters_outside_ascii():
    """Quotes from notes in other languages (German, Chinese, Italian ...) are replaced by the public English
    page; symbols such as a superscript two or an arrow are fine, letters are not."""

    def foreign(line: str) -> bool:
        return any(ord(c) > 127 and unicodedata.category(c).startswith("L") for c in line)

    hits = _lines(foreign)
    assert not hits, "letters outside ASCII where users read them:\n" + "\n".join(hits)
