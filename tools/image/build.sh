#!/usr/bin/env bash
# `npm run image`: builds the container image tenantry:<version> from the Containerfile with buildah and
# writes it as an OCI archive, dist/tenantry-<version>.oci.tar. See usage() and README.md, "Container image".
set -euo pipefail

usage() {
  cat <<'EOF'
Usage: npm run image -- [options]

  --base IMAGE     the base image (the Containerfile's BASE; default docker.io/library/node:24-bookworm-slim)
  --local-base     build on tenantry-base:local, made here without any image registry: a Debian
                   bookworm root file system from apt's own mirror (debootstrap), the Node.js 24 of
                   node_modules/node and the npm running this script; made once, then reused while
                   its Node version matches
  --rebuild-base   with --local-base: make tenantry-base:local anew (newer Debian packages)
  --mirror URL     with --local-base: the Debian mirror (default: the first one apt is configured with)
  --output FILE    the OCI archive to write (default dist/tenantry-<version>.oci.tar); --no-archive: none

Needs buildah (and debootstrap for --local-base), as root or in `buildah unshare`.
EOF
}

root=$(cd "$(dirname "$0")/../.." && pwd -P)
cd "$root"
version=$(sed -n 's/^  "version": "\(.*\)",$/\1/p' packages/server/package.json)
[ -n "$version" ] || { echo "image: no version in packages/server/package.json" >&2; exit 1; }
image="tenantry:$version"
local_base=tenantry-base:local
base=""
use_local_base=false
rebuild_base=false
mirror=""
output="dist/tenantry-$version.oci.tar"
# RUN steps in a chroot: they need no OCI runtime or network namespace, so the build works in
# containers and sandboxes too. BUILDAH_ISOLATION chooses another.
isolation=${BUILDAH_ISOLATION:-chroot}
# Every image's creation time and every file's modification time: the same sources and base give
# the same layers.
timestamp=0

while [ $# -gt 0 ]; do
  case $1 in
    --base) base=${2:?--base needs an image}; shift 2 ;;
    --local-base) use_local_base=true; shift ;;
    --rebuild-base) rebuild_base=true; shift ;;
    --mirror) mirror=${2:?--mirror needs a URL}; shift 2 ;;
    --output) output=${2:?--output needs a file}; shift 2 ;;
    --no-archive) output=""; shift ;;
    -h | --help) usage; exit 0 ;;
    *) echo "image: unknown option $1" >&2; usage >&2; exit 2 ;;
  esac
done
if $use_local_base && [ -n "$base" ]; then
  echo "image: --base and --local-base exclude each other" >&2
  exit 2
fi
command -v buildah >/dev/null || { echo "image: needs buildah (Debian: apt-get install buildah)" >&2; exit 1; }

# The first mirror apt fetches Debian packages from, in either sources format; security and
# update suites live elsewhere and are skipped.
apt_mirror() {
  local file
  for file in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
    [ -f "$file" ] || continue
    awk '$1 == "deb" { sub(/^deb[ \t]+(\[[^]]*\][ \t]+)?/, ""); split($0, f, /[ \t]+/)
      if (f[2] !~ /-(security|updates|backports)$/) { print f[1]; exit } }' "$file"
  done
  for file in /etc/apt/sources.list.d/*.sources; do
    [ -f "$file" ] || continue
    awk 'BEGIN { RS = ""; FS = "\n" }
      { types = uris = suites = ""; enabled = 1
        for (n = 1; n <= NF; n++) {
          if ($n ~ /^Types:/) types = $n
          else if ($n ~ /^URIs:/) uris = $n
          else if ($n ~ /^Suites:/) suites = $n
          else if ($n ~ /^Enabled: *no/) enabled = 0
        }
        main = 0; n = split(suites, s, /[ \t]+/)
        for (i = 2; i <= n; i++) if (s[i] != "" && s[i] !~ /-(security|updates|backports)$/) main = 1
        if (enabled && main && types ~ /[ \t]deb([ \t]|$)/) { split(uris, u, /[ \t]+/); print u[2]; exit }
      }' "$file"
  done
}

# tenantry-base:local: what the official node:24-bookworm-slim image holds, made from local parts.
make_local_base() {
  local node=node_modules/node/bin/node npm_dir rootfs container mount node_version
  command -v debootstrap >/dev/null || { echo "image: --local-base needs debootstrap (Debian: apt-get install debootstrap)" >&2; exit 1; }
  # The `node` npm package is a dev dependency that downloads the official binary on install.
  if [ ! -f "$node" ] || ! head -c 4 "$node" | cmp -s - <(printf '\177ELF'); then
    echo "image: $node is not the Node.js binary (run npm ci in $root first)" >&2
    exit 1
  fi
  node_version=$("$node" --version)
  case $node_version in v24.*) ;; *) echo "image: $node is $node_version, not Node.js 24" >&2; exit 1 ;; esac
  if ! $rebuild_base && [ "$(buildah inspect --type image --format '{{index .OCIv1.Config.Labels "org.tenantry.node.version"}}' "$local_base" 2>/dev/null)" = "$node_version" ]; then
    echo "== $local_base (Node.js $node_version) is there already"
    return
  fi
  # npm for the Containerfile's `npm ci`: the one running this script (npm sets npm_execpath), else the one on PATH.
  npm_dir=$(dirname "$(dirname "$(readlink -f "${npm_execpath:-$(command -v npm)}")")")
  [ -f "$npm_dir/bin/npm-cli.js" ] || { echo "image: cannot find npm's own directory (found $npm_dir)" >&2; exit 1; }
  [ -n "$mirror" ] || mirror=$(apt_mirror | head -n 1)
  [ -n "$mirror" ] || { echo "image: apt has no Debian mirror configured; pass --mirror URL" >&2; exit 1; }

  echo "== $local_base: Debian bookworm (debootstrap minbase), Node.js $node_version, npm $(node "$npm_dir/bin/npm-cli.js" --version)"
  rootfs=$(mktemp -d /var/tmp/tenantry-rootfs.XXXXXX)
  container=""
  # shellcheck disable=SC2064 # the names are known now and must be removed however the build ends
  trap "rm -rf '$rootfs'; [ -z \"\$container\" ] || buildah rm \"\$container\" >/dev/null 2>&1 || true" EXIT
  debootstrap --variant=minbase --components=main bookworm "$rootfs" "$mirror" >"$rootfs.log" 2>&1 || {
    tail -n 30 "$rootfs.log" >&2
    echo "image: debootstrap failed (full log: $rootfs.log)" >&2
    exit 1
  }
  rm -f "$rootfs.log"
  # What a container runtime provides, what names the build machine, and what apt downloaded.
  rm -rf "${rootfs:?}"/{dev,proc,sys,run,tmp}/* "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/cache/apt/*.bin \
    "$rootfs"/var/lib/apt/lists/* "$rootfs"/var/log/*.log "$rootfs"/var/log/apt/* "$rootfs"/etc/resolv.conf "$rootfs"/etc/hostname
  # The build machine's mirror is not the image user's: apt in the image gets its sources from them.
  rm -f "$rootfs"/etc/apt/sources.list
  : >"$rootfs/etc/machine-id"
  # As Debian's slim images: no manuals, documentation or translations, now or from later installs;
  # the packages' copyright files stay.
  printf '%s\n' 'path-exclude /usr/share/doc/*' 'path-include /usr/share/doc/*/copyright' 'path-exclude /usr/share/man/*' \
    'path-exclude /usr/share/info/*' 'path-exclude /usr/share/locale/*' 'path-exclude /usr/share/groff/*' \
    'path-exclude /usr/share/lintian/*' >"$rootfs/etc/dpkg/dpkg.cfg.d/slim"
  find "$rootfs/usr/share/doc" ! -type d ! -name copyright -delete
  find "$rootfs/usr/share/doc" -mindepth 1 -type d -empty -delete
  rm -rf "$rootfs"/usr/share/{man,info,locale,groff,lintian}/*

  container=$(buildah from scratch)
  mount=$(buildah mount "$container")
  tar -C "$rootfs" --numeric-owner -cf - . | tar -C "$mount" --numeric-owner -xpf -
  install -m 0755 "$node" "$mount/usr/local/bin/node"
  mkdir -p "$mount/usr/local/lib/node_modules"
  cp -a "$npm_dir" "$mount/usr/local/lib/node_modules/npm"
  ln -s ../lib/node_modules/npm/bin/npm-cli.js "$mount/usr/local/bin/npm"
  ln -s ../lib/node_modules/npm/bin/npx-cli.js "$mount/usr/local/bin/npx"
  buildah umount "$container" >/dev/null
  buildah config --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin --env NODE_VERSION="${node_version#v}" \
    --cmd node --label org.tenantry.node.version="$node_version" "$container"
  buildah commit --quiet --timestamp "$timestamp" --identity-label=false --rm "$container" "$local_base" >/dev/null
  container=""
  rm -rf "$rootfs"
  trap - EXIT
  echo "== $local_base made"
}

build_args=()
if $use_local_base; then
  make_local_base
  base=$local_base
fi
[ -z "$base" ] || build_args+=(--build-arg "BASE=$base")
# Behind a TLS-inspecting proxy, npm in the build needs the proxy's authority, as on this machine.
if [ -n "${NODE_EXTRA_CA_CERTS:-}" ] && [ -f "$NODE_EXTRA_CA_CERTS" ]; then
  build_args+=(--volume "$NODE_EXTRA_CA_CERTS:/run/tenantry-build-ca.pem:ro" --build-arg NODE_EXTRA_CA_CERTS=/run/tenantry-build-ca.pem)
fi

echo "== $image (base ${base:-of the Containerfile})"
buildah bud --isolation "$isolation" --layers --timestamp "$timestamp" --identity-label=false --format docker \
  "${build_args[@]}" --tag "$image" --file Containerfile .
if [ -n "$output" ]; then
  mkdir -p "$(dirname "$output")"
  rm -f "$output"
  buildah push --quiet "$image" "oci-archive:$output:$image"
  echo "== $output ($(du -h "$output" | cut -f1))"
fi
