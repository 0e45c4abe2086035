#!/usr/bin/env bash
# Builds metaharness_<version>_<arch>.deb into BUILD_DIR from a staged tree, with Debian's own
# tools only (dpkg-shlibdeps for the library Depends, dpkg-deb); nothing is downloaded.
#   packaging/build-deb.sh SOURCE_DIR BUILD_DIR      (./run package calls it)
# The binaries come from a build of their own in BUILD_DIR/package/build: configured with the
# package's defaults (the vendor CLIs in /var/lib/metaharness/vendor), without tests or benches.
# Prints the path of the .deb on stdout.
set -euo pipefail

ROOT="$1"
OUT="$2"
JOBS="${MH_JOBS:-$(nproc)}"
WORK="$OUT/package"
CBUILD="$WORK/build"
STAGE="$WORK/root"
SHLIBS_DIR="$WORK/shlibs"
HERE="$ROOT/packaging"

say() { printf '%s\n' "package: $*" >&2; }

# ---- 1. the package's own build -------------------------------------------------------------
launcher=()
if command -v ccache >/dev/null 2>&1; then launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache); fi
if [ ! -f "$CBUILD/build.ninja" ]; then
  cmake -S "$ROOT" -B "$CBUILD" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo "${launcher[@]}" \
    -DMH_BUILD_TESTS=OFF -DMH_BUILD_BENCH=OFF \
    -DMH_DEFAULT_VENDOR_DIR=/var/lib/metaharness/vendor >/dev/null
fi
say "building metaharness, mh-exec and metaharness-supervisor in $CBUILD"
cmake --build "$CBUILD" -j "$JOBS" --target metaharness mh-exec metaharness-supervisor >&2
# The vendors' helper programs (a hook program a vendor's runs execute per call), as the binary
# lists them (VendorHelper in adapters/vendor_descriptor.hpp): each is a target of its own name.
mapfile -t HELPERS < <("$CBUILD/bin/metaharness" vendor list --helpers)
if [ "${#HELPERS[@]}" -gt 0 ]; then
  say "building the vendors' helper programs: ${HELPERS[*]}"
  cmake --build "$CBUILD" -j "$JOBS" --target "${HELPERS[@]}" >&2
fi
LIB_PROGRAMS=(metaharness-supervisor mh-exec "${HELPERS[@]}")

VERSION="$(sed -n 's/^CMAKE_PROJECT_VERSION:STATIC=//p' "$CBUILD/CMakeCache.txt")"
[ -n "$VERSION" ] || { say "no CMAKE_PROJECT_VERSION in $CBUILD/CMakeCache.txt"; exit 1; }
ARCH="$(dpkg --print-architecture)"
DEB="$OUT/metaharness_${VERSION}_${ARCH}.deb"

# ---- 2. the staged tree -----------------------------------------------------------------------
rm -rf "$STAGE"
umask 022
install -d "$STAGE/DEBIAN"
# Binaries, stripped (the debug information stays in the build tree).
# Under /usr/lib/metaharness: the supervisor, mh-exec (the last hop of a sandboxed run: it applies
# the vendor's environment after the drop, docs/containment.md) and the vendors' helpers.
install -D -m 0755 "$CBUILD/bin/metaharness" "$STAGE/usr/bin/metaharness"
STAGED=("$STAGE/usr/bin/metaharness")
for program in "${LIB_PROGRAMS[@]}"; do
  install -D -m 0755 "$CBUILD/bin/$program" "$STAGE/usr/lib/metaharness/$program"
  STAGED+=("$STAGE/usr/lib/metaharness/$program")
done
strip --strip-unneeded --remove-section=.comment --remove-section=.note "${STAGED[@]}"
# The units, the user, the directories, the config.
install -D -m 0644 "$ROOT/systemd/metaharness.service" "$STAGE/usr/lib/systemd/system/metaharness.service"
install -D -m 0644 "$ROOT/systemd/metaharness.socket" "$STAGE/usr/lib/systemd/system/metaharness.socket"
install -D -m 0644 "$ROOT/systemd/metaharness.sysusers.conf" "$STAGE/usr/lib/sysusers.d/metaharness.conf"
install -D -m 0644 "$ROOT/systemd/metaharness.tmpfiles.conf" "$STAGE/usr/lib/tmpfiles.d/metaharness.conf"
install -D -m 0644 "$HERE/metaharness.toml" "$STAGE/etc/metaharness/metaharness.toml"
# Documentation: the unit's Documentation= points here.
DOC="$STAGE/usr/share/doc/metaharness"
install -d "$DOC"
install -m 0644 "$ROOT"/docs/*.md "$ROOT/README.md" "$DOC/"
install -m 0644 "$ROOT/config/metaharness.toml" "$DOC/metaharness.toml.example"
install -m 0644 "$ROOT/config/nats-server-fleet.conf" "$DOC/nats-server-fleet.conf"
install -m 0644 "$HERE/debian/copyright" "$DOC/copyright"
# The ATIF validator and the schema it reads (docs/atif.md): an export can be checked on the host.
install -D -m 0755 "$ROOT/tests/cli/atif_validate.py" "$STAGE/usr/share/metaharness/atif/atif_validate.py"
install -D -m 0644 "$ROOT/docs/atif/atif-v1.8.schema.json" "$STAGE/usr/share/metaharness/atif/atif-v1.8.schema.json"

# ---- 3. the control files -----------------------------------------------------------------------
# dpkg-shlibdeps wants a debian/control of a source package to read; it needs nothing else.
rm -rf "$SHLIBS_DIR"
mkdir -p "$SHLIBS_DIR/debian"
printf 'Source: metaharness\n\nPackage: metaharness\nArchitecture: any\n' >"$SHLIBS_DIR/debian/control"
SHLIBS="$(cd "$SHLIBS_DIR" && dpkg-shlibdeps -O "${STAGED[@]/#/-e}" 2>/dev/null | sed -n 's/^shlibs:Depends=//p')"
[ -n "$SHLIBS" ] || { say "dpkg-shlibdeps found no library dependencies"; exit 1; }
INSTALLED_SIZE="$(du -sk --exclude=DEBIAN "$STAGE" | cut -f1)"
sed -e "s|@VERSION@|$VERSION|" -e "s|@ARCH@|$ARCH|" -e "s|@SHLIBS@|$SHLIBS|" \
  -e "s|@INSTALLED_SIZE@|$INSTALLED_SIZE|" "$HERE/debian/control.in" >"$STAGE/DEBIAN/control"
echo /etc/metaharness/metaharness.toml >"$STAGE/DEBIAN/conffiles"
for script in postinst prerm postrm; do
  install -m 0755 "$HERE/debian/$script" "$STAGE/DEBIAN/$script"
done
(cd "$STAGE" && find . -path ./DEBIAN -prune -o -type f -printf '%P\0' | LC_ALL=C sort -z |
  xargs -0 md5sum >DEBIAN/md5sums)
chmod 0644 "$STAGE/DEBIAN/md5sums" "$STAGE/DEBIAN/conffiles" "$STAGE/DEBIAN/control"

# ---- 4. the .deb ---------------------------------------------------------------------------------
# The archive's own timestamps from the commit (dpkg-deb reads SOURCE_DATE_EPOCH).
if epoch="$(git -C "$ROOT" log -1 --format=%ct 2>/dev/null)" && [ -n "$epoch" ]; then
  export SOURCE_DATE_EPOCH="$epoch"
fi
rm -f "$DEB"
dpkg-deb --root-owner-group -Zxz --build "$STAGE" "$DEB" >&2
say "built $DEB"
echo "$DEB"
