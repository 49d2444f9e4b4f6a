//! The results of `reagent bench queue`: medians, ratios, and their rendering as a Markdown
//! table (to paste into BENCHMARKS.md) or as JSON.

use serde::Serialize;

/// How the numbers were obtained: enough to reproduce them.
#[derive(Debug, Clone, Serialize)]
pub struct Header {
    /// The exact command line.
    pub command: String,
    /// CPUs available to this process.
    pub nproc: usize,
    /// The CPU model, when /proc/cpuinfo names it.
    pub cpu: Option<String>,
    /// Which server, and how it was started.
    pub server: String,
    /// Whether the server's append-only file is on.
    pub aof: bool,
    /// Messages per measurement (`None`: chosen per payload, [`Row::messages`]).
    pub messages: Option<u64>,
    /// Unmeasured runs of each side before the measured ones.
    pub warmup: u16,
    /// Reagent producers.
    pub producers: u16,
    /// Reagent consumers.
    pub consumers: u16,
    /// Messages per producer batch and consumer read.
    pub batch: u16,
    /// Threads of the client runtime that drives producers and consumers.
    pub client_threads: u16,
    /// Measurements per number; the median is reported.
    pub repeats: u16,
    /// The baseline's command, per size.
    pub baseline: String,
}

/// One payload's results.
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    /// Payload bytes (a trajectory's: its encoding).
    pub size_bytes: usize,
    /// The trajectory's tokens, when the payload is one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub trajectory_tokens: Option<usize>,
    /// Messages per run.
    pub messages: u64,
    /// Times a producer waited at the high-water mark, over this payload's runs (consumers
    /// slower than producers: the figure is then the consumers' rate).
    pub producer_waits: u64,
    /// Median end-to-end messages per second through Reagent's queue.
    pub reagent_msgs_per_s: f64,
    /// Median XADDs per second by redis-benchmark.
    pub redis_xadd_per_s: f64,
    /// `reagent_msgs_per_s / redis_xadd_per_s`.
    pub ratio: f64,
    /// Every Reagent measurement, in order.
    pub reagent_runs: Vec<f64>,
    /// Every redis-benchmark measurement, in order.
    pub xadd_runs: Vec<f64>,
}

impl Row {
    /// Summarises the runs of one size.
    pub fn new(size_bytes: usize, reagent_runs: Vec<f64>, xadd_runs: Vec<f64>) -> Self {
        let (reagent, xadd) = (median(&reagent_runs), median(&xadd_runs));
        Self {
            size_bytes,
            trajectory_tokens: None,
            messages: 0,
            producer_waits: 0,
            reagent_msgs_per_s: reagent,
            redis_xadd_per_s: xadd,
            ratio: reagent / xadd,
            reagent_runs,
            xadd_runs,
        }
    }
}

impl Row {
    fn label(&self) -> String {
        payload_label(self.size_bytes, self.trajectory_tokens)
    }
}

/// `4 KiB`; a trajectory: `trajectory, 512 tokens (5873 B)`.
pub fn payload_label(size_bytes: usize, tokens: Option<usize>) -> String {
    match tokens {
        Some(t) => format!("trajectory, {t} tokens ({})", human_size(size_bytes)),
        None => human_size(size_bytes),
    }
}

/// The 1-minute load average (Linux), for the report: the machine is shared.
pub fn load_average() -> Option<f64> {
    std::fs::read_to_string("/proc/loadavg").ok()?.split_whitespace().next()?.parse().ok()
}

/// The median (the mean of the middle two for an even count); NaN when empty.
pub fn median(values: &[f64]) -> f64 {
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

/// `4096` → `4 KiB`; sizes that are not whole KiB stay in bytes.
pub fn human_size(bytes: usize) -> String {
    match bytes {
        b if b >= 1 << 20 && b % (1 << 20) == 0 => format!("{} MiB", b >> 20),
        b if b >= 1 << 10 && b % (1 << 10) == 0 => format!("{} KiB", b >> 10),
        b => format!("{b} B"),
    }
}

/// The lines printed before measuring.
pub fn preamble(h: &Header) -> String {
    let cpu = h.cpu.as_deref().map(|c| format!(" ({c})")).unwrap_or_default();
    let aof = if h.aof { "on" } else { "off" };
    let messages = match h.messages {
        Some(n) => format!("{n} messages per run"),
        None => "about 200 MB per run (10,000 to 50,000 messages)".to_string(),
    };
    format!(
        "command:  {}\nmachine:  nproc {}{cpu}\nserver:   {}; append-only file {aof}\nreagent:  {} producer(s), {} consumer(s), batch {}, {messages}, median of {} after {} warm-up(s); client runtime of {} thread(s)\nbaseline: {}\n",
        h.command, h.nproc, h.server, h.producers, h.consumers, h.batch, h.repeats, h.warmup, h.client_threads, h.baseline
    )
}

/// The results as a Markdown table, with every run listed beneath.
pub fn table(rows: &[Row]) -> String {
    let mut out = String::from("| payload | reagent msgs/s | redis-benchmark XADD/s | ratio |\n|--------:|---------------:|-----------------------:|------:|\n");
    for r in rows {
        out +=
            &format!("| {} | {:.0} | {:.0} | {:.2} |\n", r.label(), r.reagent_msgs_per_s, r.redis_xadd_per_s, r.ratio);
    }
    out.push('\n');
    for r in rows {
        let list = |v: &[f64]| v.iter().map(|x| format!("{x:.0}")).collect::<Vec<_>>().join(", ");
        out += &format!(
            "runs at {}, {} messages each: reagent [{}], XADD [{}]; producer waits {}\n",
            r.label(),
            r.messages,
            list(&r.reagent_runs),
            list(&r.xadd_runs),
            r.producer_waits
        );
    }
    out
}

/// The header and results as one JSON object.
pub fn json(header: &Header, rows: &[Row]) -> String {
    serde_json::json!({ "header": header, "results": rows }).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn medians_of_odd_and_even_counts() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), 2.5);
        assert!(median(&[]).is_nan());
    }

    #[test]
    fn sizes_read_as_people_write_them() {
        assert_eq!(human_size(4096), "4 KiB");
        assert_eq!(human_size(65536), "64 KiB");
        assert_eq!(human_size(1000), "1000 B");
        assert_eq!(human_size(2 << 20), "2 MiB");
    }

    #[test]
    fn the_table_has_a_row_per_size_with_its_ratio() {
        let rows = [Row::new(4096, vec![50.0, 40.0, 60.0], vec![100.0, 100.0, 100.0])];
        let t = table(&rows);
        assert!(t.contains("| 4 KiB | 50 | 100 | 0.50 |"), "{t}");
        assert!(t.contains("reagent [50, 40, 60]"), "{t}");
    }

    #[test]
    fn a_trajectory_row_names_its_tokens_bytes_and_waits() {
        let row = Row::new(6759, vec![30.0], vec![100.0]);
        let rows = [Row { trajectory_tokens: Some(512), producer_waits: 3, messages: 29_926, ..row }];
        let t = table(&rows);
        assert!(t.contains("| trajectory, 512 tokens (6759 B) | 30 | 100 | 0.30 |"), "{t}");
        assert!(
            t.contains(
                "runs at trajectory, 512 tokens (6759 B), 29926 messages each: reagent [30], XADD [100]; producer waits 3"
            ),
            "{t}"
        );
    }
}
