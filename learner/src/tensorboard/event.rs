//! The few fields of TensorBoard's `Event` protocol buffer that scalars need, encoded by hand
//! (tensorflow/core/util/event.proto, tensorflow/core/framework/summary.proto):
//!
//! ```text
//!  Event   { double wall_time = 1; int64 step = 2;
//!            oneof what { string file_version = 3; Summary summary = 5; } }
//!  Summary { repeated Value value = 1; }
//!  Value   { string tag = 1; float simple_value = 2; }
//! ```
//!
//! Wire format: each field is a key `(number << 3) | type` as a varint, then the value: type 0
//! a varint, 1 eight little-endian bytes, 2 a varint length and the bytes, 5 four bytes.

/// The `file_version` the first event of every file carries.
pub const FILE_VERSION: &str = "brain.Event:2";

const VARINT: u8 = 0;
const FIXED64: u8 = 1;
const BYTES: u8 = 2;
const FIXED32: u8 = 5;

/// The first event of a file: its format version.
pub fn file_version(wall_time: f64) -> Vec<u8> {
    let mut out = header(wall_time, 0);
    bytes_field(&mut out, 3, FILE_VERSION.as_bytes());
    out
}

/// One event holding `scalars` (tag, value) at `step`.
pub fn scalars(wall_time: f64, step: i64, scalars: &[(String, f32)]) -> Vec<u8> {
    let mut summary = Vec::new();
    for (tag, value) in scalars {
        let mut v = Vec::new();
        bytes_field(&mut v, 1, tag.as_bytes());
        key(&mut v, 2, FIXED32);
        v.extend_from_slice(&value.to_le_bytes());
        bytes_field(&mut summary, 1, &v);
    }
    let mut out = header(wall_time, step);
    bytes_field(&mut out, 5, &summary);
    out
}

fn header(wall_time: f64, step: i64) -> Vec<u8> {
    let mut out = Vec::new();
    key(&mut out, 1, FIXED64);
    out.extend_from_slice(&wall_time.to_le_bytes());
    if step != 0 {
        key(&mut out, 2, VARINT);
        // int64 is sent as its two's-complement bits.
        varint(&mut out, step as u64);
    }
    out
}

fn key(out: &mut Vec<u8>, field: u32, wire_type: u8) {
    varint(out, u64::from(field << 3 | u32::from(wire_type)));
}

fn bytes_field(out: &mut Vec<u8>, field: u32, bytes: &[u8]) {
    key(out, field, BYTES);
    varint(out, bytes.len() as u64);
    out.extend_from_slice(bytes);
}

fn varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8 & 0x7F) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_encode_as_the_reference_protobuf_does() {
        // Bytes from tensorboard 2.21's event_pb2 (protobuf 7.36):
        //   Event(wall_time=1.5, file_version="brain.Event:2").SerializeToString()
        let mut want = vec![0x09, 0, 0, 0, 0, 0, 0, 0xF8, 0x3F, 0x1A, 13];
        want.extend_from_slice(b"brain.Event:2");
        assert_eq!(file_version(1.5), want);
        //   Event(wall_time=2.0, step=300, summary=Summary(value=[Value(tag="kl", simple_value=0.25)]))
        let got = scalars(2.0, 300, &[("kl".to_string(), 0.25)]);
        let want = [
            0x09, 0, 0, 0, 0, 0, 0, 0, 0x40, // wall_time
            0x10, 0xAC, 0x02, // step 300 as a varint
            0x2A, 11, // summary, 11 bytes
            0x0A, 9, // value, 9 bytes
            0x0A, 2, b'k', b'l', // tag
            0x15, 0, 0, 0x80, 0x3E, // simple_value 0.25f
        ];
        assert_eq!(got, want);
        let mut long = Vec::new();
        varint(&mut long, u64::MAX);
        assert_eq!(long.len(), 10);
        assert_eq!(long[9], 1);
    }
}
