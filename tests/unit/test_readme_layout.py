"""The README's layout names rooms that exist, so it cannot drift from the tree unnoticed."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
_WORD = re.compile(r"(?<![\w.])(_?[a-z][a-z0-9_]*\*?(?:\.py)?)")


def _rooms() -> dict[str, list[str]]:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text.split("## Layout\n", 1)[1].split("\n## ", 1)[0]
    blocks = section.split("```\n")[1::2]
    rooms: dict[str, list[str]] = {}
    current = ""
    for line in blocks[1].splitlines():
        if not line.startswith(" "):
            current, _, rest = line.partition(" ")
            rooms[current] = []
        else:
            rest = line
        # Only private module names (and *.py files) are checked: plain words are prose.
        rooms[current] += [w for w in _WORD.findall(rest) if w.startswith("_") or
                           w.endswith(".py")]
    return rooms


def test_every_room_the_layout_names_exists() -> None:
    rooms = _rooms()
    assert len(rooms) >= 10
    missing = []
    for room, names in rooms.items():
        folder = ROOT / "kontrakt" / room
        assert folder.is_dir(), room
        for name in names:
            stem = name.removesuffix(".py").rstrip("*")
            if name.endswith("*") or stem.endswith("_"):
                found = any(folder.glob(stem + "*"))
            else:
                found = (folder / f"{stem}.py").exists() or (folder / stem).is_dir()
            if not found:
                missing.append(f"{room}{name}")
    assert not missing, f"README's layout names rooms the tree lacks: {missing}"


def test_every_module_of_the_producer_and_consumer_is_named() -> None:
    rooms = _rooms()
    for room in ("clients/producer/", "clients/consumer/"):
        named = {n.removesuffix(".py") for n in rooms[room]}
        present = {p.stem for p in (ROOT / "kontrakt" / room).glob("_*.py")}
        present -= {"__init__", "_config", "_metrics", "_sync", "_parts", "_stats"}
        assert present <= named, f"{room}: not in README's layout: {sorted(present - named)}"
