# One image for both Headroom processes; the Deployment picks one by command:
# headroom-webhook or headroom-reconciler.
# The base is any Debian bookworm image with apt: Debian's own by default, or a local
# bookworm root filesystem (make e2e builds one). It only builds; nothing of it ships.
ARG BASE_IMAGE=debian:bookworm-slim

FROM ${BASE_IMAGE} AS builder
SHELL ["/bin/bash", "-o", "pipefail", "-c"]
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1
# The runtime's root filesystem: Debian's Python 3.11 and the libraries it and the wheels
# load, unpacked rather than installed, so no shell, package manager or maintainer script
# ships. Left out: the stdlib modules Headroom never imports that need more libraries
# (curses, readline, dbm, sqlite3, nis, crypt), documentation, translations and gconv.
# Debian ships no bytecode (its install scripts compile it), so it is compiled here once:
# unchecked, as nothing on a read-only root filesystem can change the sources under it.
# hadolint ignore=DL3003,DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends python3 python3-pip \
    && mkdir /debs /rootfs \
    && cd /debs \
    && apt-get download libc6 libgcc-s1 libstdc++6 libssl3 zlib1g libexpat1 libffi8 \
       libbz2-1.0 liblzma5 libuuid1 python3.11-minimal libpython3.11-minimal \
       libpython3.11-stdlib python3-minimal \
    && for deb in /debs/*.deb; do dpkg-deb --extract "$deb" /rootfs; done \
    && rm -rf /debs /var/lib/apt/lists/* \
    && cd /rootfs \
    && rm -rf usr/share/doc usr/share/man usr/share/lintian usr/share/locale usr/share/gdb \
       usr/lib/x86_64-linux-gnu/gconv usr/share/binfmts \
    && mkdir -p -m 1777 tmp \
    && mkdir -p etc \
    && printf 'root:x:0:0::/root:/sbin/nologin\nnonroot:x:65532:65532::/home/nonroot:/sbin/nologin\n' > etc/passwd \
    && printf 'root:x:0:\nnonroot:x:65532:\n' > etc/group \
    && python3 -m compileall -q --invalidation-mode unchecked-hash -s /rootfs -p / \
       /rootfs/usr/lib/python3.11
WORKDIR /src
# The venv gets no pip of its own: the runtime image needs no installer.
RUN python3 -m venv --without-pip /opt/headroom
COPY pyproject.toml README.md ./
COPY app ./app
COPY certs ./certs
COPY webhook ./webhook
COPY reconciler ./reconciler
# The Kubernetes client's generated API classes and models (about 120 MB, 95% of it) are
# loaded only on first use, and Headroom never uses them: it sends its own JSON over the
# client's configured transport. Their packages' lazy indexes stay; the image then checks
# that both processes import on the runtime's own root filesystem.
# hadolint ignore=DL3003
RUN python3 -m pip --python /opt/headroom/bin/python install --no-cache-dir --no-compile . \
    && cd /opt/headroom/lib/python3.11/site-packages \
    && find kubernetes -path '*/client/api/*' -o -path '*/client/models/*' -o -name '*_test.py' \
       | grep -v '/__init__\.py$' | xargs rm -f \
    && python3 -m compileall -q --invalidation-mode unchecked-hash /opt/headroom/lib \
    && cp -a /opt/headroom /rootfs/opt-check \
    && mkdir -p /rootfs/opt \
    && mv /rootfs/opt-check /rootfs/opt/headroom \
    && chroot /rootfs /opt/headroom/bin/python -c \
       'import webhook.main, reconciler.main, certs.cli, ssl, ctypes, lzma, bz2, uuid, decimal' \
    && rm -rf /rootfs/opt/headroom

FROM scratch
COPY --from=builder /rootfs /
COPY --from=builder /opt/headroom /opt/headroom
ENV PATH=/opt/headroom/bin:/usr/bin \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1
# A numeric uid lets the kubelet verify runAsNonRoot; /etc/passwd names it too.
USER 65532:65532
CMD ["headroom-reconciler"]
