//! A chat client's endpoints and the choice among them: the fewest requests in flight wins, an
//! endpoint that just failed is passed over for a cool-down while others are healthy, and ties
//! rotate so equal endpoints share the load.
//!
//! ```text
//!  pick(avoid) = argmin over endpoints of
//!      (in `avoid`: tried and failed for this request, cooling down, requests in flight, rotation)
//! ```

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use protocol::metrics::ChatMetrics;

/// `http://h:8000`, `http://h:8000/v1` or a full `…/chat/completions` URL → the completions URL.
pub fn completions_url(base: &str) -> String {
    let b = base.trim().trim_end_matches('/');
    if b.ends_with("/chat/completions") {
        b.to_string()
    } else if b.ends_with("/v1") {
        format!("{b}/chat/completions")
    } else {
        format!("{b}/v1/chat/completions")
    }
}

/// One endpoint and its load.
#[derive(Debug)]
pub struct Endpoint {
    /// The chat-completions URL requests go to.
    pub url: String,
    /// `host:port`, for errors, logs and metric labels (no credentials, no path).
    pub label: String,
    in_flight: AtomicUsize,
    cooling_until: Mutex<Option<Instant>>,
}

impl Endpoint {
    fn cooling(&self, now: Instant) -> bool {
        self.cooling_until.lock().map(|u| u.is_some_and(|t| t > now)).unwrap_or(false)
    }
}

/// Counts a request in flight on an endpoint until dropped.
#[derive(Debug)]
pub struct InFlight<'a>(&'a Endpoint, ChatMetrics);

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, Ordering::SeqCst);
        self.1.in_flight(&self.0.label, -1);
    }
}

/// The endpoints of one client.
#[derive(Debug)]
pub struct Pool {
    endpoints: Vec<Endpoint>,
    cooldown: Duration,
    rotation: AtomicUsize,
    metrics: ChatMetrics,
}

impl Pool {
    /// A pool over `bases` (base URLs); an endpoint that fails cools down for `cooldown`;
    /// requests in flight are counted in `metrics`.
    pub fn new(bases: &[String], cooldown: Duration, metrics: ChatMetrics) -> Self {
        let endpoints = bases
            .iter()
            .map(|b| Endpoint {
                url: completions_url(b),
                label: protocol::secret::host_port(b),
                in_flight: AtomicUsize::new(0),
                cooling_until: Mutex::new(None),
            })
            .collect();
        Self { endpoints, cooldown, rotation: AtomicUsize::new(0), metrics }
    }

    /// How many endpoints.
    pub fn len(&self) -> usize {
        self.endpoints.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.endpoints.is_empty()
    }

    /// Endpoint `i`.
    pub fn get(&self, i: usize) -> &Endpoint {
        &self.endpoints[i]
    }

    /// Requests in flight per endpoint, in configuration order.
    pub fn in_flight(&self) -> Vec<usize> {
        self.endpoints.iter().map(|e| e.in_flight.load(Ordering::SeqCst)).collect()
    }

    /// The endpoint to use next, avoiding those in `avoid` while others exist.
    pub fn pick(&self, avoid: &[usize]) -> usize {
        let n = self.endpoints.len();
        let start = self.rotation.fetch_add(1, Ordering::Relaxed) % n.max(1);
        let now = Instant::now();
        (0..n)
            .min_by_key(|&i| {
                let e = &self.endpoints[i];
                (avoid.contains(&i), e.cooling(now), e.in_flight.load(Ordering::SeqCst), (i + n - start) % n)
            })
            .unwrap_or(0)
    }

    /// Marks a request to endpoint `i` as in flight until the guard drops.
    pub fn start(&self, i: usize) -> InFlight<'_> {
        let e = &self.endpoints[i];
        e.in_flight.fetch_add(1, Ordering::SeqCst);
        self.metrics.in_flight(&e.label, 1);
        InFlight(e, self.metrics)
    }

    /// Endpoint `i` failed: pass it over for the cool-down.
    pub fn failed(&self, i: usize) {
        if let Ok(mut until) = self.endpoints[i].cooling_until.lock() {
            *until = Some(Instant::now() + self.cooldown);
        }
    }

    /// Endpoint `i` answered: it is healthy again.
    pub fn succeeded(&self, i: usize) {
        if let Ok(mut until) = self.endpoints[i].cooling_until.lock() {
            *until = None;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pool(n: usize) -> Pool {
        let bases: Vec<String> = (0..n).map(|i| format!("http://h{i}:80")).collect();
        Pool::new(&bases, Duration::from_secs(60), ChatMetrics::judge())
    }

    #[test]
    fn urls_are_completed_and_labels_hide_credentials() {
        assert_eq!(completions_url("http://h:1"), "http://h:1/v1/chat/completions");
        assert_eq!(completions_url("http://h:1/v1/"), "http://h:1/v1/chat/completions");
        assert_eq!(completions_url("https://h/x/v1/chat/completions"), "https://h/x/v1/chat/completions");
        assert_eq!(Pool::new(&["http://u:pw@h:1/v1".into()], Duration::ZERO, ChatMetrics::judge()).get(0).label, "h:1");
    }

    #[test]
    fn the_least_loaded_endpoint_wins_and_ties_rotate() {
        let p = pool(3);
        let _a = p.start(0);
        let _b = p.start(0);
        let _c = p.start(1);
        assert_eq!(p.pick(&[]), 2);
        let _d = p.start(2);
        assert_eq!(p.pick(&[]), 1, "1 and 2 carry one each; 0 carries two");
        drop((_a, _b, _c, _d));
        assert_eq!(p.in_flight(), [0, 0, 0]);
        let picks: std::collections::HashSet<usize> = (0..3).map(|_| p.pick(&[])).collect();
        assert_eq!(picks.len(), 3, "idle endpoints take turns");
    }

    #[test]
    fn failed_and_avoided_endpoints_are_passed_over_while_others_exist() {
        let p = pool(2);
        p.failed(0);
        assert!((0..4).all(|_| p.pick(&[]) == 1));
        assert_eq!(p.pick(&[1]), 0, "a cooling endpoint beats one that failed this judgement");
        p.succeeded(0);
        let _x = p.start(1);
        assert_eq!(p.pick(&[]), 0);
        assert_eq!(pool(1).pick(&[0]), 0, "the only endpoint is used even when avoided");
    }
}
