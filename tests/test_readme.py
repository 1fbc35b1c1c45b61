"""The README stays a two-minute read: what it is, the two commands, what the first run prints, where to go next
(issues 47 and 49); dated measurements live in docs/results.md."""

from __future__ import annotations

from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"


def test_the_readme_before_its_command_reference_is_short_and_opens_with_the_two_commands() -> None:
    text = README.read_text(encoding="utf-8")
    head = text[:text.index("## Commands")]
    assert len(head.split()) <= 600, f"{len(head.split())} words before the command reference"
    blocks = [b.split("```", 1)[0].strip() for b in head.split("```\n")[1::2]]
    assert blocks[0].endswith(".venv/bin/grebench run"), blocks[0]
    assert blocks[1].endswith(".venv/bin/pytest -n 2 --dist loadfile") and "ruff check" in blocks[1], blocks[1]
    assert "⟨" not in text, "a placeholder is left in the README"
