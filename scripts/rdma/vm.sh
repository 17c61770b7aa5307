#!/usr/bin/env bash
# scripts/rdma/vm.sh - run one command in a throwaway QEMU guest that has a
# Soft-RoCE device (rdma_rxe "rxe0"), for hosts whose kernel has no RDMA.
# dex's own launcher for `make check-rdma`, so CI on a clean clone needs
# nothing outside the repository (only Debian packages, see install_deps).
#
#   scripts/rdma/vm.sh [-v] [-m MiB] [-c CPUS] [-t SEC] [--setup] [--] COMMAND [ARG...]
#
# How: Debian's stock kernel (the package linux-image-amd64 depends on, fetched
# once with `apt-get download`) boots with a small busybox initramfs. The guest
# mounts the host's / read-only over 9p and the current directory read-write
# at the same path, loads rdma_rxe, creates rxe0 on dummy0 (10.77.0.1/24),
# then runs COMMAND (as root, in the host's userland via chroot) with
#   RXE_VM=1 RXE_DEV=rxe0 RXE_NETDEV=dummy0 RXE_IP=10.77.0.1 RXE_GID_INDEX=<n>
# COMMAND's stdout and stderr come back on our stdout and stderr (virtio
# serial ports); stdin is /dev/null. Guest /tmp, /run, /dev/shm are private.
#
# Exit status: COMMAND's own; 77 = cannot run here; 124 = timeout;
# 125 = the guest died while COMMAND ran.
#
# Environment (options win):
#   RXE_VM_MEM (MiB, default 1024)   RXE_VM_CPUS (default nproc, max 4)
#   RXE_VM_TIMEOUT (seconds, default 900; x3 under TCG unless set explicitly)
#   RXE_VM_ACCEL=auto|kvm|tcg        RXE_VM_VERBOSE=1 (console log on stderr)
#   DEX_RXE_VM_CACHE (default ~/.cache/dex-rxe-vm)   RXE_VM_KERNEL_PKG
set -u
PROG=dex-vm
note() { echo "$PROG: $*" >&2; }
cannot() { note "cannot run here: $*"; exit 77; }

MEM=${RXE_VM_MEM:-1024}
CPUS=${RXE_VM_CPUS:-$(n=$(nproc 2>/dev/null || echo 2); echo $(( n > 4 ? 4 : n )))}
LIMIT=${RXE_VM_TIMEOUT:-}
VERBOSE=${RXE_VM_VERBOSE:-0}
SETUP_ONLY=0
while [ $# -gt 0 ]; do
    case $1 in
        -m) MEM=$2; shift 2 ;;
        -c) CPUS=$2; shift 2 ;;
        -t) LIMIT=$2; shift 2 ;;
        -v) VERBOSE=1; shift ;;
        --setup) SETUP_ONLY=1; shift ;;
        -h|--help) sed -n '2,/^set -u/{/^set -u/d;s/^# \{0,1\}//;p}' "$0"; exit 0 ;;
        --) shift; break ;;
        -*) note "unknown option $1"; exit 2 ;;
        *) break ;;
    esac
done
[ $# -gt 0 ] || [ $SETUP_ONLY = 1 ] || { note "usage: $0 [options] [--] COMMAND [ARG...]"; exit 2; }

CACHE=${DEX_RXE_VM_CACHE:-${HOME:-/root}/.cache/dex-rxe-vm}
# Loaded in this order in the guest (modprobe pulls in ib_core etc.).
WANT="virtio_pci virtio_console 9pnet_virtio 9p dummy crc32_generic rdma_rxe ib_uverbs rdma_ucm"

# --------------------------------------------------------------- host tools
[ "$(uname -m)" = x86_64 ] || cannot "x86_64 hosts only"
QEMU=$(command -v qemu-system-x86_64) || cannot "no qemu-system-x86_64 (apt-get install qemu-system-x86)"
BB=
for b in /bin/busybox /usr/bin/busybox; do
    # A dynamic busybox would need the host's libc inside the initramfs.
    [ -x "$b" ] && [[ $(LC_ALL=C ldd "$b" 2>&1) == *"not a dynamic"* ]] && { BB=$b; break; }
done
[ -n "$BB" ] || cannot "no static busybox (apt-get install busybox-static)"
command -v dpkg-deb >/dev/null || cannot "no dpkg-deb"
mkdir -p "$CACHE" || cannot "cannot create $CACHE"

# ------------------------------------------------------------- guest's /init
INIT=$(cat <<'GUEST'
#!/bin/busybox sh
/bin/busybox mount -t devtmpfs dev /dev
exec </dev/console >/dev/console 2>&1
/bin/busybox --install -s /bin
PATH=/bin; export PATH
mount -t proc proc /proc; mount -t sysfs sys /sys
H=/host S=/ctl
stop() { sync; poweroff -f; }
broken() { echo "dex-vm-init: setup failed: $*"; [ -d $S ] && echo "$*" >$S/setup-failed 2>/dev/null; stop; }
O=trans=virtio,version=9p2000.L,msize=262144
for m in $(cat /modules.order); do modprobe $m || broken "modprobe $m"; done
mkdir -p $S && mount -t 9p -o $O ctl $S || broken "9p ctl"
: >$S/booted
. $S/env.sh
mount -t 9p -o $O,ro,cache=loose root $H || broken "9p host root"
mount -t proc proc $H/proc && mount -t sysfs sys $H/sys && mount -t devtmpfs dev $H/dev || broken "pseudo fs"
mkdir -p $H/dev/pts $H/dev/shm
mount -t devpts -o ptmxmode=666 devpts $H/dev/pts; mount -t tmpfs shm $H/dev/shm
for d in /tmp /run /var/tmp; do [ -d $H$d ] && mount -t tmpfs tmp $H$d; done
C=/run/dex-vm   # where the chrooted command sees the control folder
mkdir -p $H$C && mount --bind $S $H$C || broken "bind ctl"
if [ "$VM_CWD" != / ]; then
    # Under a private tmpfs (/tmp/...) the mount point does not exist yet.
    mkdir -p "$H$VM_CWD" 2>/dev/null
    mount -t 9p -o $O,cache=mmap cwd "$H$VM_CWD" || broken "9p $VM_CWD"
fi
ip link set lo up
ip link add dummy0 type dummy 2>/dev/null
ip addr add 10.77.0.1/24 dev dummy0 && ip link set dummy0 up || broken "dummy0"
chroot $H rdma link add rxe0 type rxe netdev dummy0 || broken "rdma link add rxe0 (is iproute2 installed on the host?)"
# The RoCEv2 GID for the IPv4 address shows up asynchronously.
gid=
for try in $(seq 100); do
    for f in /sys/class/infiniband/rxe0/ports/1/gids/*; do
        v=$(cat $f 2>/dev/null)
        [ "${v#0000:0000:0000:0000:0000:ffff:}" != "$v" ] && { gid=${f##*/}; break 2; }
    done
    sleep 0.1
done
[ -n "$gid" ] || broken "rxe0 has no IPv4 GID"
out= err=
for p in /sys/class/virtio-ports/vport*; do
    n=$(cat $p/name)
    [ "$n" = dex.out ] && out=/dev/${p##*/}
    [ "$n" = dex.err ] && err=/dev/${p##*/}
done
[ -n "$out" ] && [ -n "$err" ] || broken "no virtio serial ports"
echo "dex-vm-init: rxe0 up, gid index $gid, uptime $(cut -d' ' -f1 /proc/uptime)s"
echo "$gid" >$S/ready
RXE_GID_INDEX=$gid chroot $H /bin/bash $C/run.sh <$H/dev/null >$out 2>$err
echo $? >$S/status
echo "dex-vm-init: done at $(cut -d' ' -f1 /proc/uptime)s"
stop
GUEST
)

# ------------------------------------------------- kernel + initramfs (cached)
# Cache layout: $CACHE/<pkg>/{vmlinuz,kver,mods/} with just the module closure
# we need, decompressed; the 70 MB .deb and the 400 MB unpacked tree are dropped.
fetch_kernel() {
    local pkg=$1 dir=$2 tmp kver
    command -v apt-get >/dev/null || cannot "no cached kernel and no apt-get"
    note "fetching $pkg into $CACHE (once)"
    tmp=$(mktemp -d "$CACHE/tmp.XXXXXX") || cannot "cannot write $CACHE"
    if ! (cd "$tmp" && apt-get download "$pkg") >"$tmp/apt.log" 2>&1; then
        cat "$tmp/apt.log" >&2; rm -rf "$tmp"; cannot "apt-get download $pkg failed"
    fi
    dpkg-deb -x "$tmp"/*.deb "$tmp/x" || { rm -rf "$tmp"; cannot "cannot unpack $pkg"; }
    kver=$(ls "$tmp/x/lib/modules" | head -1)
    local mods=$tmp/x/lib/modules/$kver
    # The .deb ships no modules.dep (postinst makes it): build one.
    find "$mods" -name '*.ko.xz' -exec xz -d {} + 2>/dev/null
    find "$mods" -name '*.ko.zst' -exec zstd -q -d --rm {} + 2>/dev/null
    "$BB" depmod -b "$tmp/x" "$kver" || { rm -rf "$tmp"; cannot "depmod failed"; }
    mkdir -p "$tmp/keep/mods"
    # Closure of $WANT over modules.dep ("path: dep dep ...", paths relative).
    local -A seen=() ; local queue=() m line rel d
    for m in $WANT; do
        line=$(grep -E "/${m//_/[-_]}\.ko:" "$mods/modules.dep" | head -1)
        if [ -z "$line" ]; then
            grep -qE "/${m//_/[-_]}\.ko$" "$mods/modules.builtin" || { rm -rf "$tmp"; cannot "module $m missing in $pkg"; }
            continue
        fi
        queue+=("${line%%:*}")
    done
    while [ ${#queue[@]} -gt 0 ]; do
        rel=${queue[0]}; queue=("${queue[@]:1}")
        [ -n "${seen[$rel]:-}" ] && continue; seen[$rel]=1
        mkdir -p "$tmp/keep/mods/${rel%/*}"; cp "$mods/$rel" "$tmp/keep/mods/$rel"
        line=$(grep -F "$rel:" "$mods/modules.dep" | head -1)
        for d in ${line#*:}; do queue+=("$d"); done
    done
    cp "$mods"/modules.builtin* "$tmp/keep/mods/" 2>/dev/null
    cp "$tmp"/x/boot/vmlinuz-* "$tmp/keep/vmlinuz" || { rm -rf "$tmp"; cannot "no vmlinuz in $pkg"; }
    echo "$kver" >"$tmp/keep/kver"
    rm -rf "$dir"; mv "$tmp/keep" "$dir"; rm -rf "$tmp"
}

build_initrd() {   # $1 kernel dir -> sets INITRD
    local kdir=$1 kver tmp sum
    kver=$(cat "$kdir/kver")
    sum=$( { echo "$WANT"; echo "$INIT"; cat "$kdir/kver"; } | md5sum | cut -c1-10)
    INITRD=$kdir/initrd-$sum.gz
    [ -s "$INITRD" ] && return
    tmp=$(mktemp -d "$CACHE/tmp.XXXXXX") || cannot "cannot write $CACHE"
    mkdir -p "$tmp"/r/{bin,dev,proc,sys,host,lib/modules}
    cp "$BB" "$tmp/r/bin/busybox"
    cp -r "$kdir/mods" "$tmp/r/lib/modules/$kver"
    "$BB" depmod -b "$tmp/r" "$kver" || { rm -rf "$tmp"; cannot "depmod (initramfs) failed"; }
    echo "$WANT" | tr ' ' '\n' | grep . >"$tmp/r/modules.order"
    printf '%s\n' "$INIT" >"$tmp/r/init"; chmod 755 "$tmp/r/init"
    (cd "$tmp/r" && find . | "$BB" cpio -o -H newc 2>/dev/null) | gzip -1 >"$tmp/initrd" \
        || { rm -rf "$tmp"; cannot "cpio failed"; }
    rm -f "$kdir"/initrd-*.gz; mv "$tmp/initrd" "$INITRD"; rm -rf "$tmp"
}

T0=$(date +%s.%N)
elapsed() { echo "$(date +%s.%N) $T0" | awk '{printf "%.1f", $1 - $2}'; }
exec 8>"$CACHE/lock"; flock 8          # one setup at a time; runs themselves are parallel
rm -rf "$CACHE"/tmp.*
PKG=${RXE_VM_KERNEL_PKG:-}
if [ -z "$PKG" ]; then
    PKG=$(apt-cache depends linux-image-amd64 2>/dev/null | awk '$1 == "Depends:" && $2 ~ /^linux-image-/ {print $2; exit}')
    # Offline (no apt lists): fall back to whatever kernel is already cached.
    [ -n "$PKG" ] || PKG=$(ls -t "$CACHE" 2>/dev/null | grep '^linux-image-' | head -1)
    [ -n "$PKG" ] || cannot "cannot resolve linux-image-amd64 (apt-get update?)"
fi
KDIR=$CACHE/$PKG
[ -s "$KDIR/vmlinuz" ] && [ -s "$KDIR/kver" ] || fetch_kernel "$PKG" "$KDIR"
build_initrd "$KDIR"
flock -u 8; exec 8>&-
[ "$VERBOSE" = 1 ] && note "kernel $(cat "$KDIR/kver") and initramfs ready after $(elapsed)s"
[ $SETUP_ONLY = 1 ] && { note "cache ready: $KDIR"; exit 0; }

# ---------------------------------------------------------------- accelerator
# kvm_pvm (this project's dev machines) cannot boot a stock kernel at a usable
# speed, so it counts as "no KVM". With plain KVM, a guest that is not up in
# 60 s is retried once under TCG.
ACCEL=${RXE_VM_ACCEL:-auto} RETRY_TCG=0
if [ "$ACCEL" = auto ]; then
    if [ -d /sys/module/kvm_pvm ] || [ ! -w /dev/kvm ] || [ ! -r /dev/kvm ]; then ACCEL=tcg
    else ACCEL=kvm RETRY_TCG=1; fi
fi

RUN=$(mktemp -d "${TMPDIR:-/tmp}/dex-vm.XXXXXX") || cannot "no temp folder"
PIDS=()
finish() {
    local p
    for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; done
    for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null; done
    rm -rf "$RUN"
}
trap finish EXIT
trap 'exit 130' INT; trap 'exit 143' TERM; trap 'exit 129' HUP

CWD=$(pwd -P)
printf 'VM_CWD=%q\n' "$CWD" >"$RUN/env.sh"
{
    # The caller's environment, minus what belongs to this shell.
    export -p | grep -Ev '^declare -x (BASH[A-Z_]*|SHELLOPTS|SHLVL|PWD|OLDPWD|_|PPID|UID|EUID)(=|$)'
    # Host TMPDIR would not exist in the guest's private /tmp.
    [ -n "${TMPDIR:-}" ] && [[ $TMPDIR/ != "$CWD"/* ]] && echo 'unset TMPDIR'
    echo 'export RXE_VM=1 RXE_DEV=rxe0 RXE_NETDEV=dummy0 RXE_IP=10.77.0.1 RXE_GID_INDEX'
    printf 'cd -- %q || exit 125\n' "$CWD"
    printf 'exec'; printf ' %q' "$@"; echo
} >"$RUN/run.sh"

# Boots once; sets RESULT to status|timeout|died|setup|noboot.
boot() {
    local accel=$1 limit boot_limit cpu t0=$SECONDS esc_cwd=${CWD//,/,,} esc_run=${RUN//,/,,}
    if [ "$accel" = kvm ]; then cpu=(-accel kvm -cpu host); boot_limit=60; limit=${LIMIT:-900}
    else cpu=(-accel tcg,thread=multi -cpu max); boot_limit=300; limit=${LIMIT:-2700}; fi
    rm -f "$RUN"/{booted,ready,status,setup-failed,console,out,err}
    mkfifo "$RUN/out" "$RUN/err" || cannot "mkfifo"
    cat <"$RUN/out" & PIDS+=($!)
    cat <"$RUN/err" >&2 & PIDS+=($!)
    local fs=security_model=none,multidevs=remap
    "$QEMU" -nodefaults -no-user-config -display none -no-reboot "${cpu[@]}" -m "$MEM" -smp "$CPUS" \
        -kernel "$KDIR/vmlinuz" -initrd "$INITRD" \
        -append "console=ttyS0 panic=-1 quiet loglevel=4 mitigations=off" \
        -chardev "file,id=con,path=$esc_run/console" -serial chardev:con \
        -device virtio-serial-pci \
        -chardev "file,id=o,path=$esc_run/out" -device virtserialport,chardev=o,name=dex.out \
        -chardev "file,id=e,path=$esc_run/err" -device virtserialport,chardev=e,name=dex.err \
        -fsdev "local,id=f0,path=/,readonly=on,$fs" -device virtio-9p-pci,fsdev=f0,mount_tag=root \
        -fsdev "local,id=f1,path=$esc_cwd,$fs" -device virtio-9p-pci,fsdev=f1,mount_tag=cwd \
        -fsdev "local,id=f2,path=$esc_run,security_model=none" -device virtio-9p-pci,fsdev=f2,mount_tag=ctl \
        </dev/null >"$RUN/qemu.log" 2>&1 &
    local qpid=$!; PIDS+=($qpid)
    RESULT=
    while kill -0 $qpid 2>/dev/null; do
        if [ ! -e "$RUN/booted" ] && [ $((SECONDS - t0)) -ge $boot_limit ]; then RESULT=noboot; break; fi
        if [ $((SECONDS - t0)) -ge "$limit" ]; then RESULT=timeout; break; fi
        sleep 0.2
    done
    kill $qpid 2>/dev/null; wait $qpid 2>/dev/null
    # If qemu never opened a fifo, its reader is stuck in open(): release it.
    exec 5<>"$RUN/out" 6<>"$RUN/err"; exec 5>&- 6>&-
    local p; for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null; done; PIDS=()
    if [ -z "$RESULT" ]; then
        if [ -s "$RUN/status" ]; then RESULT=status
        elif [ -e "$RUN/ready" ]; then RESULT=died
        elif [ -e "$RUN/booted" ]; then RESULT=setup
        else RESULT=noboot; fi
    fi
    ACCEL_USED=$accel LIMIT_USED=$limit
}
console() { note "---- guest console ($1) ----"; tail -n "${2:-40}" "$RUN/console" >&2; cat "$RUN/qemu.log" >&2; }

[ "$VERBOSE" = 1 ] && note "booting ($ACCEL, $MEM MiB, $CPUS CPUs)"
boot "$ACCEL"
if [ "$RESULT" = noboot ] && [ $RETRY_TCG = 1 ]; then
    note "KVM guest did not come up; retrying under TCG"
    boot tcg
fi
[ "$VERBOSE" = 1 ] && console "$ACCEL_USED" 1000
case $RESULT in
    status) rc=$(cat "$RUN/status")
            [ "$VERBOSE" = 1 ] && note "finished after $(elapsed)s ($ACCEL_USED), status $rc"
            exit "$rc" ;;
    timeout) console "timeout after ${LIMIT_USED}s"; exit 124 ;;
    died) console "guest died while the command ran"; exit 125 ;;
    setup) console "setup failed"; cannot "guest setup failed: $(cat "$RUN/setup-failed" 2>/dev/null)" ;;
    *) console "no boot"; cannot "the guest did not boot ($ACCEL_USED)" ;;
esac
