"""The lock files of requirements/ (`make lock`), read as pip reads them: a pin per package, its
environment marker, and the hashes that pin its bytes."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from packaging.markers import Marker
from packaging.utils import canonicalize_name

ROOT = Path(__file__).parent.parent
REQUIREMENTS = ROOT / "requirements"
# Each lock and the extras of pyproject.toml it installs (test.txt is the development venv).
LOCKS = {"runtime.txt": (), "sim.txt": ("sim",), "tune.txt": ("tune",),
         "harness.txt": ("harness",), "blocks.txt": ("blocks",), "docs.txt": ("docs",),
         "cel.txt": ("cel",),
         "image.txt": ("tune", "blocks"),
         "test.txt": ("sim", "tune", "blocks", "docs", "harness", "cel", "test")}
# prefect-aws needs aiobotocore, whose every release caps botocore below the newest: the locks
# with prefect-aws hold what it allows, every other lock the newest (Makefile, `make lock`).
AWS_SDK = frozenset({"boto3", "botocore", "s3transfer"})
_PIN = re.compile(r"^(?P<name>[A-Za-z0-9][A-Za-z0-9._-]*)==(?P<version>[^\s;\\]+)"
                  r"\s*(?:;\s*(?P<marker>[^\\]+?))?\s*\\?$")


@dataclass(frozen=True)
class Pin:
    name: str  # canonical: lower case, dashes
    version: str
    marker: str  # "" when the pin holds everywhere
    hashes: tuple[str, ...]

    def applies(self) -> bool:
        """Whether pip installs this pin on the running interpreter and platform."""
        return not self.marker or Marker(self.marker).evaluate()


def read_lock(path: Path) -> list[Pin]:
    """Every pin of a lock file, with the `--hash` lines that follow it."""
    pins: list[Pin] = []
    current: dict[str, str] | None = None
    hashes: list[str] = []
    for line in [*path.read_text().splitlines(), ""]:
        stripped = line.strip()
        if stripped.startswith("--hash="):
            hashes.append(stripped.removeprefix("--hash=").rstrip(" \\"))
            continue
        if current is not None and not line.startswith(" "):
            pins.append(Pin(canonicalize_name(current["name"]), current["version"],
                            (current["marker"] or "").strip(), tuple(hashes)))
            current, hashes = None, []
        match = _PIN.match(line)
        if match:
            current = match.groupdict()
    return pins


def applicable(path: Path) -> dict[str, str]:
    """name -> version of the pins pip installs here."""
    return {pin.name: pin.version for pin in read_lock(path) if pin.applies()}
