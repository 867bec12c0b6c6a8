#!/usr/bin/env bash
# Builds an image with whichever engine is present: docker (when its daemon answers),
# then podman, then buildah; CONTAINER_ENGINE names one instead. Prints the build time
# and the image size.
#
#   hack/image-build.sh TAG [CONTEXT [CONTAINERFILE]]
#
#   BUILD_ARGS                    space-separated NAME=VALUE pairs passed as --build-arg
#   HEADROOM_BUILD_CGROUP_PARENT  cgroup parent for podman/buildah build steps (default:
#                                 headroom-build.slice under systemd, else /headroom-build)
set -euo pipefail

tag=${1:?usage: hack/image-build.sh TAG [CONTEXT [CONTAINERFILE]]}
context=${2:-.}
file=${3:-$context/Dockerfile}

engine=${CONTAINER_ENGINE:-}
if [ -z "$engine" ]; then
  if command -v docker >/dev/null && docker info >/dev/null 2>&1; then
    engine=docker
  elif command -v podman >/dev/null; then
    engine=podman
  elif command -v buildah >/dev/null; then
    engine=buildah
  else
    echo "image-build: no container engine; install docker, or podman/buildah with runc" \
      "(Debian: apt-get install podman buildah runc)" >&2
    exit 1
  fi
fi

# The host's hard open-files limit may sit below what engines ask for by default.
flags=(--tag "$tag" --file "$file" --ulimit nofile=16384:16384)
for arg in ${BUILD_ARGS:-}; do flags+=(--build-arg "$arg"); done
if [ "$engine" != docker ]; then
  if [ -d /run/systemd/system ]; then default_parent=headroom-build.slice; else default_parent=/headroom-build; fi
  flags+=(--network=host --cgroup-parent "${HEADROOM_BUILD_CGROUP_PARENT:-$default_parent}")
  # A proxy that re-signs TLS is trusted only through the machine's own local CAs and pip
  # configuration; the builder sees both (read-only) when the machine has them.
  if compgen -G "/usr/local/share/ca-certificates/*.crt" >/dev/null; then
    flags+=(--volume /usr/local/share/ca-certificates:/usr/local/share/ca-certificates:ro)
  fi
  if [ -f /etc/pip.conf ]; then flags+=(--volume /etc/pip.conf:/etc/pip.conf:ro); fi
fi

start=$(date +%s.%N)
case $engine in
  docker | podman) "$engine" build "${flags[@]}" "$context" ;;
  buildah) buildah bud "${flags[@]}" "$context" ;;
  *) echo "image-build: unknown CONTAINER_ENGINE=$engine (docker, podman or buildah)" >&2; exit 1 ;;
esac
seconds=$(python3 -c "import sys; print(f'{float(sys.argv[2]) - float(sys.argv[1]):.1f}')" "$start" "$(date +%s.%N)")
if [ "$engine" = buildah ]; then
  size=$(buildah images --noheading --format '{{.Size}}' "$tag")
else
  size=$(python3 -c "import sys; print(f'{int(sys.argv[1]) / 1e6:.0f} MB')" \
    "$("$engine" image inspect --format '{{.Size}}' "$tag")")
fi
echo "image-build: $tag built with $engine in ${seconds}s; size $size"
