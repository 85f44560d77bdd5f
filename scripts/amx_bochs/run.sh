#!/usr/bin/env bash
# accel's AMX tile kernels (crates/compute/src/backend/cpu/matmul/amx/tile_asm.rs) on Bochs's
# emulated Sapphire Rapids, with no operating system: main.rs includes that file, boots from
# GRUB, and compares every value of C of 12 kernel calls (tdpbf16ps and tdpfp16ps; 1 to 4
# chunks of k; padded rows of A and C; C loaded and not) with an f64 loop. Seconds, not
# minutes; the timing means nothing (an emulator).
#
#   BOCHS=/path/to/bochs-build scripts/amx_bochs/run.sh
#
# BOCHS is a built Bochs source tree (its `bochs` binary and `bios/` folder), version 3.0 or
# later, configured with --enable-x86-64 --enable-avx --enable-evex --enable-amx --with-nogui
# (Debian's bochs 2.7 has no AMX). No patch is needed: Linux would need XFD, which Bochs lacks,
# and this program needs no Linux. AMX-FP16 is added to the sapphire_rapids model here
# (add_features). Also needed: the Rust target x86_64-unknown-none, grub-mkrescue
# (grub-pc-bin, grub-common), xorriso and mtools; installed where missing and possible.
#
# Exit: 0 passed, 1 failed, 2 could not run (the reason on stderr, "skipped: amx-bochs: ...").
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
skip() { echo "skipped: amx-bochs: $*" >&2; exit 2; }

[ -n "${BOCHS:-}" ] || skip "BOCHS is not set (a Bochs 3 build tree with --enable-amx)"
[ -x "$BOCHS/bochs" ] && [ -f "$BOCHS/bios/BIOS-bochs-latest" ] ||
  skip "no bochs binary and bios/ in $BOCHS"
rustup target list --installed 2>/dev/null | grep -qx x86_64-unknown-none ||
  rustup target add x86_64-unknown-none >/dev/null 2>&1 || skip "no Rust target x86_64-unknown-none"
if ! command -v grub-mkrescue >/dev/null || ! command -v xorriso >/dev/null ||
  ! command -v mformat >/dev/null; then
  if [ "$(id -u)" = 0 ]; then
    apt-get install -y -qq grub-pc-bin grub-common xorriso mtools >/dev/null 2>&1 ||
      (apt-get update -qq && apt-get install -y -qq grub-pc-bin grub-common xorriso mtools \
        >/dev/null 2>&1) || skip "could not install grub-pc-bin, xorriso, mtools"
  else
    skip "grub-mkrescue, xorriso and mtools are needed"
  fi
fi

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
RUSTFLAGS="-C relocation-model=static -C link-arg=-T$here/linker.ld -C link-arg=-zmax-page-size=0x1000" \
  cargo build -q --release --manifest-path "$here/Cargo.toml" --target x86_64-unknown-none \
  --target-dir "${AMX_BOCHS_TARGET:-$here/../../target/amx-bochs}" ||
  { echo "amx-bochs: FAIL: the program did not build" >&2; exit 1; }
elf="${AMX_BOCHS_TARGET:-$here/../../target/amx-bochs}/x86_64-unknown-none/release/amx-bochs"

mkdir -p "$work/iso/boot/grub"
cp "$elf" "$work/iso/boot/amx.elf"
cat > "$work/iso/boot/grub/grub.cfg" <<'EOF'
set timeout=0
menuentry "amx-bochs" {
  multiboot /boot/amx.elf
  boot
}
EOF
grub-mkrescue -o "$work/amx.iso" "$work/iso" >/dev/null 2>&1 || skip "grub-mkrescue failed"

cat > "$work/bochsrc" <<EOF
megs: 64
romimage: file=$BOCHS/bios/BIOS-bochs-latest
vgaromimage: file=$BOCHS/bios/VGABIOS-lgpl/VGABIOS-lgpl-latest.bin
cpu: model=sapphire_rapids, add_features=amx_fp16, ips=50000000
ata0-master: type=cdrom, path=$work/amx.iso, status=inserted
boot: cdrom
display_library: nogui
port_e9_hack: enabled=1
log: $work/bochs.log
panic: action=fatal
error: action=report
info: action=ignore
EOF
# Bochs exits through the program's shutdown port (status 1, "shutdown requested"); the
# verdict is the program's last line.
timeout 300 "$BOCHS/bochs" -q -f "$work/bochsrc" > "$work/out.txt" 2>&1 || true
grep '^amx-bochs:' "$work/out.txt" || { tail -20 "$work/out.txt"; echo "amx-bochs: no output"; exit 1; }
grep -q '^amx-bochs: PASS' "$work/out.txt"
