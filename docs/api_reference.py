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
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pdoc.doc


MODULES = ("kube_elevator", "kube_elevator.harness")


def build(output: Path) -> Path:
    """Write the reference into `output`; the path of its page for `kube_elevator`."""
    import pdoc.doc
    import pdoc.render

    import kube_elevator

    for name in kube_elevator.__all__:  # loaded into the module's namespace for pdoc
        getattr(kube_elevator, name)
    pdoc.render.configure(docformat="google", show_source=False,
                          footer_text=f"kube-elevator {kube_elevator.__version__}")
    modules = {name: pdoc.doc.Module.from_name(name) for name in MODULES}
    for module in modules.values():
        for member in module.flattened_own_members:
            if isinstance(member, pdoc.doc.Class):
                _with_inherited_surface(member, modules)
                _without_internal_bases(member, modules)
    for name, module in modules.items():
        page = output / f"{name.replace('.', '/')}.html"
        page.parent.mkdir(parents=True, exist_ok=True)
        page.write_text(pdoc.render.html_module(module, modules), encoding="utf-8")
    (output / "index.html").write_text(pdoc.render.html_index(modules), encoding="utf-8")
    (output / "search.js").write_text(pdoc.render.search_index(modules), encoding="utf-8")
    return output / "kube_elevator.html"


def _with_inherited_surface(cls: pdoc.doc.Class, documented: dict[str, pdoc.doc.Module]) -> None:
    """A public class's members inherited from an internal base (`FakeKubeApi.install_crd`,
    from the fake API's CRD store) shown as its own: pdoc lists inherited members only when
    their base's module is in the reference, and the internal modules are not."""
    own = list(cls.own_members)
    for (module, _), members in cls.inherited_members.items():
        if module not in documented and module != "builtins":
            own.extend(member for member in members if not member.name.startswith("_"))
    cls.own_members = own  # a cached_property: set once, before rendering


def _without_internal_bases(cls: pdoc.doc.Class, documented: dict[str, pdoc.doc.Module]) -> None:
    """A public class shows only its public bases (`InProcessAws(FakeAws)`), not the fake API's
    internal ones (`FakeKubeApi(KubeHttp)`): their members are shown as the class's own
    (`_with_inherited_surface`), and a base the reader cannot look up is noise. A base is
    public when a documented module exports it; another project's (pydantic's `BaseModel`)
    stays."""
    public = {(member.taken_from[0], member.taken_from[1])
              for module in documented.values() for member in module.members.values()}
    cls.bases = [base for base in cls.bases
                 if not base[0].startswith("kube_elevator.") or (base[0], base[1]) in public]


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(f"usage: {sys.argv[0]} OUTPUT_DIRECTORY")
    print(build(Path(sys.argv[1])))
