"""`--extra NAME` for each extra of pyproject.toml that admits the Prefect release given: the
extras `make test-prefect` installs beside it (the `blocks` extra states its own floor, so an
older release is tested without it, as a user on it would install kube-elevator)."""

from __future__ import annotations

import sys
import tomllib
from pathlib import Path

from packaging.requirements import Requirement
from packaging.version import Version


def extras_admitting(prefect: Version, pyproject: Path) -> list[str]:
    extras: dict[str, list[str]] = tomllib.loads(pyproject.read_text())["project"][
        "optional-dependencies"]
    return [name for name, texts in extras.items()
            if all(Requirement(text).specifier.contains(prefect, prereleases=True)
                   for text in texts if Requirement(text).name == "prefect")]


if __name__ == "__main__":
    root = Path(__file__).resolve().parent.parent
    print(" ".join(f"--extra {name}" for name in
                   extras_admitting(Version(sys.argv[1]), root / "pyproject.toml")))
