//! The one face charts are set in: DejaVu Sans (cluster/assets/fonts, Bitstream Vera licence),
//! built into the binary and registered with plotters' ab_glyph text renderer as `sans-serif`
//! once per process, so PNG text needs no fontconfig, freetype or font files on the machine.
//! SVGs name the same family and leave the face to the viewer.

use std::sync::OnceLock;

use plotters::style::FontStyle;

/// The family every text style of a chart names.
pub(super) const FAMILY: &str = "sans-serif";

static DEJAVU_SANS: &[u8] = include_bytes!("../../assets/fonts/DejaVuSans.ttf");

/// Registers the built-in face (the first call does; later calls return its result).
pub(super) fn ensure_registered() -> Result<(), String> {
    static REGISTERED: OnceLock<Result<(), String>> = OnceLock::new();
    REGISTERED
        .get_or_init(|| {
            plotters::style::register_font(FAMILY, FontStyle::Normal, DEJAVU_SANS)
                .map_err(|_| "the built-in DejaVu Sans face did not parse".to_string())
        })
        .clone()
}
