//! TFRecord framing, the container of TensorBoard event files: each record is its length, a
//! checksum of the length, the bytes, and a checksum of the bytes. Checksums are CRC-32C
//! (Castagnoli), "masked" so that a CRC of data holding CRCs stays well mixed.
//!
//! ```text
//!  ┌──────────────┬─────────────────────┬────────────┬─────────────────────┐
//!  │ len: u64 LE  │ masked_crc(len) u32 │ data[len]  │ masked_crc(data) u32│
//!  └──────────────┴─────────────────────┴────────────┴─────────────────────┘
//! ```

/// Added after the rotation when masking (TensorFlow's `crc32c::Mask`).
const MASK_DELTA: u32 = 0xA282_EAD8;

/// CRC-32C of `data` (the `crc32c` crate; checked against published values below).
pub fn crc32c(data: &[u8]) -> u32 {
    crc32c::crc32c(data)
}

/// The masked CRC-32C TFRecord stores: rotated right by 15 bits, plus a constant.
pub fn masked_crc32c(data: &[u8]) -> u32 {
    crc32c(data).rotate_right(15).wrapping_add(MASK_DELTA)
}

/// `data` framed as one TFRecord.
pub fn frame(data: &[u8]) -> Vec<u8> {
    let len = (data.len() as u64).to_le_bytes();
    let mut out = Vec::with_capacity(data.len() + 16);
    out.extend_from_slice(&len);
    out.extend_from_slice(&masked_crc32c(&len).to_le_bytes());
    out.extend_from_slice(data);
    out.extend_from_slice(&masked_crc32c(data).to_le_bytes());
    out
}

/// The records of a TFRecord file, each checked against both of its checksums; an
/// `InvalidData` error names the first record that is truncated or fails its check.
pub fn unframe(mut bytes: &[u8]) -> std::io::Result<Vec<&[u8]>> {
    let bad =
        |k: usize, what: &str| std::io::Error::new(std::io::ErrorKind::InvalidData, format!("record {k}: {what}"));
    let mut out = Vec::new();
    while !bytes.is_empty() {
        let k = out.len();
        let word = |b: &[u8], at: usize| u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]]);
        if bytes.len() < 12 {
            return Err(bad(k, "truncated header"));
        }
        let (len_bytes, rest) = bytes.split_at(8);
        if word(rest, 0) != masked_crc32c(len_bytes) {
            return Err(bad(k, "length checksum mismatch"));
        }
        let len = u64::from_le_bytes(len_bytes.try_into().map_err(|_| bad(k, "truncated header"))?) as usize;
        let rest = &rest[4..];
        if rest.len() < len.saturating_add(4) {
            return Err(bad(k, "truncated data"));
        }
        let (data, rest) = rest.split_at(len);
        if word(rest, 0) != masked_crc32c(data) {
            return Err(bad(k, "data checksum mismatch"));
        }
        out.push(data);
        bytes = &rest[4..];
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crc32c_matches_its_published_check_values() {
        // RFC 3720 (iSCSI), appendix B.4, and the CRC catalogue's check value for "123456789".
        assert_eq!(crc32c(b"123456789"), 0xE306_9283);
        assert_eq!(crc32c(&[0u8; 32]), 0x8A91_36AA);
        assert_eq!(crc32c(&[0xFFu8; 32]), 0x62A8_AB43);
        let ascending: Vec<u8> = (0..32).collect();
        assert_eq!(crc32c(&ascending), 0x46DD_794E);
        assert_eq!(crc32c(b""), 0);
    }

    #[test]
    fn a_frame_holds_length_data_and_both_masked_checksums() {
        let framed = frame(b"abc");
        assert_eq!(framed.len(), 8 + 4 + 3 + 4);
        assert_eq!(framed[..8], 3u64.to_le_bytes());
        assert_eq!(framed[8..12], masked_crc32c(&3u64.to_le_bytes()).to_le_bytes());
        assert_eq!(&framed[12..15], b"abc");
        assert_eq!(framed[15..], masked_crc32c(b"abc").to_le_bytes());
        // TensorBoard 2.21's masked_crc32c(b"abc") (its pure-Python CRC-32C and mask).
        assert_eq!(crc32c(b"abc"), 0x364B_3FB7);
        assert_eq!(masked_crc32c(b"abc"), 0x21F1_576E);
    }

    #[test]
    fn frames_read_back_and_damage_is_named() {
        let file = [frame(b"one"), frame(b""), frame(b"three")].concat();
        assert_eq!(unframe(&file).unwrap(), [&b"one"[..], b"", b"three"]);
        let mut flipped = file.clone();
        flipped[13] ^= 1;
        assert!(unframe(&flipped).unwrap_err().to_string().contains("record 0: data checksum"));
        assert!(unframe(&file[..file.len() - 1]).unwrap_err().to_string().contains("record 2: truncated data"));
        let mut long = file.clone();
        long[0] = 0xFF;
        assert!(unframe(&long).unwrap_err().to_string().contains("record 0: length checksum"));
    }
}
