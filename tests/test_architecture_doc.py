"""docs/architecture.md's module map names every module of the package, and no module that is gone."""
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "mapper"


def named_modules(section):
    """Module paths (relative to mapper/) the map's bullets name; a bullet opening with `folder/` names
    that folder's modules by their file names."""
    named = set()
    for bullet in re.split(r"\n(?=- )", section)[1:]:
        group = re.match(r"- `(\w+)/`", bullet)
        for path in re.findall(r"`([\w/]+\.py)`", bullet):
            named.add(f"{group.group(1)}/{path}" if group and "/" not in path else path)
    return named


def test_module_map_is_complete_and_true():
    section = (ROOT / "docs" / "architecture.md").read_text().split("## Module map", 1)[1]
    modules = {p.relative_to(PACKAGE).as_posix() for p in PACKAGE.rglob("*.py")
               if p.name != "__init__.py" or p.parent.name == "device"}
    named = named_modules(section)
    missing = sorted(modules - named)
    gone = sorted(n for n in named if not (PACKAGE / n).exists())
    assert not missing and not gone, f"not in the module map: {missing}; in the map but gone: {gone}"
