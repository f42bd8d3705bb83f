# SPDX-License-Identifier: GPL-2.0
# roxe: a soft RoCEv2 HCA in Rust.
#
#   make run     build what is missing, boot Debian's stock kernel in QEMU, load roxe, show it
#                working with stock rdma-core tools
#   make test    host tests, lint, then the QEMU suite on the debug kernel and Debian's; ends
#                with "N passed, N failed"
#   make         build the modules (against KDIR= if given, else the harness's debug kernel)
#   make install build roxe.ko for KDIR (default: the running kernel) and install it, then depmod
#
# Caches (kernels, build root, guest image) live in ROXE_CACHE (default /var/cache/roxe), keyed by
# their inputs. See README.md and Documentation/testing.md.

ROXE_CACHE ?= /var/cache/roxe
export ROXE_CACHE
Q := qemu

.PHONY: all modules module install dkms deps kernels kernel-debug kernel-stock image hosttest lint fmt qemu-test test run baseline pyverbs reliability sweep \
	bench soak probes matrix ci-recipe ulp fuzz verbs-fuzz nfs blktests blktests-stock clean distclean

ifneq ($(KDIR),)
# A kernel tree of the user's own (Rust-enabled, prepared with `make modules_prepare`), built with
# the compiler that is on PATH. Pass LLVM=1 if that kernel was built with clang.
all modules:
	$(MAKE) -C $(KDIR) M=$(CURDIR) modules
clean:
	$(MAKE) -C $(KDIR) M=$(CURDIR) clean
else
all modules: kernel-debug
	$(Q)/build-module.sh debug
clean:
	rm -rf build
endif

# roxe.ko alone, for the kernel whose tree is KDIR (default: the running kernel's build directory),
# and its installation into that kernel's modules (Documentation/install.md): INSTALL_MOD_DIR under
# /lib/modules/RELEASE of DESTDIR or INSTALL_MOD_PATH (both empty: this system), then depmod.
# DKMS builds `module` (dkms.conf). The kernel's own modules_install is not used: it would also
# install the harness's test modules that Kbuild lists.
INSTALL_KDIR = $(or $(KDIR),/lib/modules/$(shell uname -r)/build)
INSTALL_ROOT = $(DESTDIR)$(INSTALL_MOD_PATH)
INSTALL_MOD_DIR ?= extra
DEPMOD ?= depmod
module:
	@test -f $(INSTALL_KDIR)/rust/libkernel.rmeta || { \
		echo "$(INSTALL_KDIR) has no Rust metadata (rust/libkernel.rmeta): prepare a tree with"; \
		echo "tools/rust-kernel-prep and pass it as KDIR= (Documentation/install.md)"; exit 1; } >&2
	$(MAKE) -C $(INSTALL_KDIR) M=$(CURDIR) roxe.ko
install: module
	@rel=$$(cat $(INSTALL_KDIR)/include/config/kernel.release) && \
	dir=$(INSTALL_ROOT)/lib/modules/$$rel/$(INSTALL_MOD_DIR) && \
	echo "  INSTALL $$dir/roxe.ko" && install -D -m 0644 roxe.ko $$dir/roxe.ko && \
	echo "  DEPMOD  $$rel" && $(DEPMOD) -a $(if $(INSTALL_ROOT),-b $(INSTALL_ROOT)) $$rel

deps:
	$(Q)/host-deps.sh
	$(Q)/buildroot.sh

kernel-debug: deps
	$(Q)/kernel-debug.sh >/dev/null

kernel-stock: deps
	$(Q)/kernel-stock.sh >/dev/null

kernels: kernel-debug kernel-stock

image: deps
	$(Q)/guest-image.sh >/dev/null

hosttest:
	tools/hosttest.sh

# rustfmt --check and clippy (the kernel's lint set, warnings as errors); `make fmt` reformats.
lint: deps kernel-stock
	tools/lint.sh

fmt: deps
	tools/lint.sh fix

qemu-test: kernels image
	$(Q)/test-all.sh --qemu-only

# Long forms, run before resolving the issues they serve (Documentation/testing.md).
baseline: deps
	$(Q)/test-all.sh --list qemu/tests/baseline.list

pyverbs: deps
	$(Q)/test-all.sh --list qemu/tests/pyverbs.list

# RC under netem loss, duplication and reordering (qemu/tests/reliability.list).
reliability: deps
	$(Q)/test-all.sh --list qemu/tests/reliability.list

# Mixed traffic for 30 minutes, then the hostile-user fuzzer for 10 (as uid 65534), then the
# duplicate-READ and ODP-miss floods for 30 s each, on the debug kernel, and the device tick with
# 65536 idle QPs on Debian's kernel (qemu/tests/soak.list). make test runs the soak for 60 s and
# the floods for 10 s on Debian's kernel (`loopback-stock`, `isolation-stock`), the fuzzer for
# 30 s on the debug kernel (`core-debug`), the tick with 4096 QPs on both.
soak: deps
	$(Q)/test-all.sh --list qemu/tests/soak.list

# The checks make test runs on Debian's kernel only, on the debug kernel too: hostile-producer,
# kverbs-check, remote-probe, user-sizes, peer-check, atomic-write, loopback traffic of every
# tool, the device's lifecycle, the verbs' errnos, ODP, rdma_cm, the fuzzer for 60 s, the
# teardowns by link and veth delete, netns and sq-order (qemu/tests/probes.list).
probes: deps
	$(Q)/test-all.sh --list qemu/tests/probes.list

# NFS over RDMA between two VMs, every pairing of roxe and rdma_rxe, 256 MiB of verified fio
# writes each (qemu/tests/nfs.list; make test runs two pairings with 16 MiB).
nfs: deps
	$(Q)/test-all.sh --list qemu/tests/nfs.list

# blktests, unmodified, on the debug kernel: ./check nvme, srp and rnbd with nvme_trtype=rdma on roxe
# (through rxe_compat), rdma_rxe and siw, each srp test and each long nvme test in a boot of its
# own (qemu/tests/blktests.list); the verdicts, read from each boot's ./check output (a boot
# stopped by its timeout keeps those it reached), side by side into Documentation/testing.md.
# Fails if a test that passed on rdma_rxe or siw did not pass on roxe. `blktests-stock`: the nvme
# group on Debian's kernel, several times faster under TCG. `make test` runs a short subset on
# the stock kernel (`blktests-nvme`).
blktests_report = python3 tools/blktests_report.py --marker $(1) Documentation/testing.md \
	$$(for d in roxe rxe siw; do printf '%s=%s ' $$d \
		"$$(ls build/vm/$(1)-$$d-*/vm0/blktests-$$d.log 2>/dev/null | paste -sd,)"; done)
blktests: deps
	$(Q)/test-all.sh --list qemu/tests/blktests.list; rc=$$?; \
		$(call blktests_report,blktests-debug) && exit $$rc
blktests-stock: deps
	$(Q)/test-all.sh --list qemu/tests/blktests-stock.list; rc=$$?; \
		$(call blktests_report,blktests-stock) && exit $$rc

# DKMS on Debian's kernel in a guest: dkms, the headers and the Rust toolchain installed from
# Debian's packages, `dkms install` (the Rust metadata regenerated by tools/rust-kernel-prep),
# modprobe, traffic, `dkms remove` (qemu/tests/dkms.sh, qemu/dkms-debs.sh).
dkms: deps
	$(Q)/dkms-debs.sh >/dev/null
	$(Q)/test-all.sh --list qemu/tests/dkms.list

# The long forms of the upper-layer protocol tests (iSER, RDS): data integrity under load between
# two VMs, roxe-roxe and with rdma_rxe on one side (qemu/tests/ulp-long.list).
ulp: deps
	$(Q)/test-all.sh --list qemu/tests/ulp-long.list

# Documentation/install.md's CI recipe, its commands as written, in a guest on Debian's cloud
# kernel (qemu/ci-recipe.sh, qemu/tests/ci-recipe.sh).
ci-recipe: deps
	$(Q)/ci-recipe.sh

# The hostile-user fuzzer (tools/verbs-fuzz) alone, 10 minutes on the debug kernel as uid 65534:
# make soak's verbs-fuzz-long (qemu/tests/soak.list).
verbs-fuzz: deps
	$(Q)/test-all.sh --list qemu/tests/soak.list --only '^verbs-fuzz-long$$'

# The cargo-fuzz targets for FUZZ_SECONDS (default 30 minutes; `make test` runs 60 s).
FUZZ_SECONDS ?= 1800
fuzz:
	tools/fuzz.sh $(FUZZ_SECONDS)

# perftest's bandwidth tests over every size, 2 B to 8 MiB, on the debug kernel
# (qemu/tests/sweep.list).
sweep: deps
	$(Q)/test-all.sh --list qemu/tests/sweep.list

# The stock-kernel tests of make test on Debian's other Rust-enabled kernels (the newest of each
# trixie-backports series, and unstable's newest, built in an unstable build root), each prepared
# like the stock kernel; results in qemu/kernels.lock.
matrix: deps
	$(Q)/matrix.sh

# roxe against rdma_rxe and siw, one and two VMs, with the guest's memcpy, iperf3's TCP, CPU per
# GiB, QP scaling and every 64 KiB figure checked by a second method: on the stock kernel
# (Documentation/bench/) and on a second kernel of the matrix (Documentation/bench/RELEASE/).
BENCH_ROUNDS ?= 5
BENCH_SECOND_KERNEL ?= 7.2.12+deb13-amd64
bench: deps
	tools/bench.sh --rounds $(BENCH_ROUNDS)
	tools/bench.sh --rounds $(BENCH_ROUNDS) --kernel $(BENCH_SECOND_KERNEL)

test: deps
	$(Q)/test-all.sh

run: kernel-stock image
	$(Q)/build-module.sh stock
	$(Q)/run-vm.sh --flavour stock --script qemu/tests/demo.sh --name demo --timeout 300 && \
		cat build/vm/demo/vm0/demo.txt

distclean: clean
	$(Q)/clean-cache.sh
