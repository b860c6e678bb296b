# kube-elevator's image: `elevator` (and `prefect`, for the worker) on Python 3.11 with the locked
# dependencies of the runtime and the tune and blocks extras (requirements/image.txt: the flows'
# cluster and credentials blocks work in the image). From the repository root:
#
#   docker build -t kube-elevator:0.1.0 .
#
# The build stage runs deployments/image/install.sh, the script tests/e2e/test_image.py runs on
# the files this recipe copies. The final stage holds only the virtual environment: no build
# tool, a numeric non-root user, and an exec-form entrypoint, so no shell is needed at run time.
# checkov:skip=CKV_DOCKER_2: no HEALTHCHECK: the image runs under Kubernetes, whose probes (deployments/kubernetes) check the process; Docker's HEALTHCHECK is ignored there, and which port answers depends on the command the pod runs
FROM python:3.11-slim-bookworm AS build
WORKDIR /src
COPY requirements/uv.txt requirements/build.txt requirements/image.txt requirements/
COPY pyproject.toml README.md ./
COPY flows flows
COPY tasks tasks
COPY fakes fakes
COPY kube_elevator kube_elevator
COPY deployments/image/install.sh deployments/image/
# Byte-compiled at build time: the root filesystem is read-only at run time.
RUN pip install --no-cache-dir --disable-pip-version-check --require-hashes --no-deps \
        -r requirements/uv.txt \
    && UV_NO_CACHE=1 UV_COMPILE_BYTECODE=1 \
        sh deployments/image/install.sh /opt/kube-elevator requirements/image.txt tune,blocks

FROM python:3.11-slim-bookworm
COPY --from=build /opt/kube-elevator /opt/kube-elevator
# Prefect writes its home (profiles, the ephemeral server's database) under $HOME: the manifests
# mount an emptyDir at /tmp.
ENV PATH=/opt/kube-elevator/bin:$PATH \
    HOME=/tmp \
    PREFECT_HOME=/tmp/prefect \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1
USER 10001:10001
ENTRYPOINT ["elevator"]
CMD ["--help"]
