//! Checks of the charts: PNGs decoded again by the `png` crate (size, background, curves and
//! bands in their colours where the data puts them), SVGs read as text (full legend names,
//! escaping), and the data-side cutting (clipping, gaps, ranges, tick labels).

use super::draw::labels;
use super::path::{clip, pieces, ranges, visible};
use super::*;

/// The decoded RGB pixels and (width, height) of a PNG file.
fn decode(file: &[u8]) -> (Vec<u8>, (u32, u32)) {
    let mut reader = png::Decoder::new(std::io::Cursor::new(file)).read_info().unwrap();
    let mut buf = vec![0; reader.output_buffer_size().unwrap()];
    let info = reader.next_frame(&mut buf).unwrap();
    assert_eq!((info.color_type, info.bit_depth), (png::ColorType::Rgb, png::BitDepth::Eight));
    buf.truncate(info.buffer_size());
    (buf, (info.width, info.height))
}

fn pixel(pixels: &[u8], w: u32, x: u32, y: u32) -> Rgb {
    let i = 3 * (y * w + x) as usize;
    Rgb(pixels[i], pixels[i + 1], pixels[i + 2])
}

/// Pixels of exactly `color` in rows `rows` (all columns).
fn count(pixels: &[u8], w: u32, rows: std::ops::Range<u32>, color: Rgb) -> usize {
    rows.flat_map(|y| (0..w).map(move |x| (x, y))).filter(|&(x, y)| pixel(pixels, w, x, y) == color).count()
}

/// The text of every `<text>` element of an SVG document, trimmed.
fn texts(svg: &str) -> Vec<String> {
    svg.split("</text>").filter_map(|piece| piece.rsplit_once('>').map(|(_, t)| t.trim().to_string())).collect()
}

fn curves() -> Chart {
    Chart {
        title: "run r (unified), means over 8 updates".into(),
        x_label: "learner update".into(),
        y_label: "rate / score".into(),
        series: vec![
            Series::new("initial-attempt success (sampled)", vec![(0.0, 0.5), (10.0, 0.5)]),
            Series::new("one", vec![(5.0, 0.25)]),
        ],
        y_range: Some((0.0, 1.0)),
    }
}

#[test]
fn png_decodes_at_its_size_with_curves_drawn_in_their_colours() {
    let (w, h) = (900, 500);
    let (pixels, size) = decode(&render_png(&curves(), w, h).unwrap());
    assert_eq!(size, (w, h));
    assert_eq!(pixel(&pixels, w, 0, 0), Rgb(255, 255, 255));
    assert_eq!(pixel(&pixels, w, w - 1, h - 1), Rgb(255, 255, 255));
    // The flat line at 0.5 is a horizontal stroke across most of the plot's width: some row
    // holds a long run of its colour.
    let row_max = (0..h).map(|y| count(&pixels, w, y..y + 1, series_color(0))).max().unwrap();
    assert!(row_max > (w / 3) as usize, "longest row of the flat line: {row_max} pixels");
    // The lone point is a dot, lower on the canvas than the line (0.25 < 0.5), in the middle of
    // the plot (the legend's swatches are in the right third).
    let rows_of = |c: Rgb| {
        let in_plot = |y: u32| (w / 4..w / 2).any(|x| pixel(&pixels, w, x, y) == c);
        (0..h).filter(|&y| in_plot(y)).collect::<Vec<_>>()
    };
    let (line_rows, dot_rows) = (rows_of(series_color(0)), rows_of(series_color(1)));
    assert!(!dot_rows.is_empty(), "the lone point is drawn");
    let line_row = (0..h).max_by_key(|&y| count(&pixels, w, y..y + 1, series_color(0))).unwrap();
    assert!(dot_rows.iter().all(|&y| y > line_row), "dot rows {dot_rows:?} below line row {line_row}");
    assert!(line_rows.len() < 6 && line_rows.contains(&line_row), "a thin line: {line_rows:?}");
    assert!(dot_rows.len() < 12, "a small dot: {dot_rows:?}");
    // Text is drawn: dark pixels exist above the plot (title) and below it (x axis labels).
    let ink = |rows: std::ops::Range<u32>| {
        rows.flat_map(|y| (0..w).map(move |x| (x, y)))
            .filter(|&(x, y)| {
                let Rgb(r, g, b) = pixel(&pixels, w, x, y);
                r < 100 && g < 100 && b < 100
            })
            .count()
    };
    assert!(ink(0..30) > 50 && ink(h - 40..h) > 50, "title and axis label ink");
}

#[test]
fn svg_names_every_series_in_full_and_escapes_text() {
    let mut chart = curves();
    chart.title = "a < b & c".into();
    let svg = render_svg(&chart, 900, 500).unwrap();
    assert!(svg.starts_with("<svg ") && svg.trim_end().ends_with("</svg>"), "{svg}");
    let texts = texts(&svg);
    for text in ["initial-attempt success (sampled)", "one", "learner update", "rate / score", "a &lt; b &amp; c"] {
        assert!(texts.iter().any(|t| t == text), "{text:?} in {texts:?}");
    }
    assert!(svg.to_lowercase().contains("#1f77b4"), "the first series' colour");
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
    let shown: Vec<usize> = visible(&chart).iter().map(|(i, _)| *i).collect();
    assert_eq!(shown, [2]);
    let (x, y) = ranges(&chart, &visible(&chart));
    assert_eq!(pieces(&chart.series[2], &x, &y).lines.len(), 2, "the NaN splits the curve in two");
    let svg = render_svg(&chart, 400, 300).unwrap();
    let names = texts(&svg);
    assert!(names.contains(&"gappy".to_string()), "{names:?}");
    assert!(!names.contains(&"nan".to_string()) && !names.contains(&"empty".to_string()), "{names:?}");
    assert!(!svg.contains("NaN"));
    decode(&render_png(&chart, 400, 300).unwrap());
    assert_eq!(decode(&render_png(&Chart::default(), 1, 1).unwrap()).1, (1, 1));
    assert_eq!(decode(&render_png(&curves(), 0, 100_000).unwrap()).1, (1, MAX_SIDE));
    let wild = Chart { series: vec![Series::new("wild", vec![(0.0, -1e300), (1.0, 1e300)])], ..Chart::default() };
    decode(&render_png(&wild, 300, 200).unwrap());
    let huge = Chart { series: vec![Series::new("huge", vec![(0.0, -f64::MAX), (1.0, f64::MAX)])], ..Chart::default() };
    decode(&render_png(&huge, 300, 200).unwrap());
}

#[test]
fn curves_are_clipped_to_the_plot_and_bands_clamped() {
    let rect = (10.0, 10.0, 20.0, 20.0);
    assert_eq!(clip((0.0, 15.0), (30.0, 15.0), rect), Some(((10.0, 15.0), (20.0, 15.0))));
    assert_eq!(clip((12.0, 12.0), (14.0, 14.0), rect), Some(((12.0, 12.0), (14.0, 14.0))));
    assert_eq!(clip((0.0, 0.0), (5.0, 30.0), rect), None);
    let s = Series::new("s", vec![(0.0, -5.0), (1.0, 0.5), (2.0, 5.0)]).with_band(vec![
        (0.0, -1.0, 0.2),
        (1.0, 0.4, 0.6),
        (f64::NAN, 0.0, 0.0),
        (2.0, 0.9, 3.0),
    ]);
    let p = pieces(&s, &(0.0..2.0), &(0.0..1.0));
    assert_eq!(p.lines.len(), 1);
    assert!(p.lines[0].iter().all(|&(_, y)| (0.0..=1.0).contains(&y)), "{:?}", p.lines);
    assert_eq!(
        p.bands,
        [vec![(0.0, 0.2), (1.0, 0.6), (1.0, 0.4), (0.0, 0.0)]],
        "the lone triple after the gap is dropped"
    );
}

#[test]
fn bands_are_shaded_in_a_lighter_shade_of_their_series() {
    let chart = Chart {
        series: vec![
            Series::new("mean", vec![(0.0, 0.5), (1.0, 0.5)]).with_band(vec![(0.0, 0.2, 0.8), (1.0, 0.2, 0.8)])
        ],
        y_range: Some((0.0, 1.0)),
        ..Chart::default()
    };
    let (w, h) = (400, 300);
    let (pixels, _) = decode(&render_png(&chart, w, h).unwrap());
    let Rgb(r, g, b) = series_color(0);
    // 20 % of the colour over white.
    let mix = |c: u8| (0.2 * f64::from(c) + 0.8 * 255.0).round() as i32;
    let shaded = (0..h)
        .flat_map(|y| (0..w).map(move |x| (x, y)))
        .filter(|&(x, y)| {
            let p = pixel(&pixels, w, x, y);
            (i32::from(p.0) - mix(r)).abs() <= 2
                && (i32::from(p.1) - mix(g)).abs() <= 2
                && (i32::from(p.2) - mix(b)).abs() <= 2
        })
        .count();
    assert!(shaded > (w * h / 10) as usize, "band pixels: {shaded}");
    assert!(render_svg(&chart, w, h).unwrap().contains("<polygon"));
}

#[test]
fn ranges_fit_the_data_and_labels_fall_on_round_numbers() {
    let chart =
        |y_range| Chart { series: vec![Series::new("s", vec![(3.0, 2.0), (97.0, 2.0)])], y_range, ..Chart::default() };
    let c = chart(None);
    let (x, y) = ranges(&c, &visible(&c));
    assert_eq!(x, 3.0..97.0);
    assert!(y.start < 2.0 && y.end > 2.0, "a flat curve gets room: {y:?}");
    let c = chart(Some((0.0, 1.0)));
    assert_eq!(ranges(&c, &visible(&c)).1, 0.0..1.0);
    let c = chart(Some((1.0, f64::NAN)));
    assert_ne!(ranges(&c, &visible(&c)).1, 1.0..f64::NAN, "an unusable range is fitted instead");
    let empty = Chart::default();
    assert_eq!(ranges(&empty, &visible(&empty)), (0.0..1.0, -0.05..1.05));

    let texts = |r: std::ops::Range<f64>| {
        let (ticks, fmt) = labels(&r);
        ticks.into_iter().map(fmt).collect::<Vec<_>>()
    };
    assert_eq!(texts(0.0..1.0), ["0.0", "0.2", "0.4", "0.6", "0.8", "1.0"]);
    assert_eq!(texts(0.0..100.0), ["0", "20", "40", "60", "80", "100"]);
    assert_eq!(texts(0.0..3e6)[..2], ["0", "0.5e6"]);
    assert!(texts(0.0..2.5e-5).iter().all(|t| t == "0" || t.ends_with("e-5")), "{:?}", texts(0.0..2.5e-5));
}

#[test]
fn files_are_written_and_unwritable_paths_named() {
    let dir = tempfile::tempdir().unwrap();
    let chart = curves();
    write_png(&chart, &dir.path().join("c.png"), 200, 100).unwrap();
    write_svg(&chart, &dir.path().join("c.svg"), 200, 100).unwrap();
    assert_eq!(decode(&std::fs::read(dir.path().join("c.png")).unwrap()).1, (200, 100));
    assert!(std::fs::read_to_string(dir.path().join("c.svg")).unwrap().starts_with("<svg"));
    let bad = dir.path().join("missing").join("c.png");
    let err = write_png(&chart, &bad, 200, 100).unwrap_err();
    assert!(err.to_string().contains("missing"), "{err}");
}
