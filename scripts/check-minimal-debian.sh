#!/usr/bin/env bash
# The README's two commands on a minimal Debian 12, from a fresh clone, as a new user meets them:
# a `debootstrap --variant=minbase bookworm` root (no compiler, no cmake, no python), a clone of this
# repository's HEAD in it, then `scripts/fused run --prompt "In the beginning"` and `scripts/test`
# run as root inside it (they install what they need with apt-get). Needs root, debootstrap and a
# Debian mirror; takes ~30 minutes on 2 cores. Not part of CI (which runs on a prepared machine).
#   sudo scripts/check-minimal-debian.sh [ROOTDIR]      (default /tmp/fused-debian12)
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
root=${1:-/tmp/fused-debian12}
mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
command -v debootstrap >/dev/null || { apt-get update -qq && apt-get install -y -qq debootstrap; }
[ -x "$root/usr/bin/apt-get" ] || debootstrap --variant=minbase bookworm "$root" "$mirror"
cp /etc/resolv.conf "$root/etc/resolv.conf"
rm -rf "$root/root/fused"
git clone -q "$repo" "$root/root/fused"
mountpoint -q "$root/proc" || mount -t proc proc "$root/proc"
mountpoint -q "$root/dev" || mount --rbind /dev "$root/dev"  # with /dev/pts: the CLI tests use a pseudo-terminal
trap 'umount -R "$root/dev" 2>/dev/null; umount "$root/proc" 2>/dev/null || true' EXIT
chroot "$root" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root bash -c '
  set -e
  cd /root/fused
  scripts/fused run --prompt "In the beginning"
  scripts/test'
echo "check-minimal-debian: both README commands passed in $root"
