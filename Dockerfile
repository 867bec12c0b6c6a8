# One image for both Headroom processes; the Deployment picks one by command:
# headroom-webhook or headroom-reconciler.
ARG PYTHON_IMAGE=python:3.11-slim-bookworm

# Builder: install the package and its dependencies into a self-contained venv.
FROM ${PYTHON_IMAGE} AS builder
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1
WORKDIR /src
# The venv gets no pip of its own: the runtime image needs no installer.
RUN python -m venv --without-pip /opt/headroom
COPY pyproject.toml README.md ./
COPY app ./app
COPY certs ./certs
COPY webhook ./webhook
COPY reconciler ./reconciler
# pip compiles bytecode at install time, so the read-only runtime never has to.
RUN pip --python /opt/headroom/bin/python install --no-cache-dir .

# Runtime: the Python runtime and the venv only; no pip, no compilers, no sources.
FROM ${PYTHON_IMAGE}
RUN python -m pip uninstall --yes --no-cache-dir pip setuptools wheel
COPY --from=builder /opt/headroom /opt/headroom
ENV PATH=/opt/headroom/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1
# A numeric uid lets the kubelet verify runAsNonRoot without an /etc/passwd entry.
USER 65532:65532
CMD ["headroom-reconciler"]
