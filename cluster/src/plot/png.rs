//! The smallest useful PNG writer (ISO/IEC 15948): 8-bit RGB, not interlaced, every row with
//! filter type 0, one IDAT chunk holding a zlib stream around [`super::deflate`].
//!
//! ```text
//!  89 50 4E 47 0D 0A 1A 0A │ IHDR w h 8 2 0 0 0 │ IDAT 78 01 ‹deflate› ‹adler-32› │ IEND
//!  each chunk: length (u32 BE) · type · data · CRC-32 of type ‖ data (u32 BE)
//! ```

use super::deflate::deflate;

/// The eight bytes every PNG file starts with.
pub(super) const SIGNATURE: [u8; 8] = [0x89, b'P', b'N', b'G', 0x0D, 0x0A, 0x1A, 0x0A];

/// A PNG file of `rgb`, three bytes a pixel, rows top to bottom.
pub(super) fn encode(width: u32, height: u32, rgb: &[u8]) -> Vec<u8> {
    let stride = width as usize * 3;
    assert!(stride > 0 && rgb.len() == stride * height as usize, "pixels do not fill {width}x{height}");
    let mut raw = Vec::with_capacity((stride + 1) * height as usize);
    for row in rgb.chunks_exact(stride) {
        raw.push(0); // filter type 0: the row as it is
        raw.extend_from_slice(row);
    }
    let mut ihdr = Vec::with_capacity(13);
    ihdr.extend_from_slice(&width.to_be_bytes());
    ihdr.extend_from_slice(&height.to_be_bytes());
    // bit depth 8, colour type 2 (RGB), deflate, adaptive filtering, no interlace
    ihdr.extend_from_slice(&[8, 2, 0, 0, 0]);

    let mut out = SIGNATURE.to_vec();
    chunk(&mut out, b"IHDR", &ihdr);
    chunk(&mut out, b"IDAT", &zlib(&raw));
    chunk(&mut out, b"IEND", &[]);
    out
}

/// `data` as a zlib stream (RFC 1950): header, deflate data, Adler-32 of `data`.
pub(super) fn zlib(data: &[u8]) -> Vec<u8> {
    // CM 8 (deflate), CINFO 7 (32 KiB window); FLG makes the pair a multiple of 31.
    let mut out = vec![0x78, 0x01];
    out.extend_from_slice(&deflate(data));
    out.extend_from_slice(&adler32(data).to_be_bytes());
    out
}

fn chunk(out: &mut Vec<u8>, kind: &[u8; 4], data: &[u8]) {
    out.extend_from_slice(&(data.len() as u32).to_be_bytes());
    out.extend_from_slice(kind);
    out.extend_from_slice(data);
    out.extend_from_slice(&crc32(&[kind, data]).to_be_bytes());
}

/// CRC-32 (ISO-HDLC, reflected polynomial 0xEDB88320) of the parts, one after another.
pub(super) fn crc32(parts: &[&[u8]]) -> u32 {
    let mut crc = !0u32;
    for &byte in parts.iter().flat_map(|p| p.iter()) {
        crc = CRC_TABLE[((crc ^ u32::from(byte)) & 0xFF) as usize] ^ (crc >> 8);
    }
    !crc
}

const CRC_TABLE: [u32; 256] = crc_table();

const fn crc_table() -> [u32; 256] {
    let mut table = [0u32; 256];
    let mut n = 0;
    while n < 256 {
        let mut c = n as u32;
        let mut k = 0;
        while k < 8 {
            c = if c & 1 == 1 { 0xEDB8_8320 ^ (c >> 1) } else { c >> 1 };
            k += 1;
        }
        table[n] = c;
        n += 1;
    }
    table
}

/// Adler-32 (RFC 1950 §8.2) of `data`.
pub(super) fn adler32(data: &[u8]) -> u32 {
    const MOD: u32 = 65521;
    // 5552 is the most bytes the sums can take before a u32 could overflow.
    let (mut a, mut b) = (1u32, 0u32);
    for block in data.chunks(5552) {
        for &byte in block {
            a += u32::from(byte);
            b += a;
        }
        a %= MOD;
        b %= MOD;
    }
    b << 16 | a
}
