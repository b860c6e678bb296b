"""kubectl against the fake as test/cmd drives it against a real server: kubernetes
test/cmd/create.sh (run_kubectl_create_dry_run_tests, run_kubectl_create_filter_tests,
run_kubectl_create_error_tests). The manifests are our own (hack/testdata's are not copied):
pods of the same shape, sent on stdin.
"""

from __future__ import annotations

from tests.replay.model import KUBECTL, Case, Expect, Request

SOURCE = "test/cmd/create.sh"


def _pod(pod_name: str, **labels: str) -> str:
    lines = "".join(f"    {key}: {value}\n" for key, value in labels.items())
    return (f"apiVersion: v1\nkind: Pod\nmetadata:\n  name: {pod_name}\n"
            + (f"  labels:\n{lines}" if labels else "")
            + "spec:\n  containers:\n  - name: kubernetes-serve-hostname\n"
              "    image: registry.k8s.io/serve_hostname\n")


def _namespace(name: str) -> Request:
    return Request(kubectl=("create", "namespace", name), tolerate=(1,))


def _cases() -> list[Case]:
    # A namespace per case (create_and_use_new_namespace), so the cases run in any order.
    dry, dry_empty = "kubectl-create-dry-run", "kubectl-create-dry-run-empty"
    filtered, filtered_other = "kubectl-create-filter", "kubectl-create-filter-other"
    both = _pod("selector-test-pod", **{"unique-label": "bingbang", "name": "selector-test-pod"}) \
        + "---\n" + _pod("selector-test-pod-dont-apply", **{"unique-label": "biz",
                                                             "name": "selector-test-pod-dont"})
    test = "run_kubectl_create_dry_run_tests"
    valid_pod = _pod("valid-pod", name="valid-pod")
    return [
        Case(f"{test}/client and server dry runs succeed", KUBECTL, SOURCE, test,
             (_namespace(dry),
              Request(kubectl=("create", "--dry-run=client", "-f", "-", "-n", dry),
                      stdin=valid_pod),
              Request(kubectl=("create", "--dry-run=server", "-f", "-", "-n", dry),
                      stdin=valid_pod)),
             Expect(exit_code=0, output_contains=("pod/valid-pod created (server dry run)",))),
        Case(f"{test}/nothing was created", KUBECTL, SOURCE, test,
             (_namespace(dry_empty),
              Request(kubectl=("create", "--dry-run=server", "-f", "-", "-n", dry_empty),
                      stdin=valid_pod),
              Request(kubectl=("get", "pods", "-n", dry_empty, "-o",
                               "go-template={{range.items}}{{.metadata.name}}:{{end}}"))),
             Expect(exit_code=0, output_equals="")),
        Case("run_kubectl_create_filter_tests/only the labelled pod is created", KUBECTL,
             SOURCE, "run_kubectl_create_filter_tests",
             (_namespace(filtered),
              Request(kubectl=("create", "-l", "unique-label=bingbang", "-f", "-", "-n",
                               filtered), stdin=both),
              Request(kubectl=("get", "pods", "selector-test-pod", "-n", filtered, "-o",
                               "go-template={{.metadata.labels.name}}"))),
             Expect(exit_code=0, output_contains=("selector-test-pod",))),
        Case("run_kubectl_create_filter_tests/the other pod is not", KUBECTL, SOURCE,
             "run_kubectl_create_filter_tests",
             (_namespace(filtered_other),
              Request(kubectl=("create", "-l", "unique-label=bingbang", "-f", "-", "-n",
                               filtered_other), stdin=both),
              Request(kubectl=("get", "pods", "selector-test-pod-dont-apply", "-n",
                               filtered_other))),
             Expect(exit_code=1, output_contains=(
                 'pods "selector-test-pod-dont-apply" not found',))),
        Case("run_kubectl_create_error_tests/a pod posted to namespaces", KUBECTL, SOURCE,
             "run_kubectl_create_error_tests",
             (Request(kubectl=("create", "--raw", "/api/v1/namespaces", "-f", "-"),
                      stdin=valid_pod),),
             Expect(exit_code=1, output_contains=(
                 "the object provided is unrecognized (must be of type Namespace)",))),
    ]


CASES: list[Case] = _cases()
