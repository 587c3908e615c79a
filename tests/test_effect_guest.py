"""The effect harness's guest kernel: which bzImages boot as a PVH ELF, which stay bzImages."""

from __future__ import annotations

import lzma
import struct
import sys
import zlib

from conftest import ROOT

sys.path.insert(0, str(ROOT / "bench" / "effect"))
import guest


def _elf_with_note(name: bytes, note_type: int) -> bytes:
    """A minimal ELF64 little-endian image with one PT_NOTE segment holding one note."""
    desc = struct.pack("<Q", 0x1000850)
    padded_name = name + b"\0" * (-len(name) % 4)
    note = struct.pack("<III", len(name), len(desc), note_type) + padded_name + desc
    header = bytearray(64)
    header[:6] = b"\x7fELF\x02\x01"  # ELFCLASS64, little-endian
    struct.pack_into("<Q", header, 0x20, 64)  # e_phoff
    struct.pack_into("<HH", header, 0x36, 56, 1)  # e_phentsize, e_phnum
    program_header = struct.pack("<IIQQQQQQ", 4, 0, 64 + 56, 0, 0, len(note), len(note), 4)
    return bytes(header) + program_header + note


def _bzimage(payload: bytes, compress: str) -> bytes:
    packed = lzma.compress(payload) if compress == "xz" else _gzip(payload)
    # The real setup code precedes the payload; stray bytes that look like a signature must not matter.
    return b"MZ setup \xfd7zXZ\x00 not a stream " + packed + b"trailer"


def _gzip(data: bytes) -> bytes:
    compressor = zlib.compressobj(wbits=16 + zlib.MAX_WBITS)
    return compressor.compress(data) + compressor.flush()


def test_xz_kernel_with_pvh_note_is_extracted() -> None:
    elf = _elf_with_note(b"Xen\0", 18)
    assert guest.pvh_kernel(_bzimage(elf, "xz")) == elf


def test_gzip_kernel_with_pvh_note_is_extracted() -> None:
    elf = _elf_with_note(b"Xen\0", 18)
    assert guest.pvh_kernel(_bzimage(elf, "gzip")) == elf


def test_kernel_without_pvh_entry_stays_a_bzimage() -> None:
    assert guest.pvh_kernel(_bzimage(_elf_with_note(b"Xen\0", 6), "xz")) is None  # other Xen note
    assert guest.pvh_kernel(_bzimage(_elf_with_note(b"GNU\0", 18), "xz")) is None  # same type, other owner
    assert guest.pvh_kernel(b"MZ no payload at all") is None
