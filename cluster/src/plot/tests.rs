//! Checks of the plotter: checksums against published known answers, deflate output against
//! zlib's, and PNG files taken apart again (chunks, CRCs, inflated pixels) by a decoder written
//! here from RFC 1951 rather than from the encoder's tables.

use super::curve::clip;
use super::deflate::deflate;
use super::layout::{scene, Frame, Shape};
use super::png::{adler32, crc32, SIGNATURE};
use super::ticks::Axis;
use super::*;

#[test]
fn checksums_match_their_known_answers() {
    assert_eq!(crc32(&[b"123456789"]), 0xCBF4_3926);
    assert_eq!(crc32(&[b"1234", b"56789"]), 0xCBF4_3926);
    assert_eq!(adler32(b"Wikipedia"), 0x11E6_0398);
    assert_eq!(adler32(&[]), 1);
}

#[test]
fn deflate_matches_zlib_on_tiny_inputs_and_round_trips() {
    // zlib.compressobj(6, zlib.DEFLATED, -15): b"" → 03 00, b"a" → 4b 04 00
    assert_eq!(deflate(b""), [0x03, 0x00]);
    assert_eq!(deflate(b"a"), [0x4b, 0x04, 0x00]);
    let mut seed = 0x2545_F491_u32;
    let noise: Vec<u8> = (0..50_000)
        .map(|_| {
            seed = seed.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
            (seed >> 24) as u8
        })
        .collect();
    let rows: Vec<u8> = (0..70_000u32).map(|i| [7, 7, 7, 200, 13][(i % 1_234 % 5) as usize]).collect();
    for data in [vec![0u8; 100_000], noise, rows, b"abcabcabcabcabcabcx".to_vec()] {
        let packed = deflate(&data);
        assert_eq!(inflate(&packed), data);
    }
    assert!(deflate(&[255u8; 300_000]).len() < 3_000, "runs should shrink");
}

#[test]
fn png_chunks_are_well_formed_and_pixels_are_where_the_layout_says() {
    let chart = Chart {
        title: "reward <mean>".into(),
        x_label: "step".into(),
        y_label: "reward".into(),
        series: vec![Series::new("flat", vec![(0.0, 0.5), (10.0, 0.5)]), Series::new("one", vec![(5.0, 0.25)])],
        y_range: Some((0.0, 1.0)),
    };
    let (w, h) = (320, 200);
    let (pixels, png) = decode(&render_png(&chart, w, h));
    assert_eq!((png.0, png.1), (w, h));
    let at = |x: u32, y: u32| {
        let i = (y * (1 + 3 * w) + 1 + 3 * x) as usize;
        Rgb(pixels[i], pixels[i + 1], pixels[i + 2])
    };
    assert_eq!(at(0, 0), Rgb(255, 255, 255));
    assert_eq!(at(w - 1, h - 1), Rgb(255, 255, 255));
    let frame = Frame::new(&chart, w, h);
    let (x, y) = frame.to_px((5.0, 0.5));
    assert_eq!(at(x as u32, y as u32), series_color(0), "the flat line crosses ({x}, {y})");
    let (x, y) = frame.to_px((5.0, 0.25));
    assert_eq!(at(x as u32, y as u32), series_color(1), "the lone point is a dot at ({x}, {y})");
    let (x, y) = frame.to_px((5.0, 0.75));
    let empty = at(x as u32, y as u32);
    assert!([Rgb(255, 255, 255), Rgb(228, 228, 228)].contains(&empty), "background or grid at ({x}, {y}): {empty:?}");
}

#[test]
fn ticks_fall_on_round_numbers() {
    let labels = |a: Axis| a.ticks.into_iter().map(|(_, l)| l).collect::<Vec<_>>();
    let axis = Axis::new(3.0, 97.0, 5, true);
    assert_eq!((axis.lo, axis.hi), (0.0, 100.0));
    assert_eq!(labels(axis), ["0", "20", "40", "60", "80", "100"]);
    assert_eq!(labels(Axis::new(0.0, 1.0, 5, false)), ["0.0", "0.2", "0.4", "0.6", "0.8", "1.0"]);
    assert_eq!(labels(Axis::new(-0.3, 0.3, 3, true)), ["-0.4", "-0.2", "0.0", "0.2", "0.4"]);
    assert_eq!(labels(Axis::new(0.0, 3e6, 3, true)), ["0", "1e6", "2e6", "3e6"]);
    assert_eq!(labels(Axis::new(0.0, 1.5e6, 3, false)), ["0", "0.5e6", "1.0e6", "1.5e6"]);
    assert_eq!(labels(Axis::new(0.0, 2.5e-5, 5, false)), ["0", "0.5e-5", "1.0e-5", "1.5e-5", "2.0e-5", "2.5e-5"]);
    let flat = Axis::new(2.0, 2.0, 5, true);
    assert!(flat.lo < 2.0 && flat.hi > 2.0 && flat.ticks.len() >= 2);
    let broken = Axis::new(f64::NAN, f64::INFINITY, 5, true);
    assert_eq!((broken.lo, broken.hi), (0.0, 1.0));
}

#[test]
fn nan_and_empty_series_are_skipped_and_gaps_break_lines() {
    let chart = Chart {
        series: vec![
            Series::new("empty", vec![]),
            Series::new("nan", vec![(f64::NAN, 1.0), (2.0, f64::INFINITY)]),
            Series::new("gappy", vec![(0.0, 0.0), (1.0, 1.0), (2.0, f64::NAN), (3.0, 0.0), (4.0, 1.0)]),
        ],
        ..Chart::default()
    };
    let shapes = scene(&chart, 400, 300);
    let texts: Vec<&str> = shapes
        .iter()
        .filter_map(|s| if let Shape::Text { text, .. } = s { Some(text.as_str()) } else { None })
        .collect();
    assert!(texts.contains(&"gappy") && !texts.contains(&"nan") && !texts.contains(&"empty"), "{texts:?}");
    let curves = shapes.iter().filter(|s| matches!(s, Shape::Line { color, .. } if *color == series_color(2))).count();
    assert_eq!(curves, 2, "the NaN splits the curve in two");
    assert!(!render_svg(&chart, 400, 300).contains("NaN"));
    decode(&render_png(&chart, 400, 300));
    decode(&render_png(&Chart::default(), 1, 1));
    let wild = Chart { series: vec![Series::new("wild", vec![(0.0, -1e300), (1.0, 1e300)])], ..Chart::default() };
    decode(&render_png(&wild, 64, 48));
}

#[test]
fn curves_are_clipped_to_the_plot() {
    let rect = (10.0, 10.0, 20.0, 20.0);
    assert_eq!(clip((0.0, 15.0), (30.0, 15.0), rect), Some(((10.0, 15.0), (20.0, 15.0))));
    assert_eq!(clip((12.0, 12.0), (14.0, 14.0), rect), Some(((12.0, 12.0), (14.0, 14.0))));
    assert_eq!(clip((0.0, 0.0), (5.0, 30.0), rect), None);
    let chart = Chart {
        series: vec![Series::new("s", vec![(0.0, -5.0), (1.0, 0.5), (2.0, 5.0)])],
        y_range: Some((0.0, 1.0)),
        ..Chart::default()
    };
    let frame = Frame::new(&chart, 300, 200);
    for shape in scene(&chart, 300, 200) {
        if let Shape::Line { points, width, .. } = shape {
            if width > 1.0 {
                assert!(points.iter().all(|&(_, y)| (frame.top..=frame.bottom).contains(&y)), "{points:?}");
            }
        }
    }
}

#[test]
fn svg_is_one_document_with_escaped_text() {
    let chart = Chart {
        title: "a < b & c".into(),
        series: vec![Series::new("loss", vec![(0.0, 2.0), (1.0, 1.0)])],
        ..Chart::default()
    };
    let svg = render_svg(&chart, 300, 200);
    assert!(svg.starts_with("<svg ") && svg.ends_with("</svg>\n"), "{svg}");
    assert!(svg.contains("a &lt; b &amp; c") && svg.contains(">loss</text>"));
    assert!(svg.contains(r##"stroke="#1f77b4""##));
}

#[test]
fn files_are_written() {
    let dir = tempfile::tempdir().unwrap();
    let chart = Chart { series: vec![Series::new("x", vec![(0.0, 0.0), (1.0, 1.0)])], ..Chart::default() };
    write_png(&chart, &dir.path().join("c.png"), 200, 100).unwrap();
    write_svg(&chart, &dir.path().join("c.svg"), 200, 100).unwrap();
    assert_eq!(std::fs::read(dir.path().join("c.png")).unwrap(), render_png(&chart, 200, 100));
    assert!(std::fs::read_to_string(dir.path().join("c.svg")).unwrap().starts_with("<svg"));
}

/// Takes a PNG apart, checking every chunk's CRC, the header and the zlib wrapping; returns the
/// filtered scanlines and (width, height).
fn decode(file: &[u8]) -> (Vec<u8>, (u32, u32)) {
    assert_eq!(file[..8], SIGNATURE);
    let (mut at, mut chunks) = (8, Vec::new());
    while at < file.len() {
        let len = u32::from_be_bytes(file[at..at + 4].try_into().unwrap()) as usize;
        let (kind, data) = (&file[at + 4..at + 8], &file[at + 8..at + 8 + len]);
        let crc = u32::from_be_bytes(file[at + 8 + len..at + 12 + len].try_into().unwrap());
        assert_eq!(crc32(&[kind, data]), crc, "CRC of {}", String::from_utf8_lossy(kind));
        chunks.push((kind.to_vec(), data.to_vec()));
        at += 12 + len;
    }
    let kinds: Vec<&[u8]> = chunks.iter().map(|(k, _)| k.as_slice()).collect();
    assert_eq!(kinds, [b"IHDR", b"IDAT", b"IEND"]);
    let ihdr = &chunks[0].1;
    let size = (u32::from_be_bytes(ihdr[0..4].try_into().unwrap()), u32::from_be_bytes(ihdr[4..8].try_into().unwrap()));
    assert_eq!(ihdr[8..], [8, 2, 0, 0, 0]);
    let z = &chunks[1].1;
    assert_eq!((u16::from(z[0]) << 8 | u16::from(z[1])) % 31, 0);
    assert_eq!(z[0] & 0x0F, 8, "deflate");
    let raw = inflate(&z[2..z.len() - 4]);
    assert_eq!(adler32(&raw).to_be_bytes(), z[z.len() - 4..]);
    let stride = 1 + 3 * size.0 as usize;
    assert_eq!(raw.len(), stride * size.1 as usize);
    assert!(raw.chunks(stride).all(|row| row[0] == 0), "filter type 0 throughout");
    (raw, size)
}

/// A deflate decoder for stored and fixed-Huffman blocks, tables derived from RFC 1951 §3.2.5.
fn inflate(data: &[u8]) -> Vec<u8> {
    let mut len_extra = [0u32; 29];
    let mut len_base = [3usize; 29];
    for k in 0..29 {
        len_extra[k] = if (8..28).contains(&k) { (k as u32 - 4) / 4 } else { 0 };
        if k > 0 {
            len_base[k] = len_base[k - 1] + (1 << len_extra[k - 1]);
        }
    }
    len_base[28] = 258;
    let dist_extra = |d: usize| if d < 4 { 0 } else { d as u32 / 2 - 1 };
    let dist_base = |d: usize| (0..d).fold(1usize, |base, k| base + (1 << dist_extra(k)));

    let mut bit = 0usize;
    let mut read = |n: u32, msb_first: bool| -> u32 {
        (0..n).fold(0, |acc, i| {
            let b = u32::from(data[bit / 8] >> (bit % 8) & 1);
            bit += 1;
            if msb_first {
                acc << 1 | b
            } else {
                acc | b << i
            }
        })
    };
    let mut out: Vec<u8> = Vec::new();
    loop {
        let last = read(1, false);
        match read(2, false) {
            1 => loop {
                let c7 = read(7, true);
                let sym = if c7 <= 0x17 {
                    256 + c7
                } else {
                    match c7 << 1 | read(1, true) {
                        c8 @ 0x30..=0xBF => c8 - 0x30,
                        c8 @ 0xC0..=0xC7 => 280 + c8 - 0xC0,
                        c8 => 144 + (c8 << 1 | read(1, true)) - 0x190,
                    }
                };
                match sym {
                    0..=255 => out.push(sym as u8),
                    256 => break,
                    _ => {
                        let k = sym as usize - 257;
                        let len = len_base[k] + read(len_extra[k], false) as usize;
                        let d = read(5, true) as usize;
                        let dist = dist_base(d) + read(dist_extra(d), false) as usize;
                        for _ in 0..len {
                            out.push(out[out.len() - dist]);
                        }
                    }
                }
            },
            kind => panic!("block type {kind} is not one the encoder writes"),
        }
        if last == 1 {
            return out;
        }
    }
}
