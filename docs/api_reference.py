"""Build the API reference of kube_elevator's public names (and of the documented module
`kube_elevator.harness`) with pdoc: `make docs`.

    python docs/api_reference.py OUTPUT_DIRECTORY

The façade's names load on first use (PEP 562); pdoc reads a module's `__all__` from its
namespace, so every name is loaded first. The HTML is built, not checked in: the docstrings
are its source (tests/e2e/test_public_api.py builds it and checks every name is in it).
"""

from __future__ import annotations

import sys
from pathlib import Path


def build(output: Path) -> Path:
    """Write the reference into `output`; the path of its page for `kube_elevator`."""
    import pdoc
    import pdoc.render

    import kube_elevator

    for name in kube_elevator.__all__:  # loaded into the module's namespace for pdoc
        getattr(kube_elevator, name)
    pdoc.render.configure(docformat="google", show_source=False,
                          footer_text=f"kube-elevator {kube_elevator.__version__}")
    pdoc.pdoc("kube_elevator", "kube_elevator.harness", output_directory=output)
    return output / "kube_elevator.html"


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(f"usage: {sys.argv[0]} OUTPUT_DIRECTORY")
    print(build(Path(sys.argv[1])))
