# One image for both Headroom processes; the Deployment picks one by command:
# headroom-webhook or headroom-reconciler.
# Any Debian-based image whose python3 is 3.11 works as the base: the official python
# image by default, or a local Debian bookworm root filesystem (make e2e builds one).
ARG PYTHON_IMAGE=python:3.11-slim-bookworm

# Builder: install the package and its dependencies into a self-contained venv.
FROM ${PYTHON_IMAGE} AS builder
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1
# The official python images carry pip; Debian's own python3 does not, so the builder
# (and only the builder) takes Debian's.
# hadolint ignore=DL3008
RUN python3 -m pip --version >/dev/null 2>&1 \
    || { apt-get update \
         && apt-get install -y --no-install-recommends python3-pip \
         && rm -rf /var/lib/apt/lists/*; }
WORKDIR /src
# The venv gets no pip of its own: the runtime image needs no installer.
RUN python3 -m venv --without-pip /opt/headroom
COPY pyproject.toml README.md ./
COPY app ./app
COPY certs ./certs
COPY webhook ./webhook
COPY reconciler ./reconciler
# pip compiles bytecode at install time, so the read-only runtime never has to.
RUN python3 -m pip --python /opt/headroom/bin/python install --no-cache-dir .

# Runtime: the Python runtime and the venv only; no pip, no compilers, no sources.
FROM ${PYTHON_IMAGE}
RUN if python3 -m pip --version >/dev/null 2>&1; then \
      python3 -m pip uninstall --yes --no-cache-dir pip setuptools wheel; \
    fi
COPY --from=builder /opt/headroom /opt/headroom
ENV PATH=/opt/headroom/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1
# A numeric uid lets the kubelet verify runAsNonRoot without an /etc/passwd entry.
USER 65532:65532
CMD ["headroom-reconciler"]
