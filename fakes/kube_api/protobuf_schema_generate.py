"""Generate fakes/kube_api/protobuf_schema_*.py from Kubernetes' published sources.

Field numbers and types come from each package's `generated.proto`; the JSON side (the field's
JSON name, `,inline`, `omitempty`, whether the Go field is a pointer) from the Go structs' tags
in the same package, joined on (message name, field number).  Only the messages reachable from
the kinds the fake serves (ROOTS) are written.

    python -m kube_elevator.fakes.kube_api.protobuf_schema_generate API_DIR AM_DIR EXT_DIR \
        [API_COMMIT AM_COMMIT EXT_COMMIT]

API_DIR is a checkout of k8s.io/api, AM_DIR of k8s.io/apimachinery, EXT_DIR of
k8s.io/apiextensions-apiserver (or an export of their trees, with the commits given after them).
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

# Proto package -> (short alias, directory under its repo).
PACKAGES = {
    "k8s.io.apimachinery.pkg.apis.meta.v1": ("meta", "am", "pkg/apis/meta/v1"),
    "k8s.io.apimachinery.pkg.runtime": ("runtime", "am", "pkg/runtime"),
    "k8s.io.apimachinery.pkg.api.resource": ("resource", "am", "pkg/api/resource"),
    "k8s.io.apimachinery.pkg.util.intstr": ("intstr", "am", "pkg/util/intstr"),
    "k8s.io.api.core.v1": ("core", "api", "core/v1"),
    "k8s.io.api.apps.v1": ("apps", "api", "apps/v1"),
    "k8s.io.api.coordination.v1": ("coordination", "api", "coordination/v1"),
    "k8s.io.api.policy.v1": ("policy", "api", "policy/v1"),
    "k8s.io.api.events.v1": ("events", "api", "events/v1"),
    "k8s.io.api.autoscaling.v1": ("autoscaling", "api", "autoscaling/v1"),
    "k8s.io.apiextensions_apiserver.pkg.apis.apiextensions.v1": (
        "apiextensions", "ext", "pkg/apis/apiextensions/v1"),
}
# Hand-written in protobuf_wire.py: their JSON form is not their proto form.
SPECIAL = {"meta.Time", "meta.MicroTime", "meta.Duration", "meta.FieldsV1", "meta.Timestamp",
           "runtime.RawExtension", "runtime.Unknown", "runtime.TypeMeta", "resource.Quantity",
           "intstr.IntOrString",
           # JSON is raw JSON; the Or* types are one JSON value of either shape
           # (apiextensions v1 marshal.go): protobuf_apiextensions.py converts them.
           "apiextensions.JSON", "apiextensions.JSONSchemaPropsOrArray",
           "apiextensions.JSONSchemaPropsOrBool", "apiextensions.JSONSchemaPropsOrStringArray"}
ROOTS = [
    "core.Pod", "core.PodList", "core.Node", "core.NodeList", "core.Event", "core.EventList",
    "core.ConfigMap", "core.ConfigMapList", "core.Namespace", "core.NamespaceList",
    "core.Binding", "core.Service", "core.ServiceList", "core.Secret", "core.SecretList",
    "core.PersistentVolume", "core.PersistentVolumeList", "core.PersistentVolumeClaim",
    "core.PersistentVolumeClaimList",
    "apps.Deployment", "apps.DeploymentList", "apps.StatefulSet", "apps.StatefulSetList",
    "apps.ReplicaSet", "apps.ReplicaSetList", "apps.DaemonSet", "apps.DaemonSetList",
    "coordination.Lease", "coordination.LeaseList",
    "policy.PodDisruptionBudget", "policy.PodDisruptionBudgetList", "policy.Eviction",
    "events.Event", "events.EventList", "autoscaling.Scale",
    "meta.Status", "meta.DeleteOptions", "meta.WatchEvent", "meta.List",
    "meta.PartialObjectMetadata", "meta.PartialObjectMetadataList",
    "apiextensions.CustomResourceDefinition", "apiextensions.CustomResourceDefinitionList",
    # Reached only through the Or* types above, which the walk does not enter.
    "apiextensions.JSONSchemaProps",
]
SCALARS = {"string", "bytes", "int32", "int64", "bool", "double", "float", "uint32", "uint64"}
OUTPUT = {  # which generated module holds each alias
    "core": "protobuf_schema_core.py",
    "meta": "protobuf_schema_meta.py", "runtime": "protobuf_schema_meta.py",
    "resource": "protobuf_schema_meta.py", "intstr": "protobuf_schema_meta.py",
    "apps": "protobuf_schema_groups.py", "coordination": "protobuf_schema_groups.py",
    "policy": "protobuf_schema_groups.py", "events": "protobuf_schema_groups.py",
    "autoscaling": "protobuf_schema_groups.py",
    "apiextensions": "protobuf_schema_apiextensions.py",
}

FIELD = re.compile(r"^\s*(optional|repeated|required)?\s*(map<\s*(\S+)\s*,\s*(\S+)\s*>|\S+)\s+"
                   r"(\w+)\s*=\s*(\d+)\s*;")


def parse_proto(text: str, alias: str) -> dict[str, list[tuple[int, str, str, str]]]:
    """message -> [(number, proto name, label, type)] with types as `alias.Name` or a scalar."""
    messages: dict[str, list[tuple[int, str, str, str]]] = {}
    current: str | None = None
    depth = 0
    for line in text.splitlines():
        line = line.split("//")[0]
        m = re.match(r"^\s*message\s+(\w+)\s*\{", line)
        if m:
            if depth:
                raise SystemExit(f"nested message {m.group(1)} is not supported")
            current, depth = f"{alias}.{m.group(1)}", 1
            messages[current] = []
            continue
        if current is None:
            continue
        if "}" in line:
            current, depth = None, 0
            continue
        f = FIELD.match(line)
        if not f:
            continue
        label, whole, key, value, name, number = f.groups()
        if key is not None:
            if key != "string":
                raise SystemExit(f"{current}.{name}: map key {key} is not supported")
            messages[current].append((int(number), name, "map", qualify(value, alias)))
        else:
            messages[current].append((int(number), name, label or "optional",
                                      qualify(whole, alias)))
    return messages


def qualify(type_name: str, alias: str) -> str:
    if type_name in SCALARS:
        return type_name
    if type_name.startswith("."):
        package, _, name = type_name[1:].rpartition(".")
        if package not in PACKAGES:
            raise SystemExit(f"type {type_name} is from a package not listed in PACKAGES")
        return f"{PACKAGES[package][0]}.{name}"
    return f"{alias}.{type_name}"


GO_STRUCT = re.compile(r"^type (\w+) struct \{")
GO_FIELD = re.compile(r"^\s*(?:(\w+)\s+)?([\w\.\*\[\]]+)\s+`([^`]*)`")


def parse_go(directory: Path) -> dict[str, dict[int, tuple[str, bool, bool, bool]]]:
    """struct -> {proto number: (json name, inline, omitempty, pointer)}."""
    structs: dict[str, dict[int, tuple[str, bool, bool, bool]]] = {}
    for path in sorted(directory.glob("*.go")):
        if path.name.endswith("_test.go"):
            continue
        current: str | None = None
        for line in path.read_text().splitlines():
            m = GO_STRUCT.match(line)
            if m:
                current = m.group(1)
                structs[current] = {}
                continue
            if current is None:
                continue
            if line.startswith("}"):
                current = None
                continue
            f = GO_FIELD.match(line)
            if not f:
                continue
            go_type, tag = f.group(2), f.group(3)
            pb = re.search(r'protobuf:"([^"]*)"', tag)
            if not pb or pb.group(1) == "-":
                continue
            number = int(pb.group(1).split(",")[1])
            js = re.search(r'json:"([^"]*)"', tag)
            parts = js.group(1).split(",") if js else [""]
            # An embedded struct without a JSON name is flattened into its parent's JSON.
            inline = "inline" in parts[1:] or (f.group(1) is None and not parts[0])
            omit = "omitempty" in parts[1:] or "omitzero" in parts[1:]
            structs[current][number] = (parts[0], inline, omit, go_type.startswith("*"))
    return structs


def main(api: Path, apimachinery: Path, extensions: Path,
         commits: dict[str, str] | None = None) -> None:
    protos: dict[str, list[tuple[int, str, str, str]]] = {}
    go: dict[str, dict[int, tuple[str, bool, bool, bool]]] = {}
    roots = {"api": api, "am": apimachinery, "ext": extensions}
    for package, (alias, repo, rel) in PACKAGES.items():
        directory = roots[repo] / rel
        protos.update(parse_proto((directory / "generated.proto").read_text(), alias))
        for struct, fields in parse_go(directory).items():
            go[f"{alias}.{struct}"] = fields
        del package
    reach: list[str] = []
    todo = list(ROOTS)
    while todo:
        name = todo.pop()
        if name in reach or name in SPECIAL:
            continue
        if name not in protos:
            raise SystemExit(f"{name} is not in any generated.proto")
        reach.append(name)
        todo.extend(t for _, _, _, t in protos[name] if t not in SCALARS)
    out: dict[str, list[str]] = {}
    for name in sorted(reach):
        tokens = []
        if name not in go:
            print(f"warning: no Go struct for {name}: JSON names from the proto", file=sys.stderr)
        for number, proto_name, label, type_name in sorted(protos[name]):
            json_name, inline, omit, pointer = go.get(name, {}).get(
                number, (proto_name, False, True, False))
            if not json_name and not inline:
                json_name = proto_name
            flags = ("*" if label == "repeated" else "") + ("?" if pointer else "") \
                + ("^" if inline else "") + ("!" if not omit and not pointer else "")
            kind = f"map:{type_name}" if label == "map" else type_name
            tokens.append(f"{number} {json_name if not inline else proto_name} {kind}{flags}")
        out.setdefault(OUTPUT[name.split(".")[0]], []).append(f"{name}|" + "; ".join(tokens))
    commits = commits or {key: git_head(path) for key, path in roots.items()}
    for filename, entries in out.items():
        write_module(Path(__file__).parent / filename, entries,
                     commits)


def git_head(path: Path) -> str:
    try:
        return subprocess.run(["git", "-C", str(path), "rev-parse", "HEAD"], check=True,
                              capture_output=True, text=True).stdout.strip()
    except (subprocess.CalledProcessError, FileNotFoundError):
        return "unknown"


def write_module(path: Path, entries: list[str], commits: dict[str, str]) -> None:
    repo, commit = (("k8s.io/apiextensions-apiserver", commits["ext"])
                    if path.stem.endswith("apiextensions") else ("k8s.io/api", commits["api"]))
    source = "fakes/kube_api/protobuf_schema_generate.py from generated.proto and the Go types of"
    tail = f"({commit[:12]}) and k8s.io/apimachinery ({commits['am'][:12]}); do not edit."
    lines = [
        f'"""Protobuf descriptors ({path.stem.removeprefix("protobuf_schema_")}): generated by',
        *([f"{source} {repo}", tail] if len(source + repo) < 99 else [source, f"{repo} {tail}"]),
        "",
        "One entry a message: `alias.Message|number jsonName type[flags]; ...`, flags: `*` repeated,",
        "`?` a Go pointer, `^` inlined into the parent's JSON, `!` no omitempty (see protobuf_wire.py).",
        '"""',
        "",
        "MESSAGES = (",
    ]
    for entry in entries:
        lines.extend(wrap(entry))
    lines.append(")")
    path.write_text("\n".join(lines) + "\n")


def wrap(entry: str, width: int = 100) -> list[str]:
    head, _, body = entry.partition("|")
    chunks, line = [], head + "|"
    for token in body.split("; "):
        piece = token + "; "
        if len(line) + len(piece) > width - 8:
            chunks.append(line)
            line = ""
        line += piece
    chunks.append(line.removesuffix("; "))
    return [f'    "{c}"' for c in chunks[:-1]] + [f'    "{chunks[-1]}",']


if __name__ == "__main__":
    if len(sys.argv) not in (4, 7):
        raise SystemExit(__doc__)
    main(Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3]),
         {"api": sys.argv[4], "am": sys.argv[5], "ext": sys.argv[6]}
         if len(sys.argv) == 7 else None)
