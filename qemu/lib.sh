# SPDX-License-Identifier: GPL-2.0
# Shared helpers for the qemu/ scripts: cache location, mirror discovery, logging.
# Sourced, never executed.

set -euo pipefail

ROXE_TOP=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# Caches live outside the clone so CI runs and later sessions reuse them.
ROXE_CACHE=${ROXE_CACHE:-/var/cache/roxe}
mkdir -p "$ROXE_CACHE"

log() { printf '[%(%H:%M:%S)T] %s\n' -1 "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

# The Debian mirror this machine is configured for, read at run time: never written into a file
# of the project.
debian_mirror() {
	local f=/etc/apt/sources.list.d/debian.sources uri=""
	if [ -r "$f" ]; then
		uri=$(awk '/^URIs:/ { for (i = 2; i <= NF; i++) if ($i !~ /security/) { print $i; exit } }' "$f")
	fi
	if [ -z "$uri" ] && [ -r /etc/apt/sources.list ]; then
		uri=$(awk '$1 == "deb" && $3 !~ /security/ && $2 !~ /security/ { print $2; exit }' /etc/apt/sources.list)
	fi
	[ -n "$uri" ] || die "cannot find the Debian mirror in $f"
	printf '%s\n' "${uri%/}"
}

# Short content hash of stdin, used as a cache key.
key_of() { sha256sum | cut -c1-16; }

# Serialise heavy steps (two cores: never two kernel builds at once).
with_lock() {
	local name=$1; shift
	exec {lockfd}>"$ROXE_CACHE/.$name.lock"
	flock "$lockfd"
	"$@"
	local rc=$?
	exec {lockfd}>&-
	return $rc
}

# Run a command inside the build root (Debian's toolchain): trixie's, or with ROXE_SUITE=sid
# unstable's, whose kernels are built by unstable's compilers (make matrix). A kernel prepared in
# the sid root says so in its `suite` file, and use_kernel_suite selects the root for it.
ROXE_SUITE_GIVEN=${ROXE_SUITE:+1}
ROXE_SUITE=${ROXE_SUITE:-trixie}
buildroot_link() {
	case "$1" in
	trixie) echo "$ROXE_CACHE/buildroot" ;;
	sid) echo "$ROXE_CACHE/sidroot" ;;
	*) die "unknown build root suite $1" ;;
	esac
}
BUILDROOT_LINK=$(buildroot_link "$ROXE_SUITE")
ROXE_TOOLCHAIN_BIN=${ROXE_TOOLCHAIN_BIN:-}
# debian_cc KERNEL_TREE: the make arguments that name the C compiler Debian built the kernel with
# (from its CONFIG_CC_VERSION_TEXT, e.g. CC=x86_64-linux-gnu-gcc-14 HOSTCC=gcc-14).
debian_cc() {
	local cc
	cc=$(sed -n 's/^CONFIG_CC_VERSION_TEXT="\([^ ]*\) .*/\1/p' "$1/.config")
	[ -n "$cc" ] || die "no CONFIG_CC_VERSION_TEXT in $1/.config"
	echo "CC=$cc HOSTCC=${cc#x86_64-linux-gnu-}"
}

# use_kernel_suite KERNEL_DIR: run in_buildroot in the root KERNEL_DIR was prepared with, and with
# the Rust toolchain it was built with (its `toolchain-bin` file, when not the root's own).
use_kernel_suite() {
	local suite=trixie
	[ -f "$1/suite" ] && suite=$(cat "$1/suite")
	ROXE_SUITE=$suite
	BUILDROOT_LINK=$(buildroot_link "$suite")
	ROXE_TOOLCHAIN_BIN=""
	[ -f "$1/toolchain-bin" ] && ROXE_TOOLCHAIN_BIN=$(cat "$1/toolchain-bin")
	export ROXE_SUITE ROXE_TOOLCHAIN_BIN
}
in_buildroot() {
	local root
	root=$(readlink -f "$BUILDROOT_LINK")
	[ -d "$root" ] || die "no build root: run qemu/buildroot.sh"
	mount_buildroot "$root"
	# A kernel built with another Rust toolchain than the root's (ROXE_TOOLCHAIN_BIN, set by
	# use_kernel_suite from the kernel's `toolchain-bin` file) finds it first on PATH; bindgen from
	# crates.io loads the root's libclang.
	chroot "$root" /usr/bin/env -i HOME=/root \
		PATH=${ROXE_TOOLCHAIN_BIN:+$ROXE_TOOLCHAIN_BIN:}/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
		${ROXE_TOOLCHAIN_BIN:+LIBCLANG_PATH=/usr/lib/llvm-19/lib} LANG=C.UTF-8 "$@"
}

# The build root sees the project and the caches at the same paths as the host, so that paths in
# build output (Makefiles, .cmd files) are valid on both sides.
mount_buildroot() {
	local root=$1 d
	for d in proc sys dev; do
		mountpoint -q "$root/$d" || mount --rbind "/$d" "$root/$d"
	done
	for d in "$ROXE_CACHE" /work /tmp; do
		mkdir -p "$root$d"
		mountpoint -q "$root$d" || mount --rbind "$d" "$root$d"
	done
	# Clones may live anywhere (CI clones into a temporary directory): bind the project too.
	case "$ROXE_TOP" in
	/work/*|/tmp/*|"$ROXE_CACHE"/*) ;;
	*)
		# A bind left by an earlier clone at the same path keeps showing that (deleted) clone:
		# rebind unless the mount point is this very directory.
		if mountpoint -q "$root$ROXE_TOP" && ! [ "$root$ROXE_TOP" -ef "$ROXE_TOP" ]; then
			umount -l "$root$ROXE_TOP"
		fi
		mkdir -p "$root$ROXE_TOP"
		mountpoint -q "$root$ROXE_TOP" || mount --rbind "$ROXE_TOP" "$root$ROXE_TOP"
		;;
	esac
}

# flavour_kernel FLAVOUR: the cache link of a harness kernel flavour: debug, debug-rustup (the same
# debug kernel built with this machine's rustup toolchain, make matrix), debug-rt (the same with
# PREEMPT_RT, make matrix), stock, or stock-RELEASE
# (a Debian kernel of make matrix, prepared by `qemu/kernel-stock.sh RELEASE`).
flavour_kernel() {
	case "$1" in
	debug) echo "$ROXE_CACHE/kernel-debug" ;;
	debug-rustup) echo "$ROXE_CACHE/kernel-rustup-debug" ;;
	debug-rt) echo "$ROXE_CACHE/kernel-rt-debug" ;;
	stock) echo "$ROXE_CACHE/kernel-stock" ;;
	stock-*) echo "$ROXE_CACHE/matrix-${1#stock-}" ;;
	*) die "unknown flavour $1" ;;
	esac
}

# module_sources DEST: mirrors the files a module build reads (Kbuild, rust/, drivers/, the
# harness's test modules, the protocol crate) into DEST, leaving build products out.
module_sources() {
	rsync -a --delete --exclude '*.o' --exclude '*.ko' --exclude '*.cmd' --exclude '*.mod*' \
		--exclude 'generated' --exclude '.*.d' --exclude 'modules.order' --exclude 'Module.symvers' \
		--include 'Kbuild' --include 'Makefile' \
		--include 'rust/***' --include 'drivers/***' --include 'qemu/' --include 'qemu/selftest/***' --include 'qemu/kverbs/***' \
		--include 'tools/' --include 'tools/proto/***' --exclude '*' \
		"$ROXE_TOP/" "$1/"
}

# kernel_make_args FLAVOUR KERNEL_TREE: the compiler arguments of make for modules of FLAVOUR: the
# debug kernel is built with clang, Debian's with the gcc its .config names.
kernel_make_args() {
	case "$1" in
	debug*) echo "LLVM=-19" ;;
	*) debian_cc "$2" ;;
	esac
}

# Deletes cache entries matching "$ROXE_CACHE/$1-*" except "$2" (and its .complete marker's
# directory): outdated kernels and build roots whose key changed. The build root has the project
# bind-mounted inside, and a bind mount of the same disk does not stop `rm --one-file-system`, so
# everything below is unmounted first and nothing is deleted while anything is still mounted.
prune_old() {
	local prefix=$1 keep=$2 d m
	for d in "$ROXE_CACHE/$prefix"-*; do
		[ -d "$d" ] && [ "$d" != "$keep" ] || continue
		{ findmnt -rn -o TARGET | grep "^$d/" || true; } | sort -r | while read -r m; do
			umount -R "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || true
		done
		if findmnt -rn -o TARGET | grep -q "^$d/"; then
			log "not pruning $d: still mounted"
			continue
		fi
		log "pruning outdated $d"
		rm -rf --one-file-system "$d"
	done
}

# newest_release FLAVOUR: the newest release of Debian's kernel flavour FLAVOUR (rt-amd64,
# cloud-amd64, ...) that the build root's suites offer, or nothing.
newest_release() {
	in_buildroot apt-cache search --names-only \
		"^linux-headers-[0-9]+\\.[0-9]+\\.[0-9]+\\+deb[0-9]+-$1\$" | awk '{print $1}' |
		sed 's/^linux-headers-//' | sort -V | tail -1
}

# download_debs DIR IMAGE KEY WHAT PKG...: Debian's packages PKG (name or name=version), with
# every dependency the guest image IMAGE lacks (apt resolves them in the build root against the
# image's own dpkg status), downloaded into DIR, unless DIR already holds them for KEY. For guests
# that install packages as a user does (they have no network). WHAT names them in the log.
download_debs() {
	local dir img=$2 key=$3 what=$4; dir=$(realpath -m "$1"); shift 4
	[ "$(cat "$dir/.key" 2>/dev/null)" = "$key" ] && return 0
	log "downloading $what ($*)"
	rm -rf "$dir" "$dir.status"
	mkdir -p "$dir/partial"
	debugfs -R 'cat /var/lib/dpkg/status' "$img" >"$dir.status" 2>/dev/null
	grep -q '^Package: ' "$dir.status" || die "cannot read the guest image's dpkg status"
	in_buildroot timeout 1800 apt-get install --download-only -y -q --no-install-recommends \
		-o Dir::State::status="$dir.status" -o Dir::Cache::archives="$dir" \
		-o APT::Sandbox::User=root -o Debug::NoLocking=1 "$@" >"$dir.log" 2>&1 ||
		{ tail -20 "$dir.log"; die "cannot download $what"; }
	rm -rf "$dir/partial" "$dir/lock"
	ls "$dir"/*.deb >/dev/null 2>&1 || die "no packages downloaded (see $dir.log)"
	echo "$key" >"$dir/.key"
}
