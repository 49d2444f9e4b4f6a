//! An environment server's address as configured (`http://host:port[/prefix]` or `https://…`):
//! checked once, with the rule the env-workers follow for their token — a server off loopback
//! is reached only with the shared token — and the URLs of the protocol's calls under it.

use protocol::secret::redact_url;

use crate::error::EnvError;

/// Whether `endpoint` names an environment server (an `http://` or `https://` URL) rather than
/// an env-worker's `host:port`.
pub fn is_http(endpoint: &str) -> bool {
    endpoint.starts_with("http://") || endpoint.starts_with("https://")
}

/// A checked endpoint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint {
    base: String,
    peer: String,
}

impl Endpoint {
    /// Checks `endpoint`: an http(s) URL with a host, no query or fragment, no credentials in
    /// it, and, when `has_token` is false, a loopback host (`localhost`, `127.0.0.0/8`, `::1`).
    pub fn parse(endpoint: &str, has_token: bool) -> Result<Self, EnvError> {
        let peer = redact_url(endpoint);
        let bad = |detail: String| EnvError::Endpoint { endpoint: peer.clone(), detail };
        if !is_http(endpoint) {
            return Err(bad("expected an http:// or https:// URL".into()));
        }
        let url = reqwest::Url::parse(endpoint).map_err(|e| bad(format!("not a URL: {e}")))?;
        if url.query().is_some() || url.fragment().is_some() {
            return Err(bad("expected no query or fragment (the protocol's paths go under the URL)".into()));
        }
        if !url.username().is_empty() || url.password().is_some() {
            return Err(bad("expected no credentials in the URL (the shared token is env_worker.token_env's)".into()));
        }
        let host = url.host_str().filter(|h| !h.is_empty()).ok_or_else(|| bad("expected a host".into()))?;
        let ip = host.trim_start_matches('[').trim_end_matches(']').parse::<std::net::IpAddr>();
        let loopback = host.eq_ignore_ascii_case("localhost") || ip.is_ok_and(|ip| ip.is_loopback());
        if !loopback && !has_token {
            return Err(bad(
                "a server off loopback is reached only with the shared token: set the environment variable that \
                 env_worker.token_env names"
                    .into(),
            ));
        }
        Ok(Self { base: endpoint.trim_end_matches('/').to_string(), peer })
    }

    /// The endpoint as errors and logs name it (credentials never appear).
    pub fn peer(&self) -> &str {
        &self.peer
    }

    /// The URL of the protocol call `op` (`open` → `<base>/v1/open`).
    pub fn url(&self, op: &str) -> String {
        format!("{}/v1/{op}", self.base)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_needs_no_token_and_other_hosts_do() {
        for ok in ["http://127.0.0.1:9000", "http://localhost:9000/", "http://[::1]:80/env"] {
            assert!(Endpoint::parse(ok, false).is_ok(), "{ok}");
        }
        let err = Endpoint::parse("http://10.0.0.7:9000", false).unwrap_err().to_string();
        assert!(err.contains("env_worker.token_env") && err.contains("10.0.0.7"), "{err}");
        assert!(Endpoint::parse("https://env.example:443", true).is_ok());
    }

    #[test]
    fn bad_endpoints_say_what_is_wrong() {
        let cases = [
            ("127.0.0.1:9000", "http:// or https://"),
            ("http://127.0.0.1:9000/?x=1", "no query"),
            ("http://u:secret@127.0.0.1:9000", "no credentials"),
            ("http://", "not a URL"),
        ];
        for (endpoint, says) in cases {
            let err = Endpoint::parse(endpoint, true).unwrap_err().to_string();
            assert!(err.contains(says), "{endpoint}: {err}");
            assert!(!err.contains("secret"), "{err}");
        }
    }

    #[test]
    fn calls_go_under_the_base() {
        let e = Endpoint::parse("http://127.0.0.1:9000/env/", false).unwrap();
        assert_eq!(e.url("open"), "http://127.0.0.1:9000/env/v1/open");
    }
}
