#!/bin/sh
# Boots systemd as PID 1 of its own PID and mount namespaces over an overlay of the root
# filesystem whose upper layer is a tmpfs, with its own /run and /tmp: the recipe of
# ../shared/notes/real-systemd.md, word for word but for B, which the test names (its pid in the
# namespace is always 1, so $$ would give every boot the same folder on the host).
# NEVER boot systemd over the host's own filesystem: its boot empties /tmp.
#   run as: unshare --pid --fork --mount --propagation private ./boot.sh /var/tmp/mh-systemd-NAME
set -e
B="$1"                               # anything outside the host /tmp
case "$B" in /var/tmp/mh-systemd-?*) ;; *) echo "boot.sh: B must be /var/tmp/mh-systemd-NAME" >&2; exit 2 ;; esac
mkdir -p "$B"
mount -t tmpfs tmpfs "$B"
mkdir -p "$B/upper" "$B/work" "$B/root"
mount -t overlay overlay -o lowerdir=/,upperdir="$B/upper",workdir="$B/work" "$B/root"
mount -t proc proc "$B/root/proc"
mount --rbind /sys "$B/root/sys"
mount --rbind /dev "$B/root/dev"
mount -t tmpfs tmpfs "$B/root/run"
mount -t tmpfs tmpfs "$B/root/tmp"
cd "$B/root"
exec chroot . /lib/systemd/systemd --system --log-target=console --log-level=notice
