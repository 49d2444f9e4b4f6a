//! A small deflate (RFC 1951) encoder: greedy LZ77 over a 32 KiB window found through hash
//! chains, coded with the fixed Huffman table in one final block. Charts are mostly runs of one
//! colour, which this shrinks a hundredfold without the weight of dynamic Huffman tables.
//!
//! ```text
//!  bits, least significant first:  BFINAL=1 · BTYPE=01 · (literal | length+distance)* · 256
//!  Huffman codes go in most significant bit first; extra bits least significant first
//! ```

/// The farthest back a match may reach.
const WINDOW: usize = 1 << 15;
const MIN_MATCH: usize = 3;
const MAX_MATCH: usize = 258;
const HASH_BITS: u32 = 15;
/// Candidates tried per position: enough for runs and repeated rows, bounded for noisy data.
const MAX_CHAIN: usize = 32;
const NONE: usize = usize::MAX;

/// Shortest length of codes 257..=285, and the extra bits each takes (RFC 1951 §3.2.5).
pub(super) const LEN_BASE: [u16; 29] =
    [3, 4, 5, 6, 7, 8, 9, 10, 11, 13, 15, 17, 19, 23, 27, 31, 35, 43, 51, 59, 67, 83, 99, 115, 131, 163, 195, 227, 258];
const LEN_EXTRA: [u32; 29] = [0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3, 4, 4, 4, 4, 5, 5, 5, 5, 0];
/// Shortest distance of codes 0..=29, and the extra bits each takes.
const DIST_BASE: [u16; 30] = [
    1, 2, 3, 4, 5, 7, 9, 13, 17, 25, 33, 49, 65, 97, 129, 193, 257, 385, 513, 769, 1025, 1537, 2049, 3073, 4097, 6145,
    8193, 12289, 16385, 24577,
];
const DIST_EXTRA: [u32; 30] =
    [0, 0, 0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7, 8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13, 13];

/// `data` as a raw deflate stream (no zlib header or trailer).
pub(super) fn deflate(data: &[u8]) -> Vec<u8> {
    let mut out = BitWriter::default();
    out.put(1, 1); // BFINAL: this is the last block
    out.put(1, 2); // BTYPE 01: fixed Huffman codes
    let mut chains = Chains::new();
    let mut i = 0;
    while i < data.len() {
        let (len, dist) = chains.longest(data, i);
        if len >= MIN_MATCH {
            out.length(len);
            out.distance(dist);
            for p in i..i + len {
                chains.insert(data, p);
            }
            i += len;
        } else {
            out.symbol(u32::from(data[i]));
            chains.insert(data, i);
            i += 1;
        }
    }
    out.symbol(256); // end of block
    out.finish()
}

/// For each 3-byte hash the latest position, and for each position the previous one with its hash.
struct Chains {
    head: Vec<usize>,
    prev: Vec<usize>,
}

impl Chains {
    fn new() -> Chains {
        Chains { head: vec![NONE; 1 << HASH_BITS], prev: vec![NONE; WINDOW] }
    }

    fn hash(data: &[u8], i: usize) -> Option<usize> {
        let b = data.get(i..i + MIN_MATCH)?;
        let v = u32::from(b[0]) | u32::from(b[1]) << 8 | u32::from(b[2]) << 16;
        Some((v.wrapping_mul(0x9E37_79B1) >> (32 - HASH_BITS)) as usize)
    }

    fn insert(&mut self, data: &[u8], i: usize) {
        if let Some(h) = Self::hash(data, i) {
            self.prev[i % WINDOW] = self.head[h];
            self.head[h] = i;
        }
    }

    /// The longest earlier match for the bytes at `i`, as (length, distance); (0, 0) if none.
    fn longest(&self, data: &[u8], i: usize) -> (usize, usize) {
        let Some(h) = Self::hash(data, i) else { return (0, 0) };
        let want = &data[i..data.len().min(i + MAX_MATCH)];
        let mut best = (0, 0);
        let mut cand = self.head[h];
        for _ in 0..MAX_CHAIN {
            if cand == NONE || i - cand >= WINDOW {
                break;
            }
            // The source may overlap `want`: the decoder copies byte by byte, so that is fine.
            let len = data[cand..].iter().zip(want).take_while(|(a, b)| a == b).count();
            if len > best.0 {
                best = (len, i - cand);
                if len == want.len() {
                    break;
                }
            }
            let next = self.prev[cand % WINDOW];
            if next == NONE || next >= cand {
                break;
            }
            cand = next;
        }
        best
    }
}

/// Packs bits least significant first, as deflate reads them.
#[derive(Default)]
struct BitWriter {
    bytes: Vec<u8>,
    acc: u64,
    filled: u32,
}

impl BitWriter {
    fn put(&mut self, value: u32, bits: u32) {
        self.acc |= u64::from(value) << self.filled;
        self.filled += bits;
        while self.filled >= 8 {
            self.bytes.push(self.acc as u8);
            self.acc >>= 8;
            self.filled -= 8;
        }
    }

    /// A Huffman code, sent most significant bit first.
    fn code(&mut self, code: u32, bits: u32) {
        self.put(code.reverse_bits() >> (32 - bits), bits);
    }

    /// A literal/length symbol in the fixed code (RFC 1951 §3.2.6).
    fn symbol(&mut self, sym: u32) {
        match sym {
            0..=143 => self.code(0x30 + sym, 8),
            144..=255 => self.code(0x190 + sym - 144, 9),
            256..=279 => self.code(sym - 256, 7),
            _ => self.code(0xC0 + sym - 280, 8),
        }
    }

    fn length(&mut self, len: usize) {
        let k = LEN_BASE.iter().rposition(|&b| usize::from(b) <= len).unwrap_or(0);
        self.symbol(257 + k as u32);
        self.put((len - usize::from(LEN_BASE[k])) as u32, LEN_EXTRA[k]);
    }

    fn distance(&mut self, dist: usize) {
        let k = DIST_BASE.iter().rposition(|&b| usize::from(b) <= dist).unwrap_or(0);
        self.code(k as u32, 5);
        self.put((dist - usize::from(DIST_BASE[k])) as u32, DIST_EXTRA[k]);
    }

    fn finish(mut self) -> Vec<u8> {
        if self.filled > 0 {
            self.bytes.push(self.acc as u8);
        }
        self.bytes
    }
}
