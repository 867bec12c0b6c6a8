# Debian helpers shared by the build scripts (sourced; they define DEBIAN_SUITE and
# log()): the machine's apt source, unpacking a pinned package without installing it,
# and a minimal root filesystem made with debootstrap.

# The first apt source of the suite's main component: its URI and keyring.
apt_source() {
  python3 - "$DEBIAN_SUITE" <<'PY'
import glob
import sys

suite = sys.argv[1]


def stanzas(text):
    for block in text.split("\n\n"):
        fields, key = {}, None
        for line in block.splitlines():
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            if line[0].isspace() and key:
                fields[key] += " " + line.strip()
                continue
            key, _, value = line.partition(":")
            key = key.strip()
            fields[key] = value.strip()
        yield fields


def candidates():
    for path in sorted(glob.glob("/etc/apt/sources.list.d/*.sources")):
        for f in stanzas(open(path).read()):
            if f.get("Enabled", "yes").lower() == "no":
                continue
            yield (f.get("Types", "").split(), f.get("URIs", "").split(),
                   f.get("Suites", "").split(), f.get("Components", "").split(),
                   f.get("Signed-By", ""))
    for path in ["/etc/apt/sources.list", *sorted(glob.glob("/etc/apt/sources.list.d/*.list"))]:
        try:
            lines = open(path).read().splitlines()
        except FileNotFoundError:
            continue
        for line in lines:
            words = line.split("#", 1)[0].split()
            if len(words) < 4 or words[0] != "deb":
                continue
            keyring = ""
            if words[1].startswith("["):
                options = []
                while words and not words[0].endswith("]"):
                    options.append(words.pop(0))
                options.append(words.pop(0))
                words.insert(0, "deb")
                opts = " ".join(options).strip("[]").split()
                keyring = next((o.split("=", 1)[1] for o in opts if o.startswith("signed-by=")), "")
            yield ["deb"], [words[1]], [words[2]], words[3:], keyring


for types, uris, suites, components, keyring in candidates():
    if "deb" in types and suite in suites and "main" in components and uris:
        print(uris[0], keyring)
        sys.exit(0)
sys.exit(f"no apt source for {suite} main in /etc/apt/sources.list(.d); configure one")
PY
}

deb_unpack() {  # package version destination
  [ -f "$3/.complete" ] && return 0
  mkdir -p "$(dirname "$3")"
  # Two build scripts may unpack the same package at once (the registry): one does.
  (
    flock 8
    deb_unpack_locked "$@"
  ) 8>"$3.lock"
}

deb_unpack_locked() {
  local package=$1 version=$2 dest=$3 tmp
  [ -f "$dest/.complete" ] && return 0
  log "unpacking Debian package $package=$version"
  tmp=$(mktemp -d)
  # apt fetches as its own unprivileged user when it can write the directory.
  chown _apt "$tmp" 2>/dev/null || true
  # apt-get download needs the package lists (apt-get update) but installs nothing:
  # no service is started, no user is created.
  if ! (cd "$tmp" && apt-get download -qq "$package=$version" >/dev/null); then
    rm -rf "$tmp"
    log "apt-get download $package=$version failed: run apt-get update, or update the pin in hack/versions.env"
    return 1
  fi
  rm -rf "$dest"
  mkdir -p "$dest"
  dpkg-deb -x "$tmp"/*.deb "$dest"
  rm -rf "$tmp"
  touch "$dest/.complete"
}

debootstrap_tree() {  # directory packages(comma-separated) log; removes it on failure
  local rootfs=$1 packages=$2 logfile=$3 mirror keyring
  if [ "$(id -u)" != 0 ]; then
    log "debootstrap needs root to build a root filesystem"
    rm -rf "$rootfs"
    return 1
  fi
  read -r mirror keyring < <(apt_source)
  log "debootstrap $DEBIAN_SUITE (minbase + $packages) from the machine's apt source"
  mkdir -p "$rootfs"
  # The root directory's own mode goes into the image: mktemp's 0700 would lock every
  # non-root user out of the whole filesystem.
  chmod 0755 "$rootfs"
  debootstrap --variant=minbase --include="$packages" ${keyring:+--keyring="$keyring"} \
    "$DEBIAN_SUITE" "$rootfs" "$mirror" >"$logfile" 2>&1 || {
    log "debootstrap failed; log $logfile"
    rm -rf "$rootfs"
    return 1
  }
  # Slim like the distribution's own container images: no docs, manuals, locales, caches.
  cat >"$rootfs/etc/dpkg/dpkg.cfg.d/slim" <<'CFG'
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/man/*
path-exclude /usr/share/locale/*
path-exclude /usr/share/info/*
CFG
  find "$rootfs/usr/share/doc" -mindepth 1 -not -name copyright -not -type d -delete
  rm -rf "$rootfs"/usr/share/man/* "$rootfs"/usr/share/locale/* "$rootfs"/usr/share/info/* \
    "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/* "$rootfs"/var/log/*.log
}

tar_tree() {  # directory destination.tar: the tree, then the directory is removed
  mkdir -p "$(dirname "$2")"
  tar -C "$1" --numeric-owner -cf "$2.tmp" .
  rm -rf "$1"
  mv "$2.tmp" "$2"
}
